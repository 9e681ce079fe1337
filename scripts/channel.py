"""Local conda channels: index a directory so conda, mamba and pixi can install from it."""

from __future__ import annotations

import asyncio
from pathlib import Path

SUBDIRS = ("linux-64", "noarch")


def index_channel(channel_dir: Path) -> None:
    """Write repodata.json for every subdir (noarch/ too: conda requires it to exist)."""
    from rattler import Platform
    from rattler.index import index_fs

    for subdir in SUBDIRS:
        (channel_dir / subdir).mkdir(parents=True, exist_ok=True)
    for subdir in SUBDIRS:
        asyncio.run(index_fs(channel_dir, target_platform=Platform(subdir)))
