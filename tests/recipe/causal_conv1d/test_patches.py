"""Every patch in recipe/causal-conv1d/patches applies cleanly, in order, to the real pinned sdist."""

import re
import subprocess
import tarfile
from pathlib import Path

import pytest
from ssm_conda.paths import RECIPE_DIR
from ssm_conda.sources import recipe_source, unpack_patched

PATCHES = recipe_source()["patches"]


def test_recipe_lists_every_patch_file_in_order():
    on_disk = sorted(p.relative_to(RECIPE_DIR).as_posix() for p in (RECIPE_DIR / "patches").glob("*.patch"))
    assert PATCHES == on_disk


@pytest.mark.parametrize("patch", PATCHES)
def test_patch_has_a_header_saying_why(patch):
    text = (RECIPE_DIR / patch).read_text()
    header = text.split("diff --git", 1)[0].strip()
    assert len(header.splitlines()) >= 3, f"{patch}: header must say what and why"
    assert re.search(r"^--- a/\S+\n\+\+\+ b/\S+\n@@ ", text, re.M), f"{patch}: not a unified diff"


def test_patches_apply_cleanly_in_order(sdist, tmp_path):
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path, filter="data")
    (root,) = tmp_path.iterdir()
    for patch in PATCHES:
        result = subprocess.run(
            ["patch", "-p1", "--batch", "--forward", "-i", str(RECIPE_DIR / patch)],
            cwd=root, capture_output=True, text=True,
        )
        assert result.returncode == 0, f"{patch}: {result.stdout}{result.stderr}"
        assert "offset" not in result.stdout and "fuzz" not in result.stdout, f"{patch}: {result.stdout}"
    assert not list(root.rglob("*.rej")) and not list(root.rglob("*.orig"))


def test_patched_setup_py_compiles(tmp_path):
    root = unpack_patched(tmp_path)
    compile(Path(root, "setup.py").read_text(), "setup.py", "exec")
