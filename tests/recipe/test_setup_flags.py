"""The patched setup.py, run for real with its setup() call captured.

setup.py imports torch only for its version, ABI flag and the cpp_extension classes; a minimal
stand-in torch records what CUDAExtension is given, so these tests need neither torch nor a GPU.
The nvcc version comes from the machine's real nvcc (CUDA_HOME), as in a build.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ssm_conda.sources import unpack_patched

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="no nvcc on PATH")

TORCH_STUB = '''
__version__ = "2.14.1"
class version:
    cuda = "13.0"
    hip = None
class _C:
    _GLIBCXX_USE_CXX11_ABI = True
'''
CPP_EXTENSION_STUB = '''
import os
class _Recorded:
    def __init__(self, name, sources, **kwargs):
        self.name, self.sources, self.kwargs = name, sources, kwargs
def CUDAExtension(name, sources, **kwargs):
    return _Recorded(name, sources, **kwargs)
CppExtension = CUDAExtension
class BuildExtension:
    pass
CUDA_HOME = os.environ.get("STUB_CUDA_HOME") or None
HIP_HOME = None
'''
RUNNER = '''
import json, runpy, sys, setuptools
captured = {}
setuptools.setup = lambda **kwargs: captured.update(kwargs)
try:
    module = runpy.run_path("setup.py", run_name="__main__")
except Exception as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
    sys.exit(0)
ext = captured["ext_modules"][0]
print(json.dumps({
    "nvcc": ext.kwargs["extra_compile_args"]["nvcc"],
    "install_requires": captured["install_requires"],
    "force_build": module["FORCE_BUILD"],
}))
'''


@pytest.fixture(scope="module")
def patched(tmp_path_factory) -> Path:
    return unpack_patched(tmp_path_factory.mktemp("patched"))


@pytest.fixture(scope="module")
def unpatched(tmp_path_factory) -> Path:
    return unpack_patched(tmp_path_factory.mktemp("unpatched"), patches=False)


@pytest.fixture(scope="module")
def stub_path(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("stub")
    (root / "torch" / "utils").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text(TORCH_STUB)
    (root / "torch" / "utils" / "__init__.py").write_text("")
    (root / "torch" / "utils" / "cpp_extension.py").write_text(CPP_EXTENSION_STUB)
    return root


def run_setup(source: Path, stub: Path, cuda_home: str | None = None, **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items()
               if k not in ("TORCH_CUDA_ARCH_LIST", "NVCC_THREADS", "CAUSAL_CONV1D_FORCE_BUILD")}
    environ.update(env, PYTHONPATH=str(stub))
    if cuda_home is None and NVCC:
        cuda_home = str(Path(NVCC).resolve().parent.parent)
    environ["STUB_CUDA_HOME"] = cuda_home or ""
    result = subprocess.run([sys.executable, "-c", RUNNER], cwd=source, env=environ,
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def gencodes(nvcc_args: list[str]) -> list[str]:
    return [nvcc_args[i + 1] for i, a in enumerate(nvcc_args) if a == "-gencode"]


def sass(*ccs: str) -> list[str]:
    return [f"arch=compute_{cc},code=sm_{cc}" for cc in ccs]


def nvcc_major_minor() -> tuple[int, int]:
    out = subprocess.run([NVCC, "-V"], capture_output=True, text=True, check=True).stdout
    release = out.split("release ")[1].split(",")[0]
    major, minor = release.split(".")
    return int(major), int(minor)


@needs_nvcc
def test_unset_arch_list_keeps_upstream_list_without_sm103(patched, stub_path):
    flags = gencodes(run_setup(patched, stub_path)["nvcc"])
    expected = sass("75", "80", "87", "90")
    if nvcc_major_minor() >= (12, 8):
        expected += sass("100", "120")
    if nvcc_major_minor() >= (13, 0):
        expected += sass("110", "121")
    assert flags == expected
    assert not any("103" in f for f in flags)


@needs_nvcc
def test_unpatched_setup_ignores_arch_list_and_emits_sm103(unpatched, stub_path):
    """The control: upstream's setup.py shows the bugs the patches fix."""
    result = run_setup(unpatched, stub_path, TORCH_CUDA_ARCH_LIST="9.0")
    flags = gencodes(result["nvcc"])
    assert sass("90")[0] in flags and len(flags) > 1
    if nvcc_major_minor() >= (13, 0):
        assert "arch=compute_103,code=sm_103" in flags
    assert result["nvcc"][-2:] == ["--threads", "4"]
    assert "ninja" in result["install_requires"]
    assert result["force_build"] is False


@needs_nvcc
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
def test_arch_list_alone_decides_gencodes(patched, stub_path, arch_list, expected):
    assert gencodes(run_setup(patched, stub_path, TORCH_CUDA_ARCH_LIST=arch_list)["nvcc"]) == expected


@needs_nvcc
def test_bad_arch_list_entry_is_a_clear_error(patched, stub_path):
    result = run_setup(patched, stub_path, TORCH_CUDA_ARCH_LIST="8.0;Hopper")
    assert result["error"] == (
        "RuntimeError: TORCH_CUDA_ARCH_LIST entry 'Hopper' is not an architecture like 8.0, 9.0a or 10.0+PTX"
    )


@needs_nvcc
@pytest.mark.parametrize(("env", "threads"), [({}, "1"), ({"NVCC_THREADS": "3"}, "3")])
def test_nvcc_threads_from_environment(patched, stub_path, env, threads):
    assert run_setup(patched, stub_path, **env)["nvcc"][-2:] == ["--threads", threads]


@needs_nvcc
def test_bad_nvcc_threads_is_a_clear_error(patched, stub_path):
    result = run_setup(patched, stub_path, NVCC_THREADS="four")
    assert result["error"] == "RuntimeError: NVCC_THREADS='four' is not a positive integer"


@needs_nvcc
def test_no_ninja_at_run_time(patched, stub_path):
    assert run_setup(patched, stub_path)["install_requires"] == ["torch", "packaging"]


@needs_nvcc
@pytest.mark.parametrize(("value", "expected"), [(None, True), ("TRUE", True), ("FALSE", False)])
def test_compiles_from_source_unless_told_false(patched, stub_path, value, expected):
    env = {} if value is None else {"CAUSAL_CONV1D_FORCE_BUILD": value}
    assert run_setup(patched, stub_path, **env)["force_build"] is expected


def test_missing_nvcc_is_a_clear_error_not_a_name_error(patched, stub_path):
    result = run_setup(patched, stub_path, cuda_home="")
    assert result["error"].startswith("RuntimeError: causal_conv1d: nvcc not found")
    assert "CUDA_HOME" in result["error"]


def test_unpatched_setup_without_nvcc_dies_with_name_error(unpatched, stub_path):
    assert "NameError" in run_setup(unpatched, stub_path, cuda_home="")["error"]
