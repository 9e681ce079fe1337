"""Both packages compile without nvcc's source-line tables unless NVCC_LINEINFO=1 (the variant key
nvcc_lineinfo, `ssm-conda build --line-info`): their patched setup.py files, run for real with a
fake nvcc 13.0, against upstream's as the control; and the recipes pass the key through."""

from pathlib import Path

import pytest
from ssm_conda.matrix import plan
from ssm_conda.project import NAMES
from ssm_conda.selection import Selection
from ssm_conda_dev.sdist import unpack_patched

from tests.recipe.setup_py import fake_nvcc, run_setup, write_torch_stub


@pytest.fixture(scope="module")
def stub_path(tmp_path_factory) -> Path:
    return write_torch_stub(tmp_path_factory.mktemp("stub"))


@pytest.fixture(scope="module")
def nvcc_home(tmp_path_factory) -> str:
    return fake_nvcc(tmp_path_factory.mktemp("cuda"), "13.0").cuda_home


@pytest.fixture(scope="module", params=NAMES)
def sources(request, tmp_path_factory) -> tuple[Path, Path]:
    """(patched, unpatched) source trees of one package."""
    return (unpack_patched(tmp_path_factory.mktemp("patched"), package=request.param),
            unpack_patched(tmp_path_factory.mktemp("unpatched"), patches=False, package=request.param))


@pytest.mark.parametrize(("env", "expected"), [({}, False), ({"NVCC_LINEINFO": "0"}, False), ({"NVCC_LINEINFO": "1"}, True)])
def test_line_tables_only_on_request(sources, stub_path, nvcc_home, env, expected):
    patched, unpatched = sources
    assert ("-lineinfo" in run_setup(patched, stub_path, nvcc_home, **env)["nvcc"]) is expected
    # the control: upstream's setup.py always asks for them
    assert "-lineinfo" in run_setup(unpatched, stub_path, nvcc_home, **env)["nvcc"]


def test_a_bad_value_is_a_clear_error(sources, stub_path, nvcc_home):
    result = run_setup(sources[0], stub_path, nvcc_home, NVCC_LINEINFO="yes")
    assert result["error"] == "RuntimeError: NVCC_LINEINFO='yes' is not 0 or 1 (1: keep source-line tables)"


@pytest.mark.parametrize("package", NAMES)
def test_the_variant_key_reaches_the_build_and_the_package_test(package):
    """Off in variants/, on with the override --line-info sets; the test section checks the same value."""
    selection = Selection(cuda="13.0", python="3.12", torch="2.13", generations=("sm90",), packages=(package,))
    (off,) = plan(selection)
    (on,) = plan(selection, overrides={"nvcc_lineinfo": ["1"]})
    for variant, value in ((off, "0"), (on, "1")):
        recipe = variant.rendered.recipe.to_dict()
        assert recipe["build"]["script"]["env"]["NVCC_LINEINFO"] == value
        expected = [t["script"]["env"]["SSM_CONDA_EXPECTED_LINEINFO"] for t in recipe["tests"] if "env" in t.get("script", {})]
        assert expected == [value]
    assert off.build_string != on.build_string
