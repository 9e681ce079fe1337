"""What the machine's GPUs and NVIDIA driver are: from nvidia-smi, libcuda (ctypes) or torch.

Every probe answers "nothing" (None or []) instead of raising when there is no driver, no GPU or
no torch, so callers work on build machines without a GPU.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ssm_conda.archs import version_key

CAP_RE = re.compile(r"\d+\.\d+")
SMI_CUDA_RE = re.compile(r"CUDA Version\s*:\s*(\d+\.\d+)")
PROC_DRIVER_RE = re.compile(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)")
PROC_DRIVER_VERSION = "/proc/driver/nvidia/version"

# CUDA_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR (cuda.h)
_CU_ATTR_CC_MAJOR = 75
_CU_ATTR_CC_MINOR = 76

# Oldest Linux driver per CUDA major (minor-version compatibility: every 12.x runs on 525+,
# every 13.x on 580+) and the driver each toolkit release ships with (NVIDIA's release notes).
MIN_DRIVER_FOR_MAJOR = {"11": "450.80.02", "12": "525.60.13", "13": "580.65.06"}
DRIVER_OF_TOOLKIT = {
    "12.0": "525.60.13",
    "12.1": "530.30.02",
    "12.2": "535.54.03",
    "12.3": "545.23.06",
    "12.4": "550.54.14",
    "12.5": "555.42.02",
    "12.6": "560.28.03",
    "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06",
    "13.1": "590.44.01",
}


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
    sources: list[str] = field(default_factory=list)  # "nvidia-smi", "libcuda", "/proc"
    errors: list[str] = field(default_factory=list)


def cuda_version_from_int(value: int) -> str:
    """cuDriverGetVersion's 13000 -> "13.0", 12090 -> "12.9"."""
    return f"{value // 1000}.{(value % 1000) // 10}"


def _run(cmd: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def query_nvidia_smi(
    which: Callable[[str], str | None] = shutil.which,
    run: Callable[[list[str]], subprocess.CompletedProcess[str]] = _run,
) -> DriverInfo | None:
    """Driver version, CUDA version and GPUs from nvidia-smi; None when it is not installed."""
    smi = which("nvidia-smi")
    if smi is None:
        return None
    info = DriverInfo()
    fields = "index,name,compute_cap,driver_version"
    try:
        result = run([smi, f"--query-gpu={fields}", "--format=csv,noheader"])
        if result.returncode != 0:  # drivers before 510 lack compute_cap
            fields = "index,name,driver_version"
            result = run([smi, f"--query-gpu={fields}", "--format=csv,noheader"])
        if result.returncode != 0:
            message = (result.stdout + result.stderr).strip().splitlines()
            info.errors.append(f"nvidia-smi failed: {message[0] if message else result.returncode}")
            return info
        info.sources.append("nvidia-smi")
        for line in result.stdout.splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != len(fields.split(",")):
                continue
            row = dict(zip(fields.split(","), parts, strict=False))
            cap = row.get("compute_cap", "")
            info.gpus.append(
                GpuInfo(
                    index=int(row["index"]) if row["index"].isdigit() else len(info.gpus),
                    name=row["name"],
                    compute_cap=cap if CAP_RE.fullmatch(cap) else "",
                )
            )
            info.version = info.version or row["driver_version"]
        header = run([smi])
        match = SMI_CUDA_RE.search(header.stdout)
        if match:
            info.cuda = match.group(1)
    except (OSError, subprocess.SubprocessError) as exc:
        info.errors.append(f"nvidia-smi failed: {exc}")
    return info


def _load_libcuda() -> Any | None:
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def query_libcuda(load: Callable[[], Any | None] | None = None) -> DriverInfo | None:
    """CUDA version (cuDriverGetVersion, what conda's __cuda reports) and GPUs from libcuda."""
    lib = (load or _load_libcuda)()
    if lib is None:
        return None
    info = DriverInfo(sources=["libcuda"])
    try:
        version = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(version)) != 0 or version.value <= 0:
            info.errors.append("libcuda: cuDriverGetVersion failed")
            return info
        info.cuda = cuda_version_from_int(version.value)
        status = lib.cuInit(0)
        if status != 0:
            info.errors.append(f"libcuda: cuInit failed with CUresult {status} (no usable GPU?)")
            return info
        count = ctypes.c_int(0)
        lib.cuDeviceGetCount(ctypes.byref(count))
        for index in range(count.value):
            device, major, minor = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
            if lib.cuDeviceGet(ctypes.byref(device), index) != 0:
                continue
            lib.cuDeviceGetAttribute(ctypes.byref(major), _CU_ATTR_CC_MAJOR, device)
            lib.cuDeviceGetAttribute(ctypes.byref(minor), _CU_ATTR_CC_MINOR, device)
            name = ctypes.create_string_buffer(256)
            lib.cuDeviceGetName(name, 256, device)
            info.gpus.append(GpuInfo(index, name.value.decode(errors="replace"), f"{major.value}.{minor.value}"))
    except (AttributeError, OSError) as exc:
        info.errors.append(f"libcuda: {exc}")
    return info


def driver_version_from_proc(path: str = PROC_DRIVER_VERSION) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            match = PROC_DRIVER_RE.search(fh.read())
    except OSError:
        return None
    return match.group(1) if match else None


def driver_info(
    smi: Callable[[], DriverInfo | None] | None = None,
    libcuda: Callable[[], DriverInfo | None] | None = None,
    proc: Callable[[], str | None] | None = None,
) -> DriverInfo:
    """Everything known about the driver, nvidia-smi first, filled in from libcuda and /proc."""
    merged = DriverInfo()
    for part in ((smi or query_nvidia_smi)(), (libcuda or query_libcuda)()):
        if part is None:
            continue
        merged.version = merged.version or part.version
        merged.cuda = merged.cuda or part.cuda
        if not merged.gpus or (part.gpus and not all(g.compute_cap for g in merged.gpus)):
            merged.gpus = part.gpus or merged.gpus
        merged.sources += part.sources
        merged.errors += part.errors
    if merged.version is None:
        merged.version = (proc or driver_version_from_proc)()
        if merged.version is not None:
            merged.sources.append("/proc")
    return merged


def compute_capabilities_from_driver() -> list[str]:
    """Compute capabilities ("9.0") of the GPUs the driver reports; [] without a driver."""
    for query in (query_nvidia_smi, query_libcuda):
        info = query()
        caps = [g.compute_cap for g in info.gpus if g.compute_cap] if info else []
        if caps:
            return caps
    return []


def compute_capabilities_from_torch() -> list[str]:
    """Compute capabilities torch sees; [] without torch, CUDA or devices."""
    try:
        import torch
    except ImportError:
        return []
    try:
        if not torch.cuda.is_available():
            return []
        caps = (torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count()))
        return [f"{major}.{minor}" for major, minor in caps]
    except Exception:  # a broken driver or runtime is "no GPU" here
        return []


def detect_compute_capabilities() -> list[str]:
    """The distinct compute capabilities present, driver first, then torch; sorted."""
    caps = compute_capabilities_from_driver() or compute_capabilities_from_torch()
    return sorted(set(caps), key=version_key)


