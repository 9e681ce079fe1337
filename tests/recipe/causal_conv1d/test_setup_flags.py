"""causal-conv1d's patched setup.py, run for real with its setup() call captured.

The stand-in torch and the fake nvcc come from tests/recipe/setup_py.py (shared with the mamba-ssm
tests): no torch, GPU or CUDA toolkit needed; the machine's real nvcc runs the cases too where
there is one.
"""

from pathlib import Path

import pytest
from ssm_conda_dev.sdist import unpack_patched

from tests.recipe.setup_py import Nvcc, gencodes, nvcc_for, run_setup, sass, upstream_archs, with_nvcc, write_torch_stub


@pytest.fixture
def nvcc(request, tmp_path) -> Nvcc:
    return nvcc_for(request.param, tmp_path)


@pytest.fixture(scope="module")
def patched(tmp_path_factory) -> Path:
    return unpack_patched(tmp_path_factory.mktemp("patched"))


@pytest.fixture(scope="module")
def unpatched(tmp_path_factory) -> Path:
    return unpack_patched(tmp_path_factory.mktemp("unpatched"), patches=False)


@pytest.fixture(scope="module")
def stub_path(tmp_path_factory) -> Path:
    return write_torch_stub(tmp_path_factory.mktemp("stub"))


@with_nvcc("12.6", "12.9", "13.0")
def test_unset_arch_list_keeps_upstream_list_without_sm103(patched, stub_path, nvcc):
    flags = gencodes(run_setup(patched, stub_path, nvcc.cuda_home)["nvcc"])
    assert flags == sass(*(cc for cc in upstream_archs(nvcc.version) if cc != "103"))


@with_nvcc("12.6", "12.9", "13.0")
def test_unpatched_setup_ignores_arch_list_and_emits_sm103(unpatched, stub_path, nvcc):
    """The control: upstream's setup.py shows the bugs the patches fix."""
    result = run_setup(unpatched, stub_path, nvcc.cuda_home, TORCH_CUDA_ARCH_LIST="9.0")
    flags = gencodes(result["nvcc"])
    assert flags == sass(*upstream_archs(nvcc.version))
    assert ("arch=compute_103,code=sm_103" in flags) is (nvcc.version >= (13, 0))
    assert result["nvcc"][-2:] == ["--threads", "4"]
    assert "ninja" in result["install_requires"]
    assert result["force_build"] is False


@with_nvcc("13.0")
@pytest.mark.parametrize(
    ("arch_list", "expected"),
    [
        ("9.0", sass("90")),
        ("8.0;9.0;10.0+PTX", sass("80", "90", "100") + ["arch=compute_100,code=compute_100"]),
        ("8.0 9.0", sass("80", "90")),
        ("9.0a", sass("90a")),
        ("12.1+PTX", sass("121") + ["arch=compute_121,code=compute_121"]),
        ("10.3", sass("103")),  # set explicitly, the user's list is obeyed as given
    ],
)
def test_arch_list_alone_decides_gencodes(patched, stub_path, nvcc, arch_list, expected):
    result = run_setup(patched, stub_path, nvcc.cuda_home, TORCH_CUDA_ARCH_LIST=arch_list)
    assert gencodes(result["nvcc"]) == expected


@with_nvcc("13.0")
def test_bad_arch_list_entry_is_a_clear_error(patched, stub_path, nvcc):
    result = run_setup(patched, stub_path, nvcc.cuda_home, TORCH_CUDA_ARCH_LIST="8.0;Hopper")
    assert result["error"] == (
        "RuntimeError: TORCH_CUDA_ARCH_LIST entry 'Hopper' is not an architecture like 8.0, 9.0a or 10.0+PTX"
    )


@with_nvcc("13.0")
@pytest.mark.parametrize(("env", "threads"), [({}, "1"), ({"NVCC_THREADS": "3"}, "3")])
def test_nvcc_threads_from_environment(patched, stub_path, nvcc, env, threads):
    assert run_setup(patched, stub_path, nvcc.cuda_home, **env)["nvcc"][-2:] == ["--threads", threads]


@with_nvcc("13.0")
def test_bad_nvcc_threads_is_a_clear_error(patched, stub_path, nvcc):
    result = run_setup(patched, stub_path, nvcc.cuda_home, NVCC_THREADS="four")
    assert result["error"] == "RuntimeError: NVCC_THREADS='four' is not a positive integer"


@with_nvcc("13.0")
def test_no_ninja_at_run_time(patched, stub_path, nvcc):
    assert run_setup(patched, stub_path, nvcc.cuda_home)["install_requires"] == ["torch", "packaging"]


@with_nvcc("13.0")
@pytest.mark.parametrize(("value", "expected"), [(None, True), ("TRUE", True), ("FALSE", False)])
def test_compiles_from_source_unless_told_false(patched, stub_path, nvcc, value, expected):
    env = {} if value is None else {"CAUSAL_CONV1D_FORCE_BUILD": value}
    assert run_setup(patched, stub_path, nvcc.cuda_home, **env)["force_build"] is expected


def test_missing_nvcc_is_a_clear_error_not_a_name_error(patched, stub_path):
    result = run_setup(patched, stub_path, "")
    assert result["error"].startswith("RuntimeError: causal_conv1d: nvcc not found")
    assert "CUDA_HOME" in result["error"]


def test_unpatched_setup_without_nvcc_dies_with_name_error(unpatched, stub_path):
    assert "NameError" in run_setup(unpatched, stub_path, "")["error"]


@with_nvcc("13.0")
def test_torch_chooses_the_cxx_standard(patched, stub_path, nvcc):
    """torch 2.14's headers refuse C++ below 20, and its cpp_extension passes the standard they need. Upstream's CUDA
    branch names none (its -std=c++17 is the ROCm branch's), so causal-conv1d needs no patch for it: mamba-ssm's
    0006-let-torch-choose-the-cxx-standard.patch removes the CUDA branch's there."""
    result = run_setup(patched, stub_path, nvcc.cuda_home)
    for compiler in ("cxx", "nvcc"):
        assert not [a for a in result[compiler] if a.startswith("-std=")], compiler
    source = (patched / "setup.py").read_text()
    assert source.count("-std=c++17") == 2 and source.index("-std=c++17") < source.index("    else:\n        extra_compile_args")
