"""The offline stand-in channel the slow tests build against, and what building it needs: the
variant the end-to-end tests build, a second Python, an environment with no CUDA toolkit in reach.
tests/conftest.py makes the channel a session fixture, shared by every slow test."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ssm_conda.matrix import load_variant_files
from ssm_conda.paths import cache_dir
from ssm_conda_dev.standin.fidelity import check_channel

# The current CUDA line's file and its newest pytorch minor: values conda-forge builds, no override.
VARIANTS = next(f for f in load_variant_files() if f.path.name == "cuda130.yaml")
CUDA, TORCH = VARIANTS.cuda, VARIANTS.torches[-1]
TORCH_NEXT = f"{TORCH.split('.')[0]}.{int(TORCH.split('.')[1]) + 1}"
GENERATION, GPU = "sm90", "9.0"  # GPU: the H100's __cuda_arch
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"  # the stand-in repacks the running Python
PYTHON_B_CANDIDATES = [v for v in ("3.12", "3.11", "3.13", "3.10") if v != PYTHON]  # B differs in Python alone
PYTHON_B_PREFIX_ENV = "SSM_CONDA_PYTHON_B_PREFIX"
def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
    print("$", " ".join(args), flush=True)
    return subprocess.run(args, check=True, text=True, **kwargs)


def second_python() -> tuple[str, Path]:
    """Variant B's Python: X.Y and a CPython installation of it with a shared libpython (what the
    stand-in repacks), not the running Python's X.Y."""
    named = os.environ.get(PYTHON_B_PREFIX_ENV)
    candidates = [Path(named)] if named else [
        p for version in PYTHON_B_CANDIDATES
        for p in [*sorted((Path.home() / ".pyenv" / "versions").glob(f"{version}.*")), Path("/usr/local"), Path("/usr")]
    ]
    for prefix in candidates:
        for version in PYTHON_B_CANDIDATES:
            if (prefix / "bin" / f"python{version}").exists() and list((prefix / "lib").glob(f"libpython{version}.so*")):
                return version, prefix
    pytest.fail(f"no second CPython ({', '.join(PYTHON_B_CANDIDATES)}) with a shared libpython for variant B: "
                f"set {PYTHON_B_PREFIX_ENV} to its prefix")


def without_system_cuda() -> dict[str, str]:
    """The environment with no CUDA toolkit in reach: no CUDA_HOME or CUDA_PATH, no folder on PATH that
    holds an nvcc (the stand-in takes nvcc from NVIDIA's wheels, the build from the stand-in's cuda-nvcc)."""
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not Path(d, "nvcc").exists()]
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = os.pathsep.join(path)
    assert shutil.which("nvcc", path=env["PATH"]) is None
    return env


def wheel_dir_args() -> list[str]:
    """--wheel-dir for each folder of SSM_CONDA_WHEEL_DIRS: wheels a machine already has, which the stand-in repacks
    instead of downloading them (without it, pip download takes them from PyPI or pip's own find-links)."""
    return [arg for d in os.environ.get("SSM_CONDA_WHEEL_DIRS", "").split(os.pathsep) if d for arg in ("--wheel-dir", d)]


def build_standin(python_b: tuple[str, Path]) -> Path:
    """The offline stand-in channel, for this Python and for Python B, cached outside the clone."""
    channel = cache_dir() / "standin"
    standin_command = (sys.executable, "-m", "ssm_conda_dev", "standin", "--output-dir", str(channel), *wheel_dir_args())
    run(*standin_command, "--torch", TORCH, env=without_system_cuda())
    run(*standin_command, "--python-prefix", str(python_b[1]), "--torch", TORCH, env=without_system_cuda())
    # `ssm-conda-dev standin` checks its packages against conda-forge's record; so does this test
    assert check_channel(channel) == []
    return channel


def add_aarch64(channel: Path) -> Path:
    """linux-aarch64's additions to the stand-in channel (cross toolchain, Debian's CPython 3.11,
    cross-python, aarch64 pytorch and CUDA packages), for the cross builds."""
    run(sys.executable, "-m", "ssm_conda_dev", "standin", "--target-platform", "linux-aarch64", "--output-dir", str(channel),
        "--torch", TORCH, *wheel_dir_args(), env=without_system_cuda())
    assert check_channel(channel) == []
    return channel
