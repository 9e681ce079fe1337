"""The tools for developing causal-conv1d-conda, apart from the product (ssm_conda): ssm-conda-dev's
commands (cli.py: standin/, benchmarks/, sync_matrix.py; `python -m ssm_conda_dev`), the pinned
sdists unpacked and patched as the builds patch them (sdist.py), and solves and installs done as
pixi does them (solving.py), for the tests and the benchmarks."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import ssm_conda


def subcommand(*args: str) -> tuple[list[str], dict[str, str]]:
    """argv and environment that run `ssm-conda ARGS...` in a child process, installed or not
    (the benchmarks and tests run it from a checkout)."""
    package_root = str(Path(ssm_conda.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
    return [sys.executable, "-m", "ssm_conda", *args], {**os.environ, "PYTHONPATH": path}
