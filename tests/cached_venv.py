"""Virtual environments of their own for the tools the tests run whose pins clash with ours (Quetz, conda and its
plugins): made on first use from a list of requirements, cached outside the clone under the list's hash, taken only
once complete (a broken one is made again), and made once when two test runs start together."""

from __future__ import annotations

import fcntl
import hashlib
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ssm_conda.paths import cache_dir


class VenvError(Exception):
    """A step of making the venv failed: the command and the last line it wrote."""


def cached_venv(name: str, requirements: Sequence[str]) -> Path:
    """The venv (this Python's X.Y) with `requirements` installed: pip arguments (names, pins, wheel files, -r FILE),
    hashed with each file's content. Its folder: the cache's NAME-pyXY-HASH."""
    files = [Path(r) for r in requirements if Path(r).is_file()]
    key = hashlib.sha256("\n".join([*requirements, *(hashlib.sha256(f.read_bytes()).hexdigest() for f in files)])
                         .encode()).hexdigest()[:12]
    venv = cache_dir() / f"{name}-py{sys.version_info.major}{sys.version_info.minor}-{key}"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{venv}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / ".complete").exists():
            print(f"making {venv} (pip install {shlex.join(requirements)})", flush=True)
            for step in ([sys.executable, "-m", "venv", "--clear", str(venv)],
                         [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                          *requirements]):
                if (made := subprocess.run(step, capture_output=True, text=True)).returncode != 0:
                    shutil.rmtree(venv, ignore_errors=True)
                    raise VenvError(f"{shlex.join(step)} failed: {(made.stderr.strip().splitlines() or ['no output'])[-1]}")
            (venv / ".complete").touch()
    return venv
