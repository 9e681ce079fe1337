"""ssm-conda-dev bench-zstd: archives it cannot read (random bytes, a zip of junk, cut short, empty, a name that is
not name-version-build)."""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Callable

from tests.bad_input import Case, Context

NAME = "demo-1.0-h0_0.conda"


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    return buffer.getvalue()


def archive(data: bytes, name: str = NAME) -> Callable[[Context], None]:
    """{package}: a file of `data` in a linux-64 folder of the case's channel."""

    def setup(context: Context) -> None:
        path = context.tmp / "channel" / "linux-64" / name
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        context.values["package"] = str(path)

    return setup


JUNK_ZIP = zip_bytes({"metadata.json": b'{"conda_pkg_format_version": 2}', "pkg-demo-1.0-h0_0.tar.zst": os.urandom(4096),
                      "info-demo-1.0-h0_0.tar.zst": os.urandom(512)})
CASES = [
    Case(f"bench-zstd-{case_id}", ("bench-zstd", "{package}", "--levels", "1"), message, setup=archive(data, *name), dev=True)
    for case_id, data, message, *name in [
        ("random-bytes", os.urandom(4096), f"{NAME}: cannot read it as a conda package: invalid zip archive"),
        ("zip-of-junk", JUNK_ZIP, f"{NAME}: cannot read it as a conda package: an io error occurred: Unknown frame"),
        ("cut-short", JUNK_ZIP[:len(JUNK_ZIP) // 2], f"{NAME}: cannot read it as a conda package"),
        ("empty", b"", f"{NAME}: cannot read it as a conda package"),
        ("not-a-package-name", JUNK_ZIP, "junk.conda: not a conda package name (name-version-build.conda)", "junk.conda"),
    ]
]
