"""conda-build (26.7.1, through py-rattler-build) renders the recipes as `ssm-conda plan` does: the same
variants, build strings and run requirements from the same variants/ file; without one it says a variants
file is missing. A `plan --write-variants` file makes it render exactly the selected variant."""

from __future__ import annotations

import re

import pytest
import yaml
from ssm_conda.matrix import load_variant_files
from ssm_conda.project import NAMES

from tests.conda_client import Conda
from tests.rendered import whole_matrix
from tests.repo import RECIPES_DIR, REPO_ROOT


def conda_render(conda: Conda, package: str, *args: str) -> dict[str, list[str]]:
    """build string -> run requirements of every variant `conda render` prints."""
    out = conda.run("render", str(RECIPES_DIR / package), *args, cwd=REPO_ROOT).stdout
    documents = [yaml.safe_load(f"schema_version: 1{text}") for text in out.split("schema_version: 1")[1:]]
    return {d["build"]["string"]: list(d["requirements"]["run"]) for d in documents}


@pytest.mark.parametrize("vfile", load_variant_files(), ids=lambda f: f.path.name)
@pytest.mark.parametrize("package", NAMES)
def test_conda_render_gives_what_plan_renders(conda, package, vfile):
    planned = {v.build_string: list(v.rendered.recipe.requirements.run)
               for v in whole_matrix() if v.package == package and v.variant_file.path == vfile.path}
    assert len(planned) >= 4  # cuda129.yaml: four pytorch minors; cuda130.yaml: x five generations
    assert conda_render(conda, package, "-m", str(vfile.path)) == planned


@pytest.mark.parametrize("package", NAMES)
def test_without_a_variants_file_conda_build_says_one_is_needed(conda, package):
    result = conda.run("render", str(RECIPES_DIR / package), cwd=REPO_ROOT, check=False)
    assert result.returncode != 0
    assert "missing or incorrect variant file configuration" in result.stdout + result.stderr


@pytest.mark.parametrize("selection", [
    pytest.param(("--cuda", "13.0", "--python", "3.12", "--torch", "2.13", "--generation", "sm90"), id="one variant"),
    pytest.param(("--cuda", "13.0", "--torch", "2.12"), id="every Python and generation of a torch"),
    pytest.param(("--python", "3.11", "--torch", "2.13", "--generation", "all"), id="both CUDA files"),
])
def test_plan_writes_a_variants_file_conda_build_renders_exactly(conda, tmp_path, capsys, selection):
    from ssm_conda import cli

    written = tmp_path / "selection.yaml"
    assert cli.main(["plan", *selection, "--write-variants", str(written)]) == 0
    planned = {line.split()[-1] for line in capsys.readouterr().out.splitlines() if re.search(r"_h[0-9a-f]{7}_0$", line)}
    assert planned
    for package in NAMES:
        assert set(conda_render(conda, package, "-m", str(written))) == {b for b in planned}
