"""Rebuild packages from what they record and compare them with the originals, byte for byte.

    ssm-conda verify PACKAGE.conda ... [--no-cache]

Each package is rebuilt by rattler-build's rebuild from its rendered recipe (the variant, the exact packages of
its build and host environments, its build folder and time), written as `ssm-conda build` writes it, and
compared: identical, or which files differ and how (build ID, timestamp, content). See docs/reproducible.md."""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rattler.package import IndexJson
from rattler.package_streaming import extract
from rattler_build import Package

from ssm_conda.channels import check_archive, find_packages, sha256_of
from ssm_conda.compiler_cache import CCACHE_ENV, add_no_cache, compiler_cache_dir, configure_compiler_cache
from ssm_conda.console import Outcome, PipelineError, UsageError, print_summary
from ssm_conda.project import NAMES
from ssm_conda.reproducible import BUILD_ROOT_ENV, DEFAULT_BUILD_ROOT, build_root, chosen_root, differing_files, repack

BUILD_DIR = re.compile(r"^    build_dir: (.+)$", re.MULTILINE)  # the rendered recipe's build_configuration.directories


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("packages", nargs="+", metavar="PACKAGE_OR_DIR",
                        help=".conda files (built here or downloaded from a channel), or folders of them")
    add_no_cache(parser, "rebuild")


@dataclass(frozen=True)
class VerifyOptions:
    packages: tuple[Path, ...]
    compiler_cache: Path | None  # None: --no-cache
    build_root: Path  # this machine's: a package built in another folder is rebuilt only when the user names it

    @classmethod
    def from_args(cls, args: argparse.Namespace, environ: Mapping[str, str]) -> VerifyOptions:
        packages = tuple(p for p in find_packages(args.packages) if p.name.endswith(".conda"))
        if not packages:
            raise UsageError(f"no .conda package in {' '.join(args.packages)}")
        return cls(packages, None if args.no_cache else compiler_cache_dir(environ.get(CCACHE_ENV)), chosen_root(environ))


def recorded(path: Path, root: Path, into: Path) -> IndexJson:
    """The index.json of a package, which must have been built in `root`; unpacks it into `into` (and checks it there)."""
    try:
        index = check_archive(path, into)
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}") from None
    if index.name.normalized not in NAMES:  # its recorded build script would run here
        raise UsageError(f"{path}: {index.name.normalized} is not a package of this project ({', '.join(NAMES)})")
    recipe = into / "info" / "recipe" / "rendered_recipe.yaml"
    if not recipe.is_file() or not (found := BUILD_DIR.search(recipe.read_text())):
        raise UsageError(f"{path}: it records no rendered recipe (built without its recipe?), so it cannot be rebuilt")
    # rattler-build's rebuild empties the recorded folder: only this machine's build root, never one a package names
    if Path(found[1]) != root / "bld" / f"rattler-build_{index.name.normalized}":  # the file may have been renamed
        raise UsageError(f"{path}: it was built in {found[1]}, not in {root}/bld; to rebuild it there, set "
                         f"{BUILD_ROOT_ENV} to the folder holding that bld/ (`ssm-conda build` builds in {DEFAULT_BUILD_ROOT})")
    return index


def verify_one(path: Path, index: IndexJson, root: Path, scratch: Path) -> Outcome:
    """Rebuild `path` (unpacked in scratch/original by `recorded`, which read `index`) in its build root, and compare."""
    outcome, start = Outcome(index.name.source, str(index.build)), time.monotonic()
    print(f"rebuilding {path.name} in {root} (it compiles again) ...", flush=True)
    named = scratch / f"{index.name.source}-{index.version}-{index.build}.conda"  # rattler-build reads the file name
    named.symlink_to(path.absolute())
    with build_root(root):
        try:
            rebuilt = Package.from_file(named).rebuild(test="skip", output_dir=scratch).rebuilt_path
        except Exception as exc:  # rattler_build raises its own error types
            outcome.result, outcome.detail = "failed", (str(exc).strip().splitlines() or [repr(exc)])[-1][:200]
            return outcome
        finally:
            outcome.seconds = time.monotonic() - start
    ours = repack(Path(rebuilt), scratch / "rebuilt.conda", int(index.timestamp.timestamp()))
    outcome.size, outcome.path = path.stat().st_size, path
    if sha256_of(ours) == sha256_of(path):
        outcome.result, outcome.detail = "identical", f"sha256 {sha256_of(path)[:16]}"
        return outcome
    extract(ours, scratch / "rebuilt")
    files = differing_files(scratch / "original", scratch / "rebuilt")
    outcome.result = "differs"
    outcome.detail = "; ".join(f"{name} ({how})" for name, how in list(files.items())[:5]) or "the archive alone (no file)"
    if len(files) > 5:
        outcome.detail += f"; {len(files) - 5} more"
    return outcome


def run(args: argparse.Namespace) -> int:
    verify = VerifyOptions.from_args(args, os.environ)
    with tempfile.TemporaryDirectory(prefix="ssm-conda-verify-") as scratch:
        folders = [Path(scratch) / str(i) for i in range(len(verify.packages))]
        # every package read before anything is rebuilt or created
        indexes = [recorded(path, verify.build_root, folder / "original")
                   for path, folder in zip(verify.packages, folders, strict=True)]
        configure_compiler_cache(verify.compiler_cache)
        outcomes = [verify_one(path, index, verify.build_root, folder)
                    for path, index, folder in zip(verify.packages, indexes, folders, strict=True)]
    print_summary(outcomes)
    if differ := [o for o in outcomes if o.result != "identical"]:
        raise PipelineError(f"{len(differ)} of {len(outcomes)} package(s) not reproduced: {', '.join(o.package for o in differ)}")
    return 0
