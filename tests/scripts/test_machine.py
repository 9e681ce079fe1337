"""ssm_conda.machine against a fake nvidia-smi on PATH and a fake libcuda."""

from __future__ import annotations

import ctypes
import os
import stat
from pathlib import Path

import pytest
from ssm_conda import machine as gpu
from ssm_conda.console import UsageError
from ssm_conda.matrix import VariantFile

H100_B200 = (
    "0, NVIDIA H100 80GB HBM3, 9.0, 580.65.06\n"
    "1, NVIDIA B200, 10.0, 580.65.06\n"
    "2, NVIDIA H100 80GB HBM3, 9.0, 580.65.06\n"
)
HEADER = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.65.06              Driver Version: 580.65.06      CUDA Version: 13.0     |
+-----------------------------------------------------------------------------------------+
"""


def write_fake_smi(
    directory: Path, query_out: str, header: str = HEADER, fail_compute_cap: bool = False, fail_all: bool = False
) -> Path:
    """A shell nvidia-smi answering --query-gpu and the plain header like the real one."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "query.txt").write_text(query_out)
    (directory / "header.txt").write_text(header)
    script = directory / "nvidia-smi"
    body = ["#!/bin/sh", f'echo "$@" >> "{directory}/calls.log"']
    if fail_all:
        body += [
            'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."',
            "exit 9",
        ]
    else:
        body += ['case "$1" in', "  --query-gpu=*compute_cap*)"]
        if fail_compute_cap:
            body += ["    echo 'Field \"compute_cap\" is not a valid field to query.'", "    exit 2;;"]
        else:
            body += [f'    cat "{directory}/query.txt"; exit 0;;']
        body += [
            "  --query-gpu=*)",
            f"    sed 's/, [0-9]*\\.[0-9]*, /, /' \"{directory}/query.txt\"; exit 0;;",
            "esac",
            f'cat "{directory}/header.txt"',
        ]
    script.write_text("\n".join(body) + "\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


@pytest.fixture
def no_libcuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu, "_load_libcuda", lambda: None)


