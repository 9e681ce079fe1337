"""Rewrite torch's Requires-Dist the way conda-forge's build of pytorch has it.

PyPI's torch lists the NVIDIA wheels (nvidia-*, cuda-toolkit, cuda-bindings) and triton; in conda
those are conda packages (libcublas, libcudnn, nccl, ...), so `pip check` would fail on them. The
pure-Python requirements stay. The RECORD line of METADATA gets the new hash and size.
"""

import base64
import hashlib
import re
import sys
from pathlib import Path

DROP = re.compile(r"^Requires-Dist:\s*(nvidia-|cuda-|triton)", re.IGNORECASE)


def main(site_packages: str) -> None:
    dist = next(Path(site_packages).glob("torch-*.dist-info"))
    meta = dist / "METADATA"
    lines = meta.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if not DROP.match(line)]
    dropped = [line.strip() for line in lines if DROP.match(line)]
    data = "".join(kept).encode("utf-8")
    meta.write_bytes(data)
    for line in dropped:
        print(f"dropped {line}")
    record = dist / "RECORD"
    if record.exists():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rel = f"{dist.name}/METADATA"
        rows = [
            f"{rel},sha256={digest},{len(data)}" if row.split(",", 1)[0] == rel else row
            for row in record.read_text(encoding="utf-8").splitlines()
        ]
        record.write_text("\n".join(rows) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
