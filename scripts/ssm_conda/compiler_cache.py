"""The compiler cache of recipe/shared/build-extension.sh (ccache): its folder, chosen and checked once, handed to the
script through the environment, and the hits a build log reports. build and verify use it."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from ssm_conda.channels import writable_dir
from ssm_conda.console import UsageError
from ssm_conda.paths import cache_dir

CCACHE_ENV = "SSM_CONDA_CCACHE_DIR"  # read by recipe/shared/build-extension.sh (a build secret: never recorded)
# `ccache --show-stats` at the end of recipe/shared/build-extension.sh: "Cacheable calls: 4 / 9 (44.44%)",
# then "  Hits: 3 / 4 (75.00%)", maybe with lines of the script's stderr between them.
CCACHE_HITS_RE = re.compile(r"Cacheable calls:\s+(\d+)\s*/\s*\d+.*\n(?:.*\n)*?\s*Hits:\s+(\d+)")


def add_no_cache(parser: argparse.ArgumentParser, use: str) -> None:
    parser.add_argument("--no-cache", action="store_true", help=f"{use} without the compiler cache (default: ccache in "
                        f"${CCACHE_ENV} or ~/.cache/causal-conv1d-conda/ccache; its hits give the same bytes)")


def compiler_cache_dir(chosen: str | None, output_dir: Path | None = None) -> Path:
    """The compiler cache's folder, checked (outside the output channel, writable), not created."""
    directory = Path(chosen or cache_dir() / "ccache").resolve()
    if output_dir and directory.is_relative_to(output_dir):
        raise UsageError(f"{CCACHE_ENV}={directory} is inside the output channel {output_dir}; put it elsewhere")
    return writable_dir(directory, CCACHE_ENV)


def configure_compiler_cache(directory: Path | None) -> None:
    """Point the build script's ccache at `directory`, or at nothing."""
    if directory is None:
        os.environ.pop(CCACHE_ENV, None)
        print("compiler cache: off (--no-cache)")
        return
    directory.mkdir(parents=True, exist_ok=True)
    os.environ[CCACHE_ENV] = str(directory)
    print(f"compiler cache: {directory} (--no-cache to build without it)")


def cache_hits(log: str) -> str:
    """ "3/4" (compiler-cache hits / cacheable compiles) from a build log, "-" if the cache was off."""
    found = CCACHE_HITS_RE.findall(log)
    return f"{found[-1][1]}/{found[-1][0]}" if found else "-"
