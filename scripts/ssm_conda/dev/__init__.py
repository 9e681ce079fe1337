"""What developing this project needs beside ssm-conda-dev's commands (`python -m ssm_conda.dev`):
the pinned sdists unpacked and patched as the builds patch them, and solves and installs done as
pixi does them, for the tests and the benchmarks. The commands themselves are cli.DEV_COMMANDS
(standin/, benchmarks/)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def subcommand(*args: str) -> tuple[list[str], dict[str, str]]:
    """argv and environment that run `ssm-conda ARGS...` in a child process, installed or not
    (the benchmarks and tests run it from a checkout)."""
    package_root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
    return [sys.executable, "-m", "ssm_conda", *args], {**os.environ, "PYTHONPATH": path}
