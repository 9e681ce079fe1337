"""mamba-ssm's patched setup.py, run for real with its setup() call captured.

The stand-in torch and the fake nvcc come from tests/recipe/setup_py.py (shared with the
causal-conv1d tests): no torch, GPU or CUDA toolkit needed; the machine's real nvcc runs the cases
too where there is one. The stand-in torch reports the nvcc's CUDA release unless a test says
otherwise, as in a conda build, where cuda-version pins both.
"""

import subprocess
import sys
from pathlib import Path

import pytest
from ssm_conda.paths import recipe_of
from ssm_conda_dev.sdist import unpack_patched

from tests.recipe.setup_py import (
    Nvcc,
    gencodes,
    nvcc_for,
    run_setup,
    sass,
    setup_env,
    upstream_archs,
    with_nvcc,
    write_torch_stub,
)

MAMBA_RECIPE = recipe_of("mamba-ssm")
DROPPED = ("ninja", "tilelang", "apache-tvm-ffi", "quack-kernels")
RUNTIME_REQUIREMENTS = ["torch", "packaging", "einops", "triton>=3.5.0", "transformers"]


@pytest.fixture
def nvcc(request, tmp_path) -> Nvcc:
    return nvcc_for(request.param, tmp_path)


@pytest.fixture(scope="module")
def patched(tmp_path_factory) -> Path:
    return unpack_patched(tmp_path_factory.mktemp("patched"), package="mamba-ssm")


@pytest.fixture(scope="module")
def unpatched(tmp_path_factory) -> Path:
    return unpack_patched(tmp_path_factory.mktemp("unpatched"), patches=False, package="mamba-ssm")


@pytest.fixture(scope="module")
def stub_path(tmp_path_factory) -> Path:
    return write_torch_stub(tmp_path_factory.mktemp("stub"))


def run(source: Path, stub: Path, nvcc: Nvcc, **env: str) -> dict:
    """run_setup with the stand-in torch built for the nvcc's CUDA release."""
    return run_setup(source, stub, nvcc.cuda_home, torch_cuda=nvcc.release, **env)


def requires_dist(source: Path, stub: Path, egg_base: Path) -> list[str]:
    """The Requires-Dist lines setuptools writes for source (egg_info: setup.py and pyproject.toml
    together, as a build does); no extension needed for the metadata."""
    egg_base.mkdir()
    subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(egg_base)], cwd=source,
                   env=setup_env(stub, "", MAMBA_SKIP_CUDA_BUILD="TRUE"), capture_output=True, check=True)
    (pkg_info,) = egg_base.glob("*.egg-info/PKG-INFO")
    return [line.removeprefix("Requires-Dist: ") for line in pkg_info.read_text().splitlines()
            if line.startswith("Requires-Dist: ")]


def names(requirements: list[str]) -> set[str]:
    return {r.split(";")[0].split("=")[0].split("<")[0].split(">")[0].strip() for r in requirements}


@with_nvcc("12.6", "12.9", "13.0")
def test_unset_arch_list_keeps_upstream_list_without_sm103(patched, stub_path, nvcc):
    flags = gencodes(run(patched, stub_path, nvcc)["nvcc"])
    assert flags == sass(*(cc for cc in upstream_archs(nvcc.version) if cc != "103"))


@with_nvcc("12.6", "12.9", "13.0")
def test_unpatched_setup_shows_upstream_behaviour(unpatched, stub_path, nvcc):
    """The control: upstream's setup.py ignores the list, emits sm_103 on 13.x, uses 4 threads,
    requires ninja and the Mamba-3 kernel packages, and tries the wheel download by default."""
    result = run(unpatched, stub_path, nvcc, TORCH_CUDA_ARCH_LIST="9.0")
    flags = gencodes(result["nvcc"])
    assert flags == sass(*upstream_archs(nvcc.version))
    assert ("arch=compute_103,code=sm_103" in flags) is (nvcc.version >= (13, 0))
    assert result["nvcc"][-2:] == ["--threads", "4"]
    assert set(DROPPED) <= names(result["install_requires"])
    assert result["force_build"] is False


@with_nvcc("12.9", "13.0")
@pytest.mark.parametrize(
    ("arch_list", "expected"),
    [
        ("9.0", sass("90")),
        ("8.0;9.0+PTX", sass("80", "90") + ["arch=compute_90,code=compute_90"]),
        ("8.0;9.0;10.0+PTX", sass("80", "90", "100") + ["arch=compute_100,code=compute_100"]),
        ("8.0 9.0", sass("80", "90")),
        ("9.0a", sass("90a")),
        ("10.3", sass("103")),  # set explicitly, the user's list is obeyed as given
    ],
)
def test_arch_list_alone_decides_gencodes(patched, stub_path, nvcc, arch_list, expected):
    result = run(patched, stub_path, nvcc, TORCH_CUDA_ARCH_LIST=arch_list)
    assert gencodes(result["nvcc"]) == expected
    assert result["arch_list_after"] == arch_list  # CUDA majors match: upstream leaves it alone


