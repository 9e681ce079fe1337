"""The stand-in's CUDA packages against conda-forge's record: built for real (rattler-build) from
made-up NVIDIA wheels holding the files the real ones hold, then compared with conda_forge.yaml.
The whole channel (pytorch, libtorch, python, ...) is compared in the end-to-end test."""

from __future__ import annotations

import copy
import dataclasses
import zipfile
from pathlib import Path

import pytest
from ssm_conda_dev.standin import fidelity, host, packages, repack
from ssm_conda_dev.standin.cuda import CUDA_PACKAGES, CudaPackage
from ssm_conda_dev.standin.wheels import Wheel

# What NVIDIA's CUDA 13.0 wheels hold (under nvidia/cu13/), as far as the stand-in takes it.
WHEEL_FILES = {
    "runtime": ("lib/libcudart.so.13", "lib/libcudart_static.a", "lib/libcudadevrt.a", "include/cuda_runtime.h",
                "include/cuda_runtime_api.h", "include/cooperative_groups/memcpy_async.h"),
    "cccl": ("include/cccl/thrust/version.h", "include/cccl/cub/cub.cuh", "include/nv/target",
             "lib/cmake/cccl/cccl-config.cmake"),
    "crt": ("include/crt/host_config.h",),
    "nvcc": ("bin/nvcc", "bin/ptxas", "bin/fatbinary", "bin/nvlink", "bin/cudafe++", "bin/bin2c",
             "bin/__nvcc_device_query", "bin/nvcc.profile", "bin/crt/link.stub", "bin/crt/prelink.stub",
             "include/fatbinary_section.h"),
    "nvvm": ("nvvm/bin/cicc", "nvvm/libdevice/libdevice.10.bc", "include/nvvm.h", "lib/libnvvm.so.4"),
}
NAMES = {p.name for p in CUDA_PACKAGES} | {"cuda-version", "cuda-nvcc_linux-64"}


def toolkit_wheels(directory: Path, machine) -> None:
    for key, wheel in machine.toolkit.items():
        path = directory / wheel.path.name
        with zipfile.ZipFile(path, "w") as zf:
            for name in WHEEL_FILES[key]:
                zf.writestr(f"nvidia/cu13/{name}", f"{key}: {name}\n")
        machine.toolkit[key] = Wheel(path, wheel.name, wheel.version)


def build(machine, channel: Path, monkeypatch, cuda_packages=CUDA_PACKAGES) -> Path:
    monkeypatch.setattr(packages, "CUDA_PACKAGES", cuda_packages)
    wanted = NAMES | {"sysroot_linux-64"}
    todo = [s for s in packages.standins(machine) if s.conda_name in wanted]
    repack.build_channel(todo, machine.target.py_ver, channel, 1, lambda _msg: None)
    return channel


@pytest.fixture(scope="module")
def channel(tmp_path_factory) -> Path:
    from tests.scripts_dev.standin.conftest import machine

    root = tmp_path_factory.mktemp("fidelity")
    m = dataclasses.replace(machine(root / "wheels"), glibc_libs=host.detect_glibc()[1][:1])
    toolkit_wheels(root / "wheels", m)
    with pytest.MonkeyPatch.context() as monkeypatch:
        return build(m, root / "channel", monkeypatch)


def record() -> dict:
    return {name: entry for name, entry in fidelity.load_record().items() if name in NAMES}


def test_the_cuda_packages_are_conda_forges(channel):
    """cudart's real library in cuda-cudart_linux-64 with the lib/ symlinks in cuda-cudart, the dev and
    static split, crt, nvvm, nvcc's tools and activation: every recorded fact holds."""
    assert fidelity.check_channel(channel, record()) == []


@pytest.mark.parametrize(("name", "key", "value", "problem"), [
    ("cuda-cudart", "files", ["lib/libcudart.so.{v} (file)"], "lib/libcudart.so.13.0.96 should be a file"),
    ("cuda-cudart_linux-64", "depends", ["cuda-version >={cuda},<{cuda_minor_next}", "libgcc"],
     "does not depend on libgcc"),
    ("cuda-cudart-dev", "run_exports", {"weak": ["cuda-cudart >={v}"]}, "run_exports"),
    ("cuda-nvcc-tools", "constrains", [], "constrains"),
    ("cuda-nvvm-dev_linux-64", "noarch", None, "noarch is generic"),
    ("cuda-version", "build_number", 0, "build number is 3"),
])
def test_a_changed_record_fails(channel, name, key, value, problem):
    changed = copy.deepcopy(record())
    changed[name][key] = value
    problems = fidelity.check_channel(channel, changed)
    assert len(problems) == 1 and problems[0].startswith(name) and problem in problems[0], problems


