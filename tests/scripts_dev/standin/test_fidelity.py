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


ABI3 = ("python-abi3", "_python_abi3_support", "cpython", "python-gil")


@pytest.fixture(scope="module")
def abi3_channel(tmp_path_factory) -> Path:
    """python-abi3 and the packages it brings in, built for the made-up machine's Python 3.11.7."""
    from tests.scripts_dev.standin.conftest import machine

    root = tmp_path_factory.mktemp("abi3")
    todo = [s for s in packages.standins(machine(root / "wheels")) if s.conda_name in ABI3]
    repack.build_channel(todo, "3.11", root / "channel", 1, lambda _msg: None)
    return root / "channel"


def abi3_record() -> dict:
    return {name: entry for name, entry in fidelity.load_record().items() if name in ABI3}


def test_the_abi3_packages_are_conda_forges(abi3_channel):
    """python-abi3 3.11 (build 3, python 3.11.*, the run_exports and activation), _python_abi3_support 1.0, and
    cpython and python-gil 3.11.7 as the python feedstock's outputs: every recorded fact holds."""
    assert fidelity.check_channel(abi3_channel, abi3_record()) == []
    (abi3,) = (abi3_channel / "noarch").glob("python-abi3-*.conda")
    assert abi3.name.startswith("python-abi3-3.11-") and abi3.name.endswith("_3.conda")
    built = fidelity.read_package(abi3)
    assert "etc/conda/activate.d/python-abi3_activate.sh" in built.files


@pytest.mark.parametrize(("name", "key", "value", "problem"), [
    ("python-abi3", "run_exports", {"weak": ["cpython >={py}"]}, "run_exports"),
    ("python-abi3", "build_number", 0, "build number is 3"),
    ("python-abi3", "depends", ["python {py}.*", "_python_abi3_support"], "depends on __unix, which conda-forge's does not"),
    ("_python_abi3_support", "version", "1.1", "version is 1.0"),
    ("cpython", "version", "3.12.*", "version is 3.11.7"),
    ("python-gil", "depends", ["python {v}.*", "python_abi * *_{py_tag}"], "does not depend on python 3.11.7.*"),
])
def test_a_changed_abi3_record_fails(abi3_channel, name, key, value, problem):
    changed = copy.deepcopy(abi3_record())
    changed[name][key] = value
    problems = fidelity.check_channel(abi3_channel, changed)
    assert any(p.startswith(name) and problem in p for p in problems), problems


def test_a_drifted_python_gil_fails(tmp_path):
    """python-gil built from the wrong Python's context (3.12's ABI tag on 3.11.7) is caught."""
    drifted = packages.StandIn("python-gil", "cpython.yaml", {"name": "python-gil", "version": "3.11.7", "py_ver": "3.12"})
    channel = tmp_path / "channel"
    repack.build_channel([drifted], "3.11", channel, 1, lambda _msg: None)
    assert sorted(fidelity.check_channel(channel, {"python-gil": abi3_record()["python-gil"]})) == [
        "python-gil 3.11.7: depends on python_abi * *_cp312, which conda-forge's does not",
        "python-gil 3.11.7: does not depend on python_abi * *_cp311",
    ]
