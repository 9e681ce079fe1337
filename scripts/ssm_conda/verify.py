"""Rebuild packages from this checkout's recipe and compare them with the originals, byte for byte.

    ssm-conda verify PACKAGE.conda ... [-c CHANNEL ...] [--no-cache]

Nothing a package holds runs. Before anything is built, each package must record this checkout's recipe (file by
file), a variant the checkout renders and that variant's rendered recipe, this machine's build root, build and host
packages that the channels named with -c list with the same sha256, and only what upload accepts. Then rattler-build's
rebuild builds it again with those packages, in the build root, written as `ssm-conda build` writes it, and the two
are compared: identical, or which files differ and how (build ID, timestamp, content). See docs/reproducible.md."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rattler import Channel, PackageName, SparseRepoData
from rattler.package import IndexJson
from rattler.package_streaming import extract
from rattler_build import Package

from ssm_conda import options
from ssm_conda.channels import channel_repodata, check_archive, find_packages, sha256_of
from ssm_conda.compiler_cache import CCACHE_ENV, add_no_cache, compiler_cache_dir, configure_compiler_cache
from ssm_conda.console import Outcome, PipelineError, UsageError, print_summary
from ssm_conda.contents import check_contents
from ssm_conda.matrix import PLATFORMS, TARGET_PLATFORM, PlannedVariant, builds_on, load_variant_files, plan, standin_overrides
from ssm_conda.paths import recipe_of
from ssm_conda.project import NAMES
from ssm_conda.reproducible import BUILD_ROOT_ENV, build_root, chosen_root, clear, differing_files, repack
from ssm_conda.selection import Selection

RENDERED = "rendered_recipe.yaml"  # rattler-build's record of the build, in info/recipe beside the recipe's files
RECORDED = {"recipe", "build_configuration", "finalized_dependencies", "finalized_sources", "system_tools"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("packages", nargs="+", metavar="PACKAGE_OR_DIR",
                        help=".conda files (built here or downloaded from a channel), or folders of them")
    options.add_channels(parser, "a channel the packages were built from: each build and host package must be one it lists")
    add_no_cache(parser, "rebuild")


@dataclass(frozen=True)
class VerifyOptions:
    packages: tuple[Path, ...]
    channels: tuple[str, ...]
    compiler_cache: Path | None  # None: --no-cache
    build_root: Path  # this machine's: a package built in another folder is rebuilt only when the user names it

    @classmethod
    def from_args(cls, args: argparse.Namespace, environ: Mapping[str, str]) -> VerifyOptions:
        if bz2 := next((p for p in args.packages if p.endswith(".tar.bz2")), None):
            raise UsageError(f"{bz2}: verify rebuilds .conda packages (what ssm-conda build writes), not .tar.bz2")
        packages = tuple(p for p in find_packages(args.packages) if p.name.endswith(".conda"))
        if not packages:
            raise UsageError(f"no .conda package in {' '.join(args.packages)}")
        return cls(packages, options.channels(args.channel),
                   None if args.no_cache else compiler_cache_dir(environ.get(CCACHE_ENV)), chosen_root(environ))


def _files(root: Path, follow_links: bool) -> dict[str, bytes]:
    """The files under `root` and their bytes (a link not followed: its target); byte-compiled files left out."""
    found = {}
    for folder, dirs, names in os.walk(root, followlinks=follow_links):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for path in (Path(folder, name) for name in names):
            linked = path.is_symlink() and not follow_links
            found[str(path.relative_to(root))] = os.readlink(path).encode() if linked else path.read_bytes()
    return found


def recipe_differences(recorded: Path, checkout: Path) -> list[str]:
    """The files that differ between a package's info/recipe (less rattler-build's records) and the checkout's recipe
    folder, its links followed as `ssm-conda build` copies it."""
    theirs = {name: data for name, data in _files(recorded, False).items() if name not in (RENDERED, "variant_config.yaml")}
    ours = _files(checkout, True)
    return sorted(name for name in theirs.keys() | ours.keys() if theirs.get(name) != ours.get(name))


def rendered_problem(doc: Any, variant: PlannedVariant, verify: VerifyOptions) -> str | None:
    """Why the rendered recipe a package records is not the checkout's for `variant`, built in this build root from
    the channels named; None if it is. Its package records are checked by `unlisted`."""
    if unknown := sorted(set(doc) - RECORDED):  # a document that is no mapping ends here too, or raises (malformed)
        return f"its {RENDERED} records what this project's builds do not ({', '.join(map(str, unknown))})"
    config = doc.get("build_configuration") or {}
    if doc.get("recipe") != variant.rendered.recipe.to_dict() or config.get("variant") != variant.rendered.variant:
        return f"its {RENDERED} is not this checkout's recipe rendered for {variant.label}"
    if (doc.get("finalized_sources") or []) != (doc["recipe"].get("source") or []):
        return "its sources are not the recipe's (the sdist with its sha256, the patches)"
    folder = verify.build_root / "bld" / f"rattler-build_{variant.package}"  # where rattler-build's rebuild empties
    expected = {"host_prefix": f"{folder}/host_env{'_placehold' * 26}"[:255], "build_prefix": f"{folder}/build_env",
                "work_dir": f"{folder}/work", "build_dir": str(folder)}
    if (directories := config.get("directories")) != expected:
        where = directories.get("build_dir") if isinstance(directories, dict) else None
        return (f"it was built in {where or 'folders of its own'}, not in {verify.build_root}/bld; to rebuild it there, set "
                f"{BUILD_ROOT_ENV} to the folder holding that bld/")
    named = {Channel(c).base_url for c in verify.channels}
    if foreign := [c for c in config.get("channels") or [] if Channel(str(c)).base_url not in named]:
        return f"it was built from {foreign[0]}, not from a channel named with -c ({', '.join(verify.channels)})"
    return None


def unlisted(doc: dict[str, Any], repodata: Sequence[SparseRepoData]) -> str | None:
    """The first build or host package a rendered recipe records that the channels do not list with its sha256."""
    try:
        environments = doc.get("finalized_dependencies") or {}
        for record in (r for env in ("build", "host") for r in (environments.get(env) or {}).get("resolved") or []):
            listed = {(r.url, r.sha256.hex() if r.sha256 else None) for data in repodata if data.subdir == record["subdir"]
                      for r in data.load_records(PackageName(str(record["name"])))}
            if (record["url"], record["sha256"]) not in listed:
                return f"its build environment holds {record['url']}, which no channel named with -c lists with that sha256"
    except Exception as exc:  # not records: a key missing, a name rattler refuses
        return f"its {RENDERED} is malformed ({type(exc).__name__} in its build and host packages)"
    return None


def recorded(path: Path, verify: VerifyOptions, scratch: Path) -> tuple[Path, IndexJson, dict[str, Any]]:
    """A copy of a package in `scratch` (what is checked is what is rebuilt), named as rattler-build's rebuild reads it,
    its index.json and its rendered recipe, checked as this module's docstring says but for its build and host
    packages; it is unpacked into scratch/original."""
    scratch.mkdir()
    copy, into = Path(shutil.copyfile(path, scratch / "package.conda")), scratch / "original"
    try:
        index = check_archive(copy, into)
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}") from None
    if (name := index.name.normalized) not in NAMES:
        raise UsageError(f"{path}: {name} is not a package of this project ({', '.join(NAMES)})")
    if index.subdir not in PLATFORMS or not (recipe := into / "info" / "recipe" / RENDERED).is_file():
        raise UsageError(f"{path}: it records no rendered recipe for {', '.join(PLATFORMS)} (built without its recipe?), "
                         "so it cannot be rebuilt")
    if (where := builds_on(index.subdir)) != builds_on(TARGET_PLATFORM):
        raise UsageError(f"{path}: a {index.subdir} package is rebuilt on {where}, where its compilers run")
    if differ := recipe_differences(recipe.parent, recipe_of(name).parent):
        more = f" and {len(differ) - 5} more" if len(differ) > 5 else ""
        raise UsageError(f"{path}: its recipe is not this checkout's ({', '.join(differ[:5])}{more} differ); check out "
                         "the revision it was built from")
    overrides = standin_overrides(verify.channels) | {"nvcc_lineinfo": ["0", "1"]}  # --line-info builds too
    variants = plan(Selection(packages=(name,)), load_variant_files(target_platform=index.subdir), overrides=overrides,
                    target_platform=index.subdir)
    if (variant := next((v for v in variants if v.build_string == str(index.build)), None)) is None:
        raise UsageError(f"{path}: {index.build} is not a variant this checkout renders for {index.subdir} (an --arch "
                         "build, or a variant no longer listed)")
    try:
        check_contents(into, index, variant)
        doc = yaml.safe_load(recipe.read_text())
        problem = rendered_problem(doc, variant, verify)
    except Exception as exc:  # check_contents' ValueError, and whatever a malformed record raises
        problem = str(exc) if isinstance(exc, ValueError) else f"its {RENDERED} is malformed ({type(exc).__name__})"
    if problem:
        raise UsageError(f"{path}: {problem}")
    return copy.rename(scratch / f"{index.name.source}-{index.version}-{index.build}.conda"), index, doc


def verify_one(path: Path, copy: Path, index: IndexJson, root: Path) -> Outcome:
    """Rebuild `path` from the `copy` that `recorded` checked (its original/ beside it) in the build root, and compare."""
    outcome, start, scratch = Outcome(index.name.source, str(index.build)), time.monotonic(), copy.parent
    print(f"rebuilding {path.name} in {root} (it compiles again) ...", flush=True)
    clear(root)
    try:
        rebuilt = Package.from_file(copy).rebuild(test="skip", output_dir=scratch).rebuilt_path
    except Exception as exc:  # rattler_build raises its own error types
        outcome.result, outcome.detail = "failed", (str(exc).strip().splitlines() or [repr(exc)])[-1][:200]
        return outcome
    finally:
        outcome.seconds = time.monotonic() - start
    ours = repack(Path(rebuilt), scratch / "rebuilt.conda", int(index.timestamp.timestamp()))
    outcome.size, outcome.path = path.stat().st_size, path
    if sha256_of(ours) == sha256_of(copy):
        outcome.result, outcome.detail = "identical", f"sha256 {sha256_of(copy)[:16]}"
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
    # its scratch folders lie in the build root's tmp/, as rattler-build's do
    with build_root(verify.build_root) as root, tempfile.TemporaryDirectory(prefix="verify-") as scratch:
        # every package read and checked before anything is rebuilt
        checked = [recorded(path, verify, Path(scratch) / str(i)) for i, path in enumerate(verify.packages)]
        repodata = channel_repodata(verify.channels, sorted({index.subdir for _, index, _ in checked} | {"noarch"}))
        for path, (_, _, doc) in zip(verify.packages, checked, strict=True):
            if problem := unlisted(doc, repodata):
                raise UsageError(f"{path}: {problem}")
        configure_compiler_cache(verify.compiler_cache)
        outcomes = [verify_one(path, copy, index, root) for path, (copy, index, _) in zip(verify.packages, checked, strict=True)]
    print_summary(outcomes)
    if differ := [o for o in outcomes if o.result != "identical"]:
        raise PipelineError(f"{len(differ)} of {len(outcomes)} package(s) not reproduced: {', '.join(o.package for o in differ)}")
    return 0