def test_the_record_is_linux_64s(channel, tmp_path):
    """linux-aarch64's cuda-cudart (sbsa-linux paths) is not held to linux-64's record; in linux-64 it would fail."""
    import shutil

    copy = tmp_path / "channel"
    shutil.copytree(channel, copy)
    (cudart,) = (copy / "linux-64").glob("cuda-cudart-13*.conda")
    static = next((copy / "linux-64").glob("cuda-cudart-static-13*.conda"))
    (copy / "linux-aarch64").mkdir()
    shutil.copy(static, copy / "linux-aarch64" / cudart.name)  # cuda-cudart by name, wrong in every respect
    assert fidelity.check_channel(copy, record()) == []
    shutil.copy(static, cudart)
    assert any(p.startswith("cuda-cudart 13") for p in fidelity.check_channel(copy, record()))


def test_a_stand_in_that_drifts_fails(tmp_path, monkeypatch):
    """The stand-in as it was: the real libcudart inside cuda-cudart, no cuda-cudart_linux-64."""
    from tests.scripts_dev.standin.conftest import machine

    m = dataclasses.replace(machine(tmp_path / "wheels"), glibc_libs=host.detect_glibc()[1][:1])
    toolkit_wheels(tmp_path / "wheels", m)
    merged = CudaPackage("cuda-cudart", "runtime", copy={"lib/libcudart.so.13": "lib/libcudart.so.{v}"},
                         links={"lib/libcudart.so.13": "libcudart.so.{v}"})
    drifted = tuple(merged if p.name == "cuda-cudart" else p for p in CUDA_PACKAGES if p.name != "cuda-cudart_linux-64")
    channel = build(m, tmp_path / "channel", monkeypatch, drifted)
    cudart = {name: record()[name] for name in ("cuda-cudart", "cuda-cudart_linux-64")}
    assert sorted(fidelity.check_channel(channel, cudart)) == [
        "cuda-cudart 13.0.96: does not depend on cuda-cudart_linux-64 ==13.0.96",
        "cuda-cudart 13.0.96: lib/libcudart.so.13 should be a symlink to ../targets/x86_64-linux/lib/libcudart.so.13, "
        "is libcudart.so.13.0.96",
        "cuda-cudart 13.0.96: lib/libcudart.so.13.0.96 should be a symlink to "
        "../targets/x86_64-linux/lib/libcudart.so.13.0.96, is a file",
        "cuda-cudart_linux-64: the channel has no such package",
    ]


def test_every_record_names_its_feedstock_and_commit():
    for name, entry in fidelity.load_record().items():
        assert "conda-forge/" in entry["follows"] and any(len(w) == 40 for w in entry["follows"].split()), name


def test_a_run_checks_the_packages_it_made_not_another_pythons(channel, tmp_path):
    """A stand-in run for Python 3.11 rebuilt pytorch for a changed recipe; Python 3.12's pytorch, of the old recipe,
    waits for its own run to be rebuilt, and the 3.11 run was refused for it (CI: "pytorch 2.13.0: does not depend on
    setuptools <82")."""
    import shutil

    copy = tmp_path / "channel"
    shutil.copytree(channel, copy)
    (cudart,) = (copy / "linux-64").glob("cuda-cudart-13*.conda")
    stale = cudart.with_name(cudart.name.replace("_", "_9", 1))  # the same package of another build, now wrong
    shutil.copy(next((copy / "linux-64").glob("cuda-cudart-static-13*.conda")), stale)
    this_run = [p for p in copy.glob("*/*.conda") if p != stale]
    assert fidelity.check_channel(copy, record(), packages=this_run) == []
    assert any(p.startswith("cuda-cudart 13") for p in fidelity.check_channel(copy, record()))