def other_major(nvcc: Nvcc) -> str:
    """A CUDA release of another major than nvcc's, for a torch that does not match it."""
    return "12.9" if nvcc.version[0] >= 13 else "13.0"


@with_nvcc("12.9", "13.0")
def test_arch_list_survives_upstreams_clearing_on_a_cuda_major_mismatch(patched, stub_path, nvcc):
    """nvcc and torch of different CUDA majors: upstream empties TORCH_CUDA_ARCH_LIST (it still
    does), but the flags come from the list as it was given, not from the default list."""
    result = run_setup(patched, stub_path, nvcc.cuda_home, torch_cuda=other_major(nvcc),
                       TORCH_CUDA_ARCH_LIST="8.0;9.0+PTX")
    assert gencodes(result["nvcc"]) == sass("80", "90") + ["arch=compute_90,code=compute_90"]
    assert result["arch_list_after"] == ""


@with_nvcc("12.9", "13.0")
def test_unpatched_setup_clears_arch_list_on_a_cuda_major_mismatch(unpatched, stub_path, nvcc):
    """The control for the test above: upstream's clearing, which the patch keeps."""
    result = run_setup(unpatched, stub_path, nvcc.cuda_home, torch_cuda=other_major(nvcc), TORCH_CUDA_ARCH_LIST="8.0")
    assert result["arch_list_after"] == ""


@with_nvcc("13.0")
def test_bad_arch_list_entry_is_a_clear_error(patched, stub_path, nvcc):
    result = run(patched, stub_path, nvcc, TORCH_CUDA_ARCH_LIST="8.0;Hopper")
    assert result["error"] == (
        "RuntimeError: TORCH_CUDA_ARCH_LIST entry 'Hopper' is not an architecture like 8.0, 9.0a or 10.0+PTX"
    )


@with_nvcc("13.0")
@pytest.mark.parametrize(("env", "threads"), [({}, "1"), ({"NVCC_THREADS": "3"}, "3")])
def test_nvcc_threads_from_environment(patched, stub_path, nvcc, env, threads):
    assert run(patched, stub_path, nvcc, **env)["nvcc"][-2:] == ["--threads", threads]


@with_nvcc("13.0")
def test_bad_nvcc_threads_is_a_clear_error(patched, stub_path, nvcc):
    result = run(patched, stub_path, nvcc, NVCC_THREADS="four")
    assert result["error"] == "RuntimeError: NVCC_THREADS='four' is not a positive integer"


@with_nvcc("13.0")
def test_setup_install_requires_has_no_build_tool_or_unpackaged_kernels(patched, stub_path, nvcc):
    assert run(patched, stub_path, nvcc)["install_requires"] == RUNTIME_REQUIREMENTS


def test_built_metadata_has_no_build_tool_or_unpackaged_kernels(patched, stub_path, tmp_path):
    """pyproject.toml's static dependencies are what setuptools writes, whatever setup() says."""
    requires = requires_dist(patched, stub_path, tmp_path / "egg")
    assert not names(requires) & set(DROPPED), requires
    assert set(RUNTIME_REQUIREMENTS) <= set(requires)


def test_unpatched_metadata_requires_them(unpatched, stub_path, tmp_path):
    """The control: upstream's metadata lists ninja, tilelang, apache-tvm-ffi and quack-kernels."""
    assert set(DROPPED) <= names(requires_dist(unpatched, stub_path, tmp_path / "egg"))


@with_nvcc("13.0")
@pytest.mark.parametrize(("value", "expected"), [(None, True), ("TRUE", True), ("FALSE", False)])
def test_compiles_from_source_unless_told_false(patched, stub_path, nvcc, value, expected):
    env = {} if value is None else {"MAMBA_FORCE_BUILD": value}
    assert run(patched, stub_path, nvcc, **env)["force_build"] is expected


def test_missing_nvcc_is_a_clear_error_not_a_name_error(patched, stub_path):
    result = run_setup(patched, stub_path, "")
    assert result["error"].startswith("RuntimeError: mamba_ssm: nvcc not found")
    assert "CUDA_HOME" in result["error"]


def test_unpatched_setup_without_nvcc_dies_with_name_error(unpatched, stub_path):
    assert "NameError" in run_setup(unpatched, stub_path, "")["error"]


@with_nvcc("13.0")
def test_torch_chooses_the_cxx_standard(patched, unpatched, stub_path, nvcc):
    """torch >= 2.13's headers need C++20 and its cpp_extension passes it; a hard-coded C++17 broke the build."""
    for compiler in ("cxx", "nvcc"):
        assert not [a for a in run(patched, stub_path, nvcc)[compiler] if a.startswith("-std=")], compiler
        assert "-std=c++17" in run(unpatched, stub_path, nvcc)[compiler], compiler
