"""A made-up machine for the stand-in's tests: wheels with real metadata, paths that need not exist."""

from __future__ import annotations

import zipfile
from dataclasses import fields
from pathlib import Path

import pytest
from ssm_conda_dev.standin import catalog
from ssm_conda_dev.standin.debian import DebianPackages
from ssm_conda_dev.standin.host import Machine, TargetWheels
from ssm_conda_dev.standin.packages import StandIn, cross_standins
from ssm_conda_dev.standin.wheels import TargetPython, Wheel

TORCH_REQUIRES = ("filelock", 'cuda-toolkit[cublas,cudart]==13.0.3; platform_system == "Linux"',
                  'nvidia-nccl-cu13==2.30.7; platform_system == "Linux"',
                  'triton~=3.8.0; platform_system == "Linux" and python_version < "3.15"')

# Requires-Dist of a few fake wheels, as the real ones say (transformers 5.18.0 trimmed, tokenizers 0.23.3)
REQUIRES = {
    "pytest": ("iniconfig>=1", "pluggy<2,>=1.5"),
    "transformers": ("huggingface-hub<3.0,>=1.31.0", "numpy>=1.17", "pyyaml>=5.1", "tokenizers<0.24.0,>=0.23.1",
                     "typer", "typing-extensions>=4.1.0", 'colorama; platform_system == "Windows"',
                     'accelerate>=1.1.0; extra == "torch"'),
    "tokenizers": ("huggingface-hub<3.0,>=0.16.4",),
}
REQUIRES_PYTHON = {"transformers": ">=3.10.0"}
SCRIPTS = {"pytest": ("pytest = pytest:console_main",),
           "transformers": ("transformers = transformers.cli.transformers:main",)}


def make_wheel(directory: Path, filename: str, requires: tuple[str, ...] = (), requires_python: str | None = None,
               console_scripts: tuple[str, ...] = ()) -> Path:
    """A .whl whose dist-info says what a real one would (no payload)."""
    name, version = filename.split("-")[:2]
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += f"Requires-Python: {requires_python}\n" if requires_python else ""
    meta += "".join(f"Requires-Dist: {req}\n" for req in requires)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / filename
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{name}-{version}.dist-info/METADATA", meta)
        if console_scripts:
            zf.writestr(f"{name}-{version}.dist-info/entry_points.txt",
                        "[console_scripts]\n" + "".join(f"{s}\n" for s in console_scripts))
    return path


def machine(wheels: Path, py_ver: str = "3.11") -> Machine:
    torch = make_wheel(wheels, f"torch-2.14.1-cp{py_ver.replace('.', '')}-cp{py_ver.replace('.', '')}-manylinux_2_28_x86_64.whl",
                       TORCH_REQUIRES)
    m = Machine(target=TargetPython(py_ver, "2.36", f"{py_ver}.7"), python_prefix=Path("/p"), cuda_mm="13.0",
                cc="/usr/bin/gcc-12", cxx="/usr/bin/g++-12", gcc_version="12.2.0", glibc_libs=["/lib/libc.so.6"],
                libgcc_libs=["/lib/libgcc_s.so.1"], libstdcxx_libs=["/lib/libstdc++.so.6"], torch_kind="wheel",
                torch_src=torch, torch_version="2.14.1", companions={"triton": "~=3.8.0"}, wheels={}, nvidia={}, toolkit={})
    tag = f"cp{py_ver.replace('.', '')}"
    for name in catalog.NOARCH_WHEELS:
        scripts = SCRIPTS.get(name, ())
        path = make_wheel(wheels, f"{name.replace('-', '_')}-1.0-py3-none-any.whl", REQUIRES.get(name, ()),
                          REQUIRES_PYTHON.get(name, ">=3.9"), scripts)
        m.wheels[name] = Wheel(path, name, "1.0")
    for name in (*catalog.BINARY_WHEELS, "triton"):
        path = make_wheel(wheels, f"{name.replace('-', '_')}-3.8.0-{tag}-{tag}-manylinux_2_28_x86_64.whl",
                          REQUIRES.get(name, ()))
        m.wheels[name] = Wheel(path, name, "3.8.0")
    for tool, (pypi, _license) in catalog.TOOL_WHEELS.items():
        m.wheels[tool] = Wheel(make_wheel(wheels, f"{pypi.replace('-', '_')}-1.0-py3-none-manylinux_2_17_x86_64.whl"),
                               pypi, "1.0")
    for conda, pypi in catalog.NVIDIA_LIBS.items():
        name = pypi.format(major="13")
        m.nvidia[conda] = Wheel(make_wheel(wheels, f"{name}-13.0.1-py3-none-manylinux_2_27_x86_64.whl"), name, "13.0.1")
    for key, pypi in catalog.CUDA_TOOLKIT_WHEELS.items():
        version = {"runtime": "13.0.96", "cccl": "13.0.85"}.get(key, "13.0.88")
        path = make_wheel(wheels, f"{pypi.replace('-', '_')}-{version}-py3-none-manylinux2014_x86_64.whl")
        m.toolkit[key] = Wheel(path, pypi, version)
    return m


@pytest.fixture
def fake_machine(tmp_path) -> Machine:
    return machine(tmp_path / "wheels")


@pytest.fixture
def wheel_maker():
    return make_wheel


FAKE_DEBS = DebianPackages(Path("/debs"), {"libc6-dev-arm64-cross": "2.36", "gcc-12-aarch64-linux-gnu": "12.2.0",
                                           "python3.11:arm64": "3.11.2"})


@pytest.fixture
def fake_cross_standins(tmp_path) -> list[StandIn]:
    """What `standin --target-platform linux-aarch64` builds, from made-up Debian packages and crossenv."""
    crossenv = make_wheel(tmp_path / "cross", "crossenv-1.5.0-py3-none-any.whl", requires_python=">=3.8")
    return cross_standins(FAKE_DEBS, Wheel(crossenv, "crossenv", "1.5.0"), TargetPython("3.11", "2.36"))


@pytest.fixture
def fake_aarch64_machine(tmp_path) -> TargetWheels:
    """A made-up cross target: linux-aarch64's wheels and Debian's CPython 3.11."""
    m = machine(tmp_path / "wheels-aarch64")
    given = {f.name: getattr(m, f.name) for f in fields(TargetWheels)}
    return TargetWheels(**{**given, "target": TargetPython("3.11", "2.36", "3.11.2", "linux-aarch64")})
