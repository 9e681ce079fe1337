"""Every package's patches: listed in its recipe, each with a header saying why, applying cleanly
and in order to the real pinned sdist."""

import re
import subprocess
import tarfile
from pathlib import Path

import pytest
from ssm_conda.paths import recipe_of
from ssm_conda.project import NAMES
from ssm_conda_dev.sdist import fetch_sdist, recipe_source, unpack_patched

PATCHES = [(package, patch) for package in NAMES for patch in recipe_source(package)["patches"]]


@pytest.mark.parametrize("package", NAMES)
def test_recipe_lists_every_patch_file_in_order(package):
    folder = recipe_of(package).parent
    on_disk = sorted(p.relative_to(folder).as_posix() for p in (folder / "patches").glob("*.patch"))
    assert recipe_source(package)["patches"] == on_disk and on_disk


@pytest.mark.parametrize(("package", "patch"), PATCHES)
def test_patch_has_a_header_saying_why(package, patch):
    text = (recipe_of(package).parent / patch).read_text()
    header = text.split("diff --git", 1)[0].split("\n--- a/", 1)[0].strip()
    assert len(header.splitlines()) >= 3, f"{patch}: header must say what and why"
    assert re.search(r"^--- a/\S+\n\+\+\+ b/\S+\n@@ ", text, re.M), f"{patch}: not a unified diff"


@pytest.mark.parametrize("package", NAMES)
def test_patches_apply_cleanly_in_order(package, tmp_path):
    with tarfile.open(fetch_sdist(package)) as tar:
        tar.extractall(tmp_path, filter="data")
    (root,) = tmp_path.iterdir()
    for patch in recipe_source(package)["patches"]:
        result = subprocess.run(
            ["patch", "-p1", "--batch", "--forward", "-i", str(recipe_of(package).parent / patch)],
            cwd=root, capture_output=True, text=True,
        )
        assert result.returncode == 0, f"{patch}: {result.stdout}{result.stderr}"
        assert "offset" not in result.stdout and "fuzz" not in result.stdout, f"{patch}: {result.stdout}"
    assert not list(root.rglob("*.rej")) and not list(root.rglob("*.orig"))


@pytest.mark.parametrize("package", NAMES)
def test_patched_setup_py_compiles(package, tmp_path):
    root = unpack_patched(tmp_path, package=package)
    compile(Path(root, "setup.py").read_text(), "setup.py", "exec")