@pytest.fixture
def only_fake_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_libcuda: None) -> Path:
    """PATH holds only the fake nvidia-smi's folder (plus the shell's tools)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    return bindir


def cuda130_file() -> VariantFile:
    return VariantFile(
        Path("variants/cuda130.yaml"),
        {
            "cuda_compiler_version": ["13.0"],
            "python": ["3.12"],
            "pytorch": ["2.13"],
            "cuda_arch_list": ["7.5;8.0;8.7;9.0;10.0;11.0;12.0;12.1+PTX"],
            "cuda_arch_supported": ["7.5;8.0;8.6;8.7;8.8;8.9;9.0;10.0;11.0;12.0;12.1"],
        },
    )


def test_nvidia_smi_gpus_driver_and_cuda(only_fake_path: Path) -> None:
    write_fake_smi(only_fake_path, H100_B200)
    info = gpu.query_nvidia_smi()
    assert info is not None
    assert info.version == "580.65.06"
    assert info.cuda == "13.0"
    assert [g.compute_cap for g in info.gpus] == ["9.0", "10.0", "9.0"]
    assert info.gpus[1].name == "NVIDIA B200"
    assert info.gpus[1].sm == "sm_100"


def test_native_detection_uses_nvidia_smi(only_fake_path: Path) -> None:
    write_fake_smi(only_fake_path, H100_B200)
    assert gpu.compute_capabilities_from_driver() == ["9.0", "10.0", "9.0"]
    assert gpu.detect_compute_capabilities() == ["9.0", "10.0"]  # distinct, sorted numerically
    # build.py --arch native goes through variants.parse_arch_list with the default detector
    assert cuda130_file().resolve_arch("native") == "9.0;10.0"


def test_native_detection_sorts_numerically(only_fake_path: Path) -> None:
    write_fake_smi(only_fake_path, "0, NVIDIA GB10, 12.1, 580.95.05\n1, NVIDIA A100, 8.0, 580.95.05\n")
    assert gpu.detect_compute_capabilities() == ["8.0", "12.1"]
    assert cuda130_file().resolve_arch("native") == "8.0;12.1"


def test_no_nvidia_smi_means_no_gpu(only_fake_path: Path) -> None:
    assert gpu.query_nvidia_smi() is None
    assert gpu.compute_capabilities_from_driver() == []
    info = gpu.driver_info(proc=lambda: None)
    assert info.version is None and info.cuda is None and info.gpus == []


def test_failing_nvidia_smi_means_no_gpu(only_fake_path: Path) -> None:
    write_fake_smi(only_fake_path, "", fail_all=True)
    info = gpu.query_nvidia_smi()
    assert info is not None and info.gpus == []
    assert "couldn't communicate" in info.errors[0]
    assert gpu.compute_capabilities_from_driver() == []


def test_native_without_gpu_is_a_usage_error(only_fake_path: Path) -> None:
    write_fake_smi(only_fake_path, "", fail_all=True)
    if gpu.compute_capabilities_from_torch():
        pytest.skip("torch sees a GPU here")
    with pytest.raises(UsageError, match="found no GPU"):
        cuda130_file().resolve_arch("native")


def test_old_driver_without_compute_cap_field(only_fake_path: Path) -> None:
    write_fake_smi(only_fake_path, "0, Tesla V100-SXM2-16GB, 7.0, 470.256.02\n", fail_compute_cap=True)
    info = gpu.query_nvidia_smi()
    assert info is not None
    assert info.version == "470.256.02"
    assert [(g.name, g.compute_cap) for g in info.gpus] == [("Tesla V100-SXM2-16GB", "")]
    assert gpu.compute_capabilities_from_driver() == []


def test_nvidia_smi_not_available_falls_back_to_proc(tmp_path: Path, only_fake_path: Path) -> None:
    proc = tmp_path / "version"
    proc.write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (dvs-builder@U16)\n"
        "GCC version:  gcc version 12.3.0\n"
    )
    assert gpu.driver_version_from_proc(str(proc)) == "580.65.06"
    info = gpu.driver_info(proc=lambda: gpu.driver_version_from_proc(str(proc)))
    assert info.version == "580.65.06" and info.sources == ["/proc"]


class FakeLibcuda:
    """Stands in for ctypes.CDLL("libcuda.so.1"): writes through the byref() pointers."""

    def __init__(self, version: int, caps: list[tuple[int, int]], init_status: int = 0) -> None:
        self.version, self.caps, self.init_status = version, caps, init_status

    def cuDriverGetVersion(self, ref) -> int:  # noqa: N802 (the C name)
        ref._obj.value = self.version
        return 0

    def cuInit(self, flags: int) -> int:  # noqa: N802
        return self.init_status

    def cuDeviceGetCount(self, ref) -> int:  # noqa: N802
        ref._obj.value = len(self.caps)
        return 0

    def cuDeviceGet(self, ref, index: int) -> int:  # noqa: N802
        ref._obj.value = index
        return 0

    def cuDeviceGetAttribute(self, ref, attr: int, device: ctypes.c_int) -> int:  # noqa: N802
        major, minor = self.caps[device.value]
        ref._obj.value = major if attr == 75 else minor
        return 0

    def cuDeviceGetName(self, buf, size: int, device: ctypes.c_int) -> int:  # noqa: N802
        buf.value = f"Fake GPU {device.value}".encode()
        return 0


def test_libcuda_version_and_devices() -> None:
    info = gpu.query_libcuda(lambda: FakeLibcuda(12090, [(10, 3), (9, 0)]))
    assert info is not None
    assert info.cuda == "12.9"
    assert [(g.name, g.compute_cap) for g in info.gpus] == [("Fake GPU 0", "10.3"), ("Fake GPU 1", "9.0")]


def test_libcuda_without_devices_still_reports_cuda() -> None:
    info = gpu.query_libcuda(lambda: FakeLibcuda(13000, [], init_status=100))  # CUDA_ERROR_NO_DEVICE
    assert info is not None and info.cuda == "13.0" and info.gpus == []
    assert "cuInit" in info.errors[0]


def test_no_libcuda() -> None:
    assert gpu.query_libcuda(lambda: None) is None


def test_driver_info_fills_compute_caps_from_libcuda(only_fake_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_fake_smi(only_fake_path, "0, NVIDIA B300, 10.3, 470.1\n", fail_compute_cap=True)
    monkeypatch.setattr(gpu, "_load_libcuda", lambda: FakeLibcuda(13000, [(10, 3)]))
    info = gpu.driver_info()
    assert info.version == "470.1"  # nvidia-smi's
    assert info.cuda == "13.0"
    assert [g.compute_cap for g in info.gpus] == ["10.3"]
    assert gpu.compute_capabilities_from_driver() == ["10.3"]



def test_cuda_version_from_int() -> None:
    assert gpu.cuda_version_from_int(12090) == "12.9"
    assert gpu.cuda_version_from_int(13010) == "13.1"
