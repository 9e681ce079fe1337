"""What this project builds: one record per package, read by build, doctor, upload, verify and ssm-conda-dev."""

from __future__ import annotations

from dataclasses import dataclass

from ssm_conda.console import one_of


@dataclass(frozen=True)
class Package:
    name: str  # the conda package, and its folder in recipe/
    module: str  # the Python package it installs: import name and distribution
    extensions: tuple[str, ...]  # the top-level modules that load its CUDA kernels (module/_C, torch ops)
    needs: tuple[str, ...] = ()  # packages it calls: built before it, installed with it
    # CI's expected build times, measured on 2 cores against the stand-in channel, CUDA 13.0 (docs/ci.md):
    cold_s: int = 0  # the first Python of a job, empty compiler cache, sm90 (one architecture)
    cached_s: int = 0  # each further Python, compiled from the cache


# In build order: a package comes after the packages it needs (mamba-ssm calls causal_conv1d).
PACKAGES = (Package("causal-conv1d", "causal_conv1d", ("causal_conv1d_cuda",), cold_s=356, cached_s=60),
            Package("mamba-ssm", "mamba_ssm", ("selective_scan_cuda",), ("causal-conv1d",), cold_s=419, cached_s=76))
NAMES = tuple(p.name for p in PACKAGES)
# conda-forge's run exports of our build and host requirements (compilers less their _PLATFORM suffix): the names they
# add to a package's depends, as rattler-build's finalized_dependencies of our packages list them
RUN_EXPORTS = {"gcc": ("libgcc",), "gxx": ("libstdcxx",), "sysroot": ("__glibc",), "cuda-nvcc": ("cuda-version",),
               "cuda-cudart-dev": ("cuda-cudart",), "cuda-arch": ("cuda-arch",), "pytorch": ("pytorch", "libtorch"),
               "python-abi3": ("cpython", "_python_abi3_support"), "vs2022": ("vc", "vc14_runtime", "ucrt"),
               "vs": ("vc", "vc14_runtime", "ucrt")}


def package(name: str) -> Package:
    if found := next((record for record in PACKAGES if record.name == name), None):
        return found
    raise one_of("package", name, NAMES)
