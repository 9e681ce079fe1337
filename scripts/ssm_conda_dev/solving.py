"""Solve and install as pixi does (py-rattler), for a machine with a given driver and GPU: the
end-to-end test installs from the output channel, the build benchmark and the generation tests
check which package a machine gets."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from rattler import BuildString, GenericVirtualPackage, PackageName, Subdir, Version, VirtualPackage, install, solve


def solve_for_machine(
    channels: list[str],
    specs: list[str],
    cuda: str | None = None,
    cuda_arch: str | None = None,
    platform: str | None = None,
) -> list[Any]:
    """What pixi's solver (py-rattler) installs for specs on a machine whose driver supports `cuda`
    (__cuda) and whose oldest GPU is `cuda_arch` (__cuda_arch); None leaves either out, as on a
    machine without a driver or a GPU. This machine's other virtual packages (__glibc, __linux)
    stand for the rest. Raises rattler's SolverError, which names what could not be satisfied."""
    given = {"__cuda": cuda, "__cuda_arch": cuda_arch}
    virtual = [vp for vp in (p.into_generic() for p in VirtualPackage.detect()) if vp.name.normalized not in given]
    virtual += [GenericVirtualPackage(PackageName(name), Version(value), BuildString("0"))
                for name, value in given.items() if value is not None]
    platforms = [Subdir(platform) if platform else Subdir.current(), Subdir("noarch")]
    return asyncio.run(solve(sources=channels, specs=specs, platforms=platforms, virtual_packages=virtual))


def install_into_prefix(
    channels: list[str],
    specs: list[str],
    prefix: Path,
    cuda: str | None = None,
    cuda_arch: str | None = None,
    cache_dir: Path | None = None,
    platform: str | None = None,
) -> list[str]:
    """Solve (solve_for_machine) and install specs into a fresh prefix with py-rattler (pixi's
    solver and installer), for this machine's platform or `platform`. Returns the installed records
    as name=version=build."""

    records = solve_for_machine(channels, specs, cuda, cuda_arch, platform)
    asyncio.run(install(records, target_prefix=prefix, cache_dir=cache_dir, show_progress=False,
                        platform=Subdir(platform) if platform else None))
    return [f"{r.name.normalized}={r.version}={r.build}" for r in records]
