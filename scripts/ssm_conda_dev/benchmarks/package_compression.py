"""What a higher zstd level buys: built packages re-packed at several levels, size against time.

    ssm-conda-dev bench-zstd output/linux-64/causal-conv1d-*.conda [--levels 15 19 22] [--threads N]

Each package's files are packed again by rattler's own writer (py-rattler-build's
assemble_package, the code rattler-build packages with) at each level, timed, and the sizes put
next to the first level's. Run it on packages built with the current flags: fatbins compressed by
nvcc leave less for zstd.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ssm_conda.channels import find_packages
from ssm_conda.console import UsageError, human_duration, human_size, print_table

DEFAULT_LEVELS = (15, 19, 22)  # rattler-build's default, conda-forge's (conda-build), zstd's highest


@dataclass
class Packed:
    package: str
    level: int
    size: int
    seconds: float


def repack(package: Path, levels: tuple[int, ...], threads: int) -> list[Packed]:
    from rattler.package_streaming import extract
    from rattler_build import assemble_package

    if len(parts := package.name.removesuffix(".conda").rsplit("-", 2)) != 3:
        raise UsageError(f"{package}: not a conda package name (name-version-build.conda)")
    name, version, build = parts
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-zstd-") as tmp:
        files = Path(tmp) / "files"
        try:
            extract(package, files)
        except OSError as exc:  # what rattler raises for a damaged archive
            raise UsageError(f"{package}: cannot read it as a conda package: {exc}") from None
        shutil.rmtree(files / "info")  # assemble_package writes its own
        for level in levels:
            out = Path(tmp) / f"level{level}"
            out.mkdir()
            start = time.monotonic()
            written = assemble_package(name, version, package.parent.name, build, out, files_dir=files,
                                       compression_level=level, compression_threads=threads, detect_prefix=False)
            seconds = time.monotonic() - start
            results.append(Packed(package.name, level, Path(written.path).stat().st_size, seconds))
            print(f"{package.name}: level {level}: {human_size(results[-1].size)} in {human_duration(seconds)}",
                  flush=True)
    return results


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("packages", nargs="+", help=".conda files, or channel directories (every package in them)")
    parser.add_argument("--levels", type=int, nargs="+", default=list(DEFAULT_LEVELS),
                        help=f"zstd levels, 1-22 (default: {' '.join(map(str, DEFAULT_LEVELS))}); "
                        "the first is the one the others are compared with")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="compression threads (default: every CPU, as rattler-build)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on stdout instead of the table")


def run(args: argparse.Namespace) -> int:
    bad = [level for level in args.levels if not 1 <= level <= 22]
    if bad:
        raise UsageError(f"--levels {bad[0]}: zstd levels are 1 to 22")
    if args.threads < 1:
        raise UsageError(f"--threads {args.threads}: give 1 or more")
    packages = [p for p in find_packages(args.packages) if p.name.endswith(".conda")]
    if not packages:
        raise UsageError(f"no .conda package in {' '.join(args.packages)}")
    results = [r for package in packages for r in repack(package, tuple(args.levels), args.threads)]
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
        return 0
    base = {r.package: r for r in results if r.level == args.levels[0]}
    rows = [(r.package, str(r.level), human_size(r.size), f"{r.size / base[r.package].size:.3f}",
             human_duration(r.seconds), f"{r.seconds / max(base[r.package].seconds, 1e-9):.1f}x") for r in results]
    print()
    print_table(["package", "level", "size", f"size / level {args.levels[0]}", "time",
                 f"time / level {args.levels[0]}"], rows)
    return 0
