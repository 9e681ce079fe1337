"""ssm_conda.machine against a fake nvidia-smi on PATH, and py-rattler's virtual packages (real, or injected)."""

from __future__ import annotations

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
def no_virtual_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's own driver (if any) stays out of the fake nvidia-smi's tests."""
    monkeypatch.setattr(gpu, "detect_cuda_virtual_packages", lambda: gpu.CudaVirtualPackages())


@pytest.fixture
def only_fake_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_virtual_packages: None) -> Path:
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
            "gpu_generation": ["all"],
            "cuda_arch_list": ["7.5;8.0;8.6;9.0;10.0;11.0;12.0+PTX"],
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
    assert gpu.detect_compute_capabilities() == ["9.0", "10.0"]  # distinct, sorted numerically
    # build.py --arch native goes through variants.parse_arch_list with the default detector
    assert cuda130_file().resolve_arch("native") == "9.0;10.0"


def test_native_detection_sorts_numerically(only_fake_path: Path) -> None:
    write_fake_smi(only_fake_path, "0, NVIDIA GB10, 12.1, 580.95.05\n1, NVIDIA A100, 8.0, 580.95.05\n")
    assert gpu.detect_compute_capabilities() == ["8.0", "12.1"]
    assert cuda130_file().resolve_arch("native") == "8.0;12.1"


def test_no_nvidia_smi_means_no_gpu(only_fake_path: Path) -> None:
    assert gpu.query_nvidia_smi() is None
    assert gpu.detect_compute_capabilities() == []
    info = gpu.driver_info()
    assert info.version is None and info.cuda is None and info.gpus == []


def test_failing_nvidia_smi_means_no_gpu(only_fake_path: Path) -> None:
    write_fake_smi(only_fake_path, "", fail_all=True)
    info = gpu.query_nvidia_smi()
    assert info is not None and info.gpus == []
    assert "couldn't communicate" in info.errors[0]
    assert gpu.detect_compute_capabilities() == []


def test_native_without_gpu_is_a_usage_error(only_fake_path: Path) -> None:
    write_fake_smi(only_fake_path, "", fail_all=True)
    if gpu.detect_cuda_virtual_packages().arch:
        pytest.skip("the driver reports a GPU here")
    with pytest.raises(UsageError, match="found no GPU"):
        cuda130_file().resolve_arch("native")


def test_old_driver_without_compute_cap_field(only_fake_path: Path) -> None:
    """Drivers before 510 lack compute_cap (and run no CUDA packaged here): nvidia-smi counts as failed."""
    write_fake_smi(only_fake_path, "0, Tesla V100-SXM2-16GB, 7.0, 470.256.02\n", fail_compute_cap=True)
    info = gpu.query_nvidia_smi()
    assert info is not None and info.gpus == []
    assert info.errors == ['nvidia-smi failed: Field "compute_cap" is not a valid field to query.']
    info = gpu.driver_info(virtual=lambda: gpu.CudaVirtualPackages("11.4", "7.0", "Tesla V100-SXM2-16GB"))
    assert info.cuda == "11.4" and info.gpus == [gpu.GpuInfo(0, "Tesla V100-SXM2-16GB", "7.0")]  # __cuda_arch's


def test_rattler_reports_the_conda_override_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real py-rattler detection: CONDA_OVERRIDE_CUDA(_ARCH) only when asked to honour them."""
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "12.9")
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA_ARCH", "9.0")
    assert gpu.detect_cuda_virtual_packages(honour_overrides=True) == gpu.CudaVirtualPackages("12.9", "9.0", None)
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "")  # conda's "no CUDA": __cuda_arch goes with __cuda
    assert gpu.detect_cuda_virtual_packages(honour_overrides=True) == gpu.CudaVirtualPackages()


def test_rattler_without_overrides_reads_the_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "1.0")  # no real driver says CUDA 1.0
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA_ARCH", "1.0")
    found = gpu.detect_cuda_virtual_packages()
    assert found.cuda != "1.0" and found.arch != "1.0"


def test_driver_cuda_comes_from_rattler(only_fake_path: Path) -> None:
    write_fake_smi(only_fake_path, H100_B200)
    info = gpu.driver_info(virtual=lambda: gpu.CudaVirtualPackages("13.1", "9.0", "NVIDIA H100 80GB HBM3"))
    assert info.cuda == "13.1"  # __cuda, what a solve sees
    assert info.sources == ["nvidia-smi", "py-rattler"]
    assert [g.compute_cap for g in info.gpus] == ["9.0", "10.0", "9.0"]  # nvidia-smi's, per GPU


def test_cuda_arch_without_nvidia_smi_is_one_gpu(only_fake_path: Path) -> None:
    info = gpu.driver_info(virtual=lambda: gpu.CudaVirtualPackages("12.9", "8.0", "NVIDIA A100-SXM4-80GB"))
    assert info.cuda == "12.9" and info.version is None  # the driver's version only nvidia-smi says
    assert info.gpus == [gpu.GpuInfo(0, "NVIDIA A100-SXM4-80GB", "8.0")]
    assert info.sources == ["py-rattler"]


def test_virtual_package_overrides_set_only_what_is_unset_and_undo_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """build's variant values and gpu-test's per-package lower bounds: a value the user set (even empty, which
    hides __cuda from conda) stays, None sets nothing, and nothing outlives the solve it was set for."""
    monkeypatch.delenv("CONDA_OVERRIDE_CUDA", raising=False)
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA_ARCH", "")
    with gpu.virtual_package_overrides("13.0", "9.0") as added:
        assert added == {"CONDA_OVERRIDE_CUDA": "13.0"}
        assert (os.environ["CONDA_OVERRIDE_CUDA"], os.environ["CONDA_OVERRIDE_CUDA_ARCH"]) == ("13.0", "")
    assert "CONDA_OVERRIDE_CUDA" not in os.environ and os.environ["CONDA_OVERRIDE_CUDA_ARCH"] == ""
    monkeypatch.delenv("CONDA_OVERRIDE_CUDA_ARCH")
    with gpu.virtual_package_overrides("12.9", None) as added:  # a package without a cuda-arch bound
        assert added == {"CONDA_OVERRIDE_CUDA": "12.9"} and "CONDA_OVERRIDE_CUDA_ARCH" not in os.environ
    with gpu.virtual_package_overrides("12.9", "8.0"), gpu.virtual_package_overrides("13.0", "9.0") as inner:
        assert inner == {} and os.environ["CONDA_OVERRIDE_CUDA"] == "12.9"
    assert "CONDA_OVERRIDE_CUDA" not in os.environ
