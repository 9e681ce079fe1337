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
# The Python the packages are built with: the variant file's, the oldest; each package installs on every later one.
PYTHON = VARIANTS.pythons[0]
RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"  # the stand-in repacks the running Python too
# Python B, a third the packages install on: neither the build's nor the running one
PYTHON_B_CANDIDATES = [v for v in ("3.12", "3.11", "3.13") if v not in (PYTHON, RUNNING)]
PYTHON_PREFIX_ENV = {"b": "SSM_CONDA_PYTHON_B_PREFIX", PYTHON: "SSM_CONDA_PYTHON_MIN_PREFIX"}
def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
    print("$", " ".join(args), flush=True)
    return subprocess.run(args, check=True, text=True, **kwargs)


def find_python(versions: list[str], named: str | None) -> tuple[str, Path]:
    """The first of `versions` with a CPython installation that has a shared libpython (what the stand-in repacks):
    X.Y and its prefix, looked for in `named` (a prefix), else under ~/.pyenv/versions, /usr/local and /usr."""
    candidates = [Path(named)] if named else [
        p for version in versions
        for p in [*sorted((Path.home() / ".pyenv" / "versions").glob(f"{version}.*")), Path("/usr/local"), Path("/usr")]
    ]
    for prefix in candidates:
        for version in versions:
            if (prefix / "bin" / f"python{version}").exists() and list((prefix / "lib").glob(f"libpython{version}.so*")):
                return version, prefix
    env = PYTHON_PREFIX_ENV["b" if len(versions) > 1 else versions[0]]
    pytest.fail(f"no CPython {' or '.join(versions)} with a shared libpython: set {env} to its prefix")


def second_python() -> tuple[str, Path]:
    """Python B: X.Y and a prefix, another Python the packages must install and import on."""
    return find_python(PYTHON_B_CANDIDATES, os.environ.get(PYTHON_PREFIX_ENV["b"]))


def build_python() -> Path:
    """The prefix of the Python the packages are built with (PYTHON), when it is not the running one."""
    return find_python([PYTHON], os.environ.get(PYTHON_PREFIX_ENV[PYTHON]))[1]


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
    """The offline stand-in channel, for the build's Python, this Python and Python B, cached outside the clone."""
    channel = cache_dir() / "standin"
    standin_command = (sys.executable, "-m", "ssm_conda_dev", "standin", "--output-dir", str(channel), *wheel_dir_args())
    run(*standin_command, "--torch", TORCH, env=without_system_cuda())
    for prefix in ([build_python()] if PYTHON != RUNNING else []) + [python_b[1]]:
        run(*standin_command, "--python-prefix", str(prefix), "--torch", TORCH, env=without_system_cuda())
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
