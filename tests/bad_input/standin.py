"""ssm-conda-dev standin: a wheel it cannot open (in --wheel-dir, named by --torch-wheel, or in the cache's wheels/),
and a cached Debian package dpkg-deb cannot unpack (--target-platform linux-aarch64)."""

from __future__ import annotations

import io
import os
import sys
import zipfile
from collections.abc import Callable

from ssm_conda_dev.standin import debian

from tests.bad_input import Case, Context

TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
TORCH = f"torch-2.13.0-{TAG}-{TAG}-manylinux_2_28_x86_64.whl"


def cut_short_wheel() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("torch-2.13.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0\n")
        zf.writestr("torch/__init__.py", os.urandom(4096))
    return buffer.getvalue()[:3000]


def torch_wheel(folder: str, data: bytes) -> Callable[[Context], None]:
    """A damaged torch wheel in {tmp}/`folder` ({wheel}: its path); $SSM_CONDA_CACHE is {tmp}/home/cache."""

    def setup(context: Context) -> None:
        path = context.tmp / folder / TORCH
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        context.values["wheel"] = str(path)

    return setup


def cached_debs(context: Context) -> None:
    """Every Debian package the aarch64 stand-in repacks in the cache, as files dpkg-deb cannot unpack."""
    debs = context.tmp / "home" / "cache" / "debian" / "debs"
    debs.mkdir(parents=True)
    for name in debian.PACKAGES:
        base, _, arch = name.partition(":")
        (debs / f"{base}_1.0-1_{arch or 'amd64'}.deb").write_bytes(b"!<arch>\n" + os.urandom(64))
    context.values["deb"] = str(debs / f"{debian.PACKAGES[0]}_1.0-1_amd64.deb")


STANDIN = ("standin", "--output-dir", "{tmp}/channel", "--offline")
CASES = [
    Case("standin-win-64", (*STANDIN, "--target-platform", "win-64"), "--target-platform win-64: no stand-in repacks", dev=True),
    Case("standin-random-bytes-wheel", (*STANDIN, "--wheel-dir", "{tmp}/wheels"),
         f"{TORCH}: not a readable wheel (File is not a zip file); delete it or replace it",
         setup=torch_wheel("wheels", os.urandom(4096)), dev=True),
    Case("standin-cut-short-wheel", (*STANDIN, "--wheel-dir", "{tmp}/wheels"), f"{TORCH}: not a readable wheel",
         setup=torch_wheel("wheels", cut_short_wheel()), dev=True),
    Case("standin-empty-torch-wheel", (*STANDIN, "--torch-wheel", "{wheel}"), f"{TORCH}: not a readable wheel",
         setup=torch_wheel("wheels", b""), dev=True),
    Case("standin-corrupt-cached-wheel", STANDIN, f"{TORCH}: not a readable wheel (File is not a zip file); delete it: "
         "the next run downloads it again", status=1, setup=torch_wheel("home/cache/wheels", os.urandom(4096)), dev=True),
    Case("standin-corrupt-cached-deb", (*STANDIN, "--target-platform", "linux-aarch64"),
         f"{debian.PACKAGES[0]}_1.0-1_amd64.deb: dpkg-deb cannot unpack it", status=1, setup=cached_debs, dev=True,
         may_write=("home/cache/debian/unpacked",)),
]
