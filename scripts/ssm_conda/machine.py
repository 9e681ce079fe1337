"""The NVIDIA driver and GPUs (py-rattler's virtual packages, nvidia-smi); without them every probe answers None or []."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from rattler import VirtualPackage, VirtualPackageOverrides

from ssm_conda.archs import version_key

# Oldest Linux driver per CUDA major (minor-version compatibility: every 12.x runs on 525+, every 13.x on 580+).
MIN_DRIVER_FOR_MAJOR = {"11": "450.80.02", "12": "525.60.13", "13": "580.65.06"}


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    compute_cap: str  # "9.0"; "" when the driver would not say

    @property
    def sm(self) -> str:
        return "sm_" + self.compute_cap.replace(".", "") if self.compute_cap else "sm_?"


@dataclass
class DriverInfo:
    """What the NVIDIA driver reports; fields stay None when a source does not know them."""

    version: str | None = None  # "580.65.06"
    cuda: str | None = None  # highest CUDA the driver supports, "13.0"
    gpus: list[GpuInfo] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # "nvidia-smi", "py-rattler"
    errors: list[str] = field(default_factory=list)

    @property
    def compute_caps(self) -> list[str]:  # the GPUs' distinct compute capabilities, oldest first
        return sorted({g.compute_cap for g in self.gpus if g.compute_cap}, key=version_key)


@dataclass(frozen=True)
class CudaVirtualPackages:
    cuda: str | None = None  # __cuda: the highest CUDA the driver supports
    arch: str | None = None  # __cuda_arch: the lowest compute capability among the GPUs
    arch_model: str | None = None  # __cuda_arch's build string: that GPU's model


def detect_cuda_virtual_packages(honour_overrides: bool = False) -> CudaVirtualPackages:
    """__cuda and __cuda_arch as py-rattler detects them, or CONDA_OVERRIDE_CUDA(_ARCH) with honour_overrides."""
    # detect() alone ignores the CONDA_OVERRIDE_* variables; from_env() applies them.
    overrides = VirtualPackageOverrides.from_env() if honour_overrides else VirtualPackageOverrides()
    found = {g.name.normalized: (str(g.version), str(g.build_string))
             for g in (p.into_generic() for p in VirtualPackage.detect(overrides))}
    arch, model = found.get("__cuda_arch", (None, None))
    return CudaVirtualPackages(found.get("__cuda", (None, None))[0], arch, model if model and model != "0" else None)


def query_nvidia_smi() -> DriverInfo | None:
    """Driver version, CUDA version and GPUs from nvidia-smi; None when it is not installed."""
    if (smi := shutil.which("nvidia-smi")) is None:
        return None
    info = DriverInfo()
    run = functools.partial(subprocess.run, capture_output=True, text=True, timeout=30, check=False)
    try:
        # drivers before 510 lack compute_cap: they run no CUDA packaged here (12.x needs 525+), so they count as failing
        fields = ["index", "name", "compute_cap", "driver_version"]
        result = run([smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader"])
        if result.returncode != 0:
            message = (result.stdout + result.stderr).strip().splitlines()
            info.errors.append(f"nvidia-smi failed: {message[0] if message else result.returncode}")
            return info
        info.sources.append("nvidia-smi")
        for line in result.stdout.splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != len(fields):
                continue
            index, name, cap, version = parts  # in the order of `fields`
            position = int(index) if index.isdigit() else len(info.gpus)
            info.gpus.append(GpuInfo(position, name, cap if re.fullmatch(r"\d+\.\d+", cap) else ""))
            info.version = info.version or version
        match = re.search(r"CUDA Version\s*:\s*(\d+\.\d+)", run([smi]).stdout)
        info.cuda = match.group(1) if match else None
    except (OSError, subprocess.SubprocessError) as exc:
        info.errors.append(f"nvidia-smi failed: {exc}")
    return info


def driver_info(virtual: Callable[[], CudaVirtualPackages] | None = None) -> DriverInfo:
    """Everything known about the driver: nvidia-smi, then conda's virtual packages."""
    info = query_nvidia_smi() or DriverInfo()
    packages = (virtual or detect_cuda_virtual_packages)()
    if packages.cuda is not None:
        info.cuda = packages.cuda  # what a conda solve sees; nvidia-smi's header says the same
        info.sources.append("py-rattler")
    if not info.gpus and packages.cuda is not None and packages.arch is not None:  # no nvidia-smi: __cuda_arch's GPU
        info.gpus = [GpuInfo(0, packages.arch_model or "?", packages.arch)]
    return info


def detect_compute_capabilities() -> list[str]:
    """The GPUs' distinct compute capabilities, oldest first; [] without a driver."""
    return driver_info().compute_caps


@contextmanager
def virtual_package_overrides(cuda: str | None, cuda_arch: str | None, **others: str | None) -> Iterator[dict[str, str]]:
    """CONDA_OVERRIDE_CUDA(_ARCH) and CONDA_OVERRIDE_<OTHER> while a solve runs, each unless set or None (yields what it
    set): CUDA builds of pytorch need __cuda and a generation package __cuda_arch, which a machine may lack."""
    wanted = {f"CONDA_OVERRIDE_{name.upper()}": value for name, value in {"cuda": cuda, "cuda_arch": cuda_arch, **others}.items()}
    added = {name: value for name, value in wanted.items() if value is not None and name not in os.environ}
    os.environ.update(added)
    try:
        yield added
    finally:
        for name in added:
            del os.environ[name]
