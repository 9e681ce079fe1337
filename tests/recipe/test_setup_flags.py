"""The patched setup.py, run for real with its setup() call captured.

setup.py imports torch only for its version, ABI flag and the cpp_extension classes; a minimal
stand-in torch records what CUDAExtension is given, so these tests need neither torch nor a GPU.
setup.py asks `$CUDA_HOME/bin/nvcc -V` for the CUDA release, which picks the default architectures:
a fake nvcc answers with a chosen release, so each branch runs on any machine, and the machine's real
nvcc (on PATH) runs them too where there is one.
"""

import functools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from ssm_conda.sources import unpack_patched

REAL_NVCC = shutil.which("nvcc")


@dataclass(frozen=True)
class Nvcc:
    cuda_home: str
    version: tuple[int, int]


def fake_nvcc(root: Path, release: str) -> Nvcc:
    """A CUDA_HOME whose bin/nvcc answers `nvcc -V` as CUDA `release` does, and nothing else."""
    nvcc = root / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text(f"""#!/bin/sh
[ "$*" = -V ] || {{ echo "fake nvcc: only -V, not: $*" >&2; exit 2; }}
echo 'nvcc: NVIDIA (R) Cuda compiler driver'
echo 'Copyright (c) 2005-2025 NVIDIA Corporation'
echo 'Cuda compilation tools, release {release}, V{release}.99'
echo 'Build cuda_{release}.r{release}/compiler.00000000_0'
""")
    nvcc.chmod(0o755)
    major, minor = release.split(".")
    return Nvcc(str(root), (int(major), int(minor)))


@functools.cache
def real_nvcc() -> Nvcc:
    out = subprocess.run([REAL_NVCC, "-V"], capture_output=True, text=True, check=True).stdout
    major, minor = out.split("release ")[1].split(",")[0].split(".")
    return Nvcc(str(Path(REAL_NVCC).resolve().parent.parent), (int(major), int(minor)))


@pytest.fixture
def nvcc(request, tmp_path) -> Nvcc:
    if request.param == "real":
        if REAL_NVCC is None:
            pytest.skip("no nvcc on PATH (the fake-nvcc cases ran)")
        return real_nvcc()
    return fake_nvcc(tmp_path / "cuda", request.param.removeprefix("fake-"))


def with_nvcc(*releases: str):
    """Run the test with a fake nvcc of each release, and with the real one where there is one."""
    return pytest.mark.parametrize("nvcc", [*(f"fake-{r}" for r in releases), "real"], indirect=True)


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


def run_setup(source: Path, stub: Path, cuda_home: str, **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items()
               if k not in ("TORCH_CUDA_ARCH_LIST", "NVCC_THREADS", "CAUSAL_CONV1D_FORCE_BUILD")}
    environ.update(env, PYTHONPATH=str(stub), STUB_CUDA_HOME=cuda_home)
    result = subprocess.run([sys.executable, "-c", RUNNER], cwd=source, env=environ,
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def gencodes(nvcc_args: list[str]) -> list[str]:
    return [nvcc_args[i + 1] for i, a in enumerate(nvcc_args) if a == "-gencode"]


def sass(*ccs: str) -> list[str]:
    return [f"arch=compute_{cc},code=sm_{cc}" for cc in ccs]


def upstream_archs(version: tuple[int, int]) -> list[str]:
    """Upstream's hard-coded list for an nvcc release, sm_103 included."""
    archs = ["75", "80", "87"]
    if version >= (11, 8):
        archs += ["90"]
    if version >= (12, 8):
        archs += ["100", "120"]
    if version >= (13, 0):
        archs += ["103", "110", "121"]
    return archs


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
