"""ssm-conda-dev sync-matrix: bad input is refused before any channel is read or any variant file written."""

from __future__ import annotations

import shutil

from tests.bad_input import Case, Context
from tests.repo import VARIANTS_DIR


def variants_copy(context: Context) -> None:
    shutil.copytree(VARIANTS_DIR, context.tmp / "variants")


def channel(context: Context) -> None:
    """An empty indexed channel: it has no pytorch at all."""
    for subdir in ("linux-64", "linux-aarch64", "win-64", "noarch"):
        (context.tmp / "channel" / subdir).mkdir(parents=True)
        (context.tmp / "channel" / subdir / "repodata.json").write_text(f'{{"info": {{"subdir": "{subdir}"}}, "packages": {{}}}}')
    variants_copy(context)


REPODATA_CACHE = ("home/cache*",)  # the repodata it reads is cached in $SSM_CONDA_CACHE: no variant file is written
SYNC = ("sync-matrix", "--variants-dir", "{tmp}/variants")
CASES = [
    Case("sync-matrix-oldest-not-a-minor", (*SYNC, "--oldest", "2.x"), "--oldest '2.x' is not a pytorch minor", dev=True,
         setup=variants_copy),
    Case("sync-matrix-no-variants-dir", ("sync-matrix", "--variants-dir", "{tmp}/nowhere", "-c", "http://127.0.0.1:9/"),
         "no such directory", dev=True),
    Case("sync-matrix-empty-variants-dir", ("sync-matrix", "--variants-dir", "{tmp}", "-c", "http://127.0.0.1:9/"),
         "no variant files (*.yaml) in", dev=True),
    Case("sync-matrix-channel-refuses", (*SYNC, "-c", "http://127.0.0.1:9/"), "cannot read the repodata of http://127.0.0.1:9/",
         status=1, dev=True, setup=variants_copy, may_write=REPODATA_CACHE),
    Case("sync-matrix-no-such-channel-folder", (*SYNC, "-c", "{tmp}/nowhere"), "no such channel directory", dev=True,
         setup=variants_copy),
    Case("sync-matrix-channel-without-pytorch", (*SYNC, "-c", "{tmp}/channel"), "has no CUDA build of pytorch on", status=1,
         dev=True, setup=channel, may_write=REPODATA_CACHE),  # no variant file deleted although no line is built
    Case("sync-matrix-unknown-platform", (*SYNC, "--target-platform", "osx-arm64"), "invalid choice: 'osx-arm64'", dev=True,
         setup=variants_copy),
]
