"""Facts for the doctor's tests: variant files, GPUs, torch builds, and a Facts builder."""

from __future__ import annotations

import stat
import sys
from collections.abc import Sequence
from pathlib import Path

from ssm_conda.doctor.facts import EnvInfo, Facts, InstalledDist, InterpreterInfo, TorchInfo
from ssm_conda.machine import DriverInfo, GpuInfo
from ssm_conda.matrix import VariantFile, read_variant_file

from tests.repo import VARIANTS_DIR

# The real files (compilers, zip_keys: what rattler-build needs to render the recipes) with the
# values these tests are written for.
CUDA129 = VariantFile(
    Path("variants/cuda129.yaml"),
    {
        **read_variant_file(VARIANTS_DIR / "cuda129.yaml").data,
        "cuda_compiler_version": ["12.9"],
        "python": ["3.10"],
        "pytorch": ["2.12", "2.13"],
        "gpu_generation": ["all"],
        "cuda_arch_list": ["7.5;8.0;8.6;9.0;10.0;12.0+PTX"],
        "cuda_arch_supported": ["7.5;8.0;8.6;8.7;8.9;9.0;10.0;10.1;10.3;12.0;12.1"],
    },
)
CUDA130 = VariantFile(
    Path("variants/cuda130.yaml"),
    {
        **read_variant_file(VARIANTS_DIR / "cuda130.yaml").data,
        "cuda_compiler_version": ["13.0"],
        "python": ["3.10"],
        "pytorch": ["2.12", "2.13"],
        "gpu_generation": ["all", "sm8x", "sm90", "sm10x", "sm12x"],
        "cuda_arch_list": ["7.5;8.0;8.6;9.0;10.0;11.0;12.0+PTX", "8.0;8.6+PTX", "9.0+PTX", "10.0+PTX", "12.0+PTX"],
        "cuda_arch_supported": ["7.5;8.0;8.6;8.7;8.8;8.9;9.0;10.0;11.0;12.0;12.1"],
    },
)
FILES = [CUDA129, CUDA130]
VERSIONS = {"causal-conv1d": "1.7.0", "mamba-ssm": "2.3.2.post1"}  # what the recipes render to

H100 = GpuInfo(0, "NVIDIA H100 80GB HBM3", "9.0")
B300 = GpuInfo(0, "NVIDIA B300", "10.3")
GB10 = GpuInfo(0, "NVIDIA GB10", "12.1")


def variant(base: VariantFile = CUDA130, **data: list[str]) -> VariantFile:
    return VariantFile(base.path, dict(base.data, **data))


def driver(cuda: str | None = "13.0", version: str | None = "580.65.06", gpus: Sequence[GpuInfo] = (H100,)) -> DriverInfo:
    return DriverInfo(version=version, cuda=cuda, gpus=list(gpus), sources=["fake"])


def conda_torch(version: str = "2.13.0", cuda: str | None = "13.0", abi: bool = True) -> TorchInfo:
    build = f"cuda{cuda.replace('.', '')}_generic_py312_h0_200" if cuda else "cpu_generic_py312_h0_0"
    return TorchInfo(version=version, cuda=cuda, cxx11_abi=abi, dist=InstalledDist(version, "conda", conda_build=build))


def pip_torch(version: str = "2.13.0+cu130", cuda: str = "13.0") -> TorchInfo:
    return TorchInfo(version, cuda, True, InstalledDist(version, "pip"))


def make_facts(
    *,
    drv: DriverInfo | None = None,
    torch: TorchInfo | None = None,
    python: str = "3.12.8",
    env: EnvInfo | None = None,
    wheel: InstalledDist | None = None,
    mamba: InstalledDist | None = None,
    extension_error: str | None = None,  # causal_conv1d_cuda's
    extensions: dict[str, str | None] | None = None,
    override: str | None = None,
) -> Facts:
    interp = InterpreterInfo(
        executable="/opt/env/bin/python",
        version=python,
        prefix="/opt/env",
        torch=torch,
        causal_conv1d=wheel,
        mamba_ssm=mamba,
        extensions=extensions or ({"causal_conv1d_cuda": extension_error} if extension_error else {}),
    )
    return Facts(
        driver=drv if drv is not None else driver(),
        interpreter=interp,
        env=env or EnvInfo("conda", "env", "/opt/env"),
        conda_override_cuda=override,
    )


FAKE_TORCH = (
    "__version__ = \"2.13.0+cu130\"\nclass version:\n    cuda = '13.0'\nclass _C:\n    _GLIBCXX_USE_CXX11_ABI = True\n"
)


def fake_env(tmp_path: Path, torch_body: str) -> Path:
    """A wrapper interpreter whose sys.path holds a fake torch and a pip wheel of causal-conv1d."""
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(torch_body)
    (site / "causal_conv1d_cuda.py").write_text(
        'raise ImportError("/site/causal_conv1d_cuda.cpython-312-x86_64-linux-gnu.so: '
        'undefined symbol: _ZN3c1017RegisterOperatorsD1Ev")\n'
    )
    dist_info = site / "causal_conv1d-1.5.0.post8+cu12torch2.6cxx11abiTRUE.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: causal_conv1d\nVersion: 1.5.0.post8+cu12torch2.6cxx11abiTRUE\n"
    )
    (dist_info / "INSTALLER").write_text("pip\n")
    torch_info = site / "torch-2.13.0.dist-info"
    torch_info.mkdir()
    (torch_info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0+cu130\n")
    (torch_info / "INSTALLER").write_text("pip\n")
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper
