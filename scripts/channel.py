"""Local conda channels: index a directory so conda, mamba and pixi can install from it."""

from __future__ import annotations

import asyncio
from pathlib import Path


def index_channel(channel_dir: Path, force: bool = False) -> None:
    """Write repodata.json for every subdir (noarch/ too: conda requires it to exist).

    `force` re-reads every package, for channels whose files were replaced under the same name.
    """
    from rattler import Subdir
    from rattler.index import index_fs

    for subdir in (str(Subdir.current()), "noarch"):
        (channel_dir / subdir).mkdir(parents=True, exist_ok=True)
        asyncio.run(index_fs(channel_dir, target_platform=Subdir(subdir), force=force))


def install_into_prefix(
    channels: list[str],
    specs: list[str],
    prefix: Path,
    cuda: str | None = None,
    cache_dir: Path | None = None,
) -> list[str]:
    """Solve and install specs into a fresh prefix with py-rattler (pixi's solver and installer).

    `cuda` stands for the driver's __cuda virtual package (CONDA_OVERRIDE_CUDA), which py-rattler
    does not add on its own. Returns the installed records as name=version=build.
    """
    from rattler import (
        BuildString,
        GenericVirtualPackage,
        PackageName,
        Subdir,
        Version,
        VirtualPackage,
        install,
        solve,
    )

    virtual = [vp.into_generic() for vp in VirtualPackage.detect()]
    virtual = [vp for vp in virtual if vp.name.normalized != "__cuda"]
    if cuda:
        virtual.append(GenericVirtualPackage(PackageName("__cuda"), Version(cuda), BuildString("0")))
    records = asyncio.run(solve(
        sources=channels, specs=specs, platforms=[Subdir.current(), Subdir("noarch")],
        virtual_packages=virtual,
    ))
    asyncio.run(install(records, target_prefix=prefix, cache_dir=cache_dir, show_progress=False))
    return [f"{r.name.normalized}={r.version}={r.build}" for r in records]
