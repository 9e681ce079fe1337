"""Run an upstream setup.py for real, with its setup() call captured (causal-conv1d and mamba-ssm).

Both setup.py files import torch only for its version, CUDA release, ABI flag and the cpp_extension
classes; a minimal stand-in torch records what CUDAExtension is given, so the tests need neither
torch nor a GPU. Both ask `$CUDA_HOME/bin/nvcc -V` for the CUDA release, which picks the default
architectures: a fake nvcc answers with a chosen release, so each branch runs on any machine, and
the machine's real nvcc (on PATH) runs them too where there is one.

A test module uses it like this (a fixture must live in the module that uses it):

    @pytest.fixture
    def nvcc(request, tmp_path) -> Nvcc:
        return nvcc_for(request.param, tmp_path)

    @with_nvcc("12.9", "13.0")
    def test_x(stub_path, nvcc): run_setup(source, stub_path, nvcc.cuda_home)
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REAL_NVCC = shutil.which("nvcc")


@dataclass(frozen=True)
class Nvcc:
    cuda_home: str
    version: tuple[int, int]

    @property
    def release(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"


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


def nvcc_for(param: str, tmp_path: Path) -> Nvcc:
    """The nvcc a with_nvcc parameter names: "fake-<release>", or "real" (skipped without one)."""
    if param == "real":
        if REAL_NVCC is None:
            pytest.skip("no nvcc on PATH (the fake-nvcc cases ran)")
        return real_nvcc()
    return fake_nvcc(tmp_path / "cuda", param.removeprefix("fake-"))


def with_nvcc(*releases: str):
    """Run the test with a fake nvcc of each release, and with the real one where there is one."""
    return pytest.mark.parametrize("nvcc", [*(f"fake-{r}" for r in releases), "real"], indirect=True)


TORCH_STUB = '''
import os
__version__ = "2.14.1"
class version:
    cuda = os.environ.get("STUB_TORCH_CUDA", "13.0")
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
import json, os, runpy, sys, setuptools
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
    "cxx": ext.kwargs["extra_compile_args"].get("cxx", []),
    "install_requires": captured["install_requires"],
    "force_build": module["FORCE_BUILD"],
    "arch_list_after": os.environ.get("TORCH_CUDA_ARCH_LIST"),
}))
'''


def write_torch_stub(root: Path) -> Path:
    """The stand-in torch package under root, for PYTHONPATH."""
    (root / "torch" / "utils").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text(TORCH_STUB)
    (root / "torch" / "utils" / "__init__.py").write_text("")
    (root / "torch" / "utils" / "cpp_extension.py").write_text(CPP_EXTENSION_STUB)
    return root


def setup_env(stub: Path, cuda_home: str, torch_cuda: str = "13.0", **env: str) -> dict[str, str]:
    """This process's environment without the variables the setup.py files read, plus env."""
    environ = {k: v for k, v in os.environ.items()
               if k not in ("TORCH_CUDA_ARCH_LIST", "NVCC_THREADS", "NVCC_LINEINFO")
               and not k.startswith(("CAUSAL_CONV1D_", "MAMBA_"))}
    environ.update(env, PYTHONPATH=str(stub), STUB_CUDA_HOME=cuda_home, STUB_TORCH_CUDA=torch_cuda)
    return environ


def run_setup(source: Path, stub: Path, cuda_home: str, torch_cuda: str = "13.0", **env: str) -> dict:
    """Run source/setup.py with setup() captured: the extension's nvcc arguments, install_requires,
    FORCE_BUILD and TORCH_CUDA_ARCH_LIST afterwards; or {"error": ...} when setup.py raised.
    cuda_home "" means no nvcc; torch_cuda is the stand-in torch's torch.version.cuda."""
    result = subprocess.run([sys.executable, "-c", RUNNER], cwd=source,
                            env=setup_env(stub, cuda_home, torch_cuda, **env),
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def gencodes(nvcc_args: list[str]) -> list[str]:
    return [nvcc_args[i + 1] for i, a in enumerate(nvcc_args) if a == "-gencode"]


def sass(*ccs: str) -> list[str]:
    return [f"arch=compute_{cc},code=sm_{cc}" for cc in ccs]


def upstream_archs(version: tuple[int, int]) -> list[str]:
    """Upstream's hard-coded list for an nvcc release, sm_103 included (the same in causal-conv1d
    1.7.0 and mamba-ssm 2.3.2.post1)."""
    archs = ["75", "80", "87"]
    if version >= (11, 8):
        archs += ["90"]
    if version >= (12, 8):
        archs += ["100", "120"]
    if version >= (13, 0):
        archs += ["103", "110", "121"]
    return archs
