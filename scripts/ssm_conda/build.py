"""Build the conda packages, one per variant, into a local channel (rattler-build's Python API).

    ssm-conda plan [selectors]    # the matrix, rendered, nothing built
    ssm-conda build [selectors]   # build the selected variants into --output-dir

Selectors (below) outside the variant files are overrides. The CUDA version of the variant stands in for the
driver's (CONDA_OVERRIDE_CUDA) unless you set it, so a machine without a driver, or with an older one, still solves."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import yaml
from rattler import BuildString, GenericVirtualPackage, PackageName, SparseRepoData, Subdir, Version, solve_with_sparse_repodata
from rattler.exceptions import SolverError
from rattler_build import ToolConfiguration
from rattler_build.progress import ProgressCallback

from ssm_conda import options
from ssm_conda.archs import lowest_arch
from ssm_conda.channels import LOGS_DIR, channel_repodata, index_channel, writable_dir
from ssm_conda.compiler_cache import CCACHE_ENV, add_no_cache, cache_hits, compiler_cache_dir, configure_compiler_cache
from ssm_conda.console import Outcome, PipelineError, UsageError, human_duration, print_summary, print_table
from ssm_conda.machine import virtual_package_overrides
from ssm_conda.matrix import TARGET_PLATFORM, PlannedVariant, builds_on, load_variant_files, plan, standin_overrides
from ssm_conda.paths import recipe_of
from ssm_conda.project import NAMES, package
from ssm_conda.reproducible import build_in, build_root, chosen_root, clear
from ssm_conda.selection import Selection, add_selector_arguments, selection_from_args

LINUX_VERSION = "4.18"  # the kernel of the oldest system conda-forge's glibc 2.28 supports (RHEL 8)


def with_needs(selection: Selection) -> Selection:
    """The selection plus every package a selected one needs."""
    needed = {n for p in selection.packages for n in package(p).needs if n not in selection.packages}
    return replace(selection, packages=tuple(p for p in NAMES if p in needed or p in selection.packages))


def skip_present_needs(variants: list[PlannedVariant], requested: Sequence[str], output_dir: Path) -> list[PlannedVariant]:
    """Drop the variants of packages that were not asked for but that the output channel has already."""
    return [v for v in variants if v.package in requested or not list(output_dir.glob(f"*/{v.package}-*-{v.build_string}.conda"))]


def add_plan_options(parser: argparse.ArgumentParser, package_help: str, channel_use: str) -> None:
    add_selector_arguments(parser, package_help)
    options.add_variants_dir(parser)
    options.add_channels(parser, channel_use)
    parser.add_argument("--line-info", action="store_true",
                        help="compile with nvcc -lineinfo (the variant key nvcc_lineinfo=1): source-line tables for Nsight "
                        "Compute and compute-sanitizer, which make the package larger (causal-conv1d sm90: 15.9 MB against "
                        "9.1) and change nothing at run time")
    options.add_target_platform(parser, "to build for; linux-aarch64 on linux-64 cross-compiles, as conda-forge does")


def configure_plan(parser: argparse.ArgumentParser) -> None:
    add_plan_options(parser, "plan this package (repeatable; default: every one, in build order)",
                     "a channel build would solve from: plan reads only a stand-in channel's variant overrides")
    parser.add_argument("--write-variants", type=Path, metavar="FILE",
                        help="also write the selection as a variants file, for conda build / rattler-build build -m FILE")


def configure(parser: argparse.ArgumentParser) -> None:
    add_plan_options(parser, "build this package (repeatable; default: every one, in build order) and what it needs "
                     "that the output channel lacks", "a channel to solve the build and test environments from")
    options.add_output_dir(parser, "to build into")
    parser.add_argument("--skip-existing", action="store_true", help="skip variants already in the output channel")
    parser.add_argument("--test", choices=["native", "skip"], default="native",
                        help="run the recipe's test section after each build (default: native)")
    add_no_cache(parser, "build")


@dataclass(frozen=True)
class PlanOptions:
    selection: Selection
    channels: tuple[str, ...]
    variants_dir: Path
    target_platform: str
    line_info: bool
    verbose: bool
    write_variants: Path | None = None  # plan's

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PlanOptions:
        return cls(selection_from_args(args), options.channels(args.channel), options.variants_folder(args.variants_dir),
                   args.target_platform, args.line_info, args.verbose, vars(args).get("write_variants"))


@dataclass(frozen=True)
class BuildOptions:
    plan: PlanOptions
    output_dir: Path  # checked writable, not created
    skip_existing: bool
    test: str
    compiler_cache: Path | None  # checked, not created; None: --no-cache
    package_cache: Path  # where rattler keeps the extracted packages of test environments
    build_root: Path  # where rattler-build builds: the same folder for every build, recorded in the packages

    @classmethod
    def from_args(cls, args: argparse.Namespace, environ: Mapping[str, str]) -> BuildOptions:
        plan_options = PlanOptions.from_args(args)
        if (where := builds_on(plan_options.target_platform)) != builds_on(TARGET_PLATFORM):
            raise UsageError(f"--target-platform {plan_options.target_platform}: its packages build on {where} only "
                             f"(conda-forge's compilers for it run there), not on this {TARGET_PLATFORM} machine")
        output_dir = writable_dir(options.output_folder(args.output_dir), "--output-dir")
        # where rattler keeps it: $RATTLER_CACHE_DIR, else the user's cache folder (%LOCALAPPDATA% on Windows)
        user_cache = Path(environ.get("LOCALAPPDATA") or environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        rattler_cache = Path(environ.get("RATTLER_CACHE_DIR") or user_cache / "rattler" / "cache")
        return cls(plan_options, output_dir, args.skip_existing, args.test,
                   None if args.no_cache else compiler_cache_dir(environ.get(CCACHE_ENV), output_dir), rattler_cache / "pkgs",
                   chosen_root(environ))


class Progress(ProgressCallback):
    """Every log line to the log file; the milestones (compile steps, tests, warnings, errors) to the terminal."""

    MILESTONE = re.compile(r"\[\d+/\d+\] |✔|✖|Testing commands|tests? (passed|failed)|\d+ passed|GPU tests skipped|"
                           r"Cacheable calls|^\s+Hits:|^Errors:|Input file modified|Packaging new files|Linking check|overlink",
                           re.IGNORECASE)

    def __init__(self, label: str, verbose: bool, log_path: Path) -> None:
        self.label = label
        self.verbose = verbose
        self.start = time.monotonic()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log = log_path.open("w", encoding="utf-8")

    def _print(self, message: str) -> None:
        print(f"  [{self.label} {human_duration(time.monotonic() - self.start)}] {message}", flush=True)

    def on_build_step(self, event) -> None:  # noqa: ANN001 (rattler_build event types)
        self._print(event.message or event.step_name)

    def on_log(self, event) -> None:  # noqa: ANN001
        message = event.message.rstrip()
        if not self.log.closed:
            self.log.write(message + "\n")
        if self.verbose or event.level in ("warn", "error") or self.MILESTONE.search(message):
            self._print(message)

    def on_download_start(self, event) -> None:  # noqa: ANN001
        if self.verbose:
            self._print(f"downloading {event.url}")


def evict_from_package_cache(name: str, version: str, build_string: str, cache: Path) -> list[Path]:
    """Forget a package about to be rebuilt under the same file name (the build string hashes variant keys
    only, so a recipe change keeps it): rattler's package cache would give the test environment the old build."""
    stem = f"{name}-{version}-{build_string}"
    removed = [p for p in (cache / stem, cache / f"{stem}.lock", cache / f"{stem}.conda") if p.exists()]
    for path in removed:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return removed


def unresolvable(error: Exception, repodata: Sequence[SparseRepoData], channels: Sequence[str]) -> str | None:
    """What a build's "Failed to resolve dependencies" could not find, in one line: py-rattler-build's error
    says no more, so its last solve (the Platform: and Specs: lines of its log) is solved again from `repodata`."""
    log = [line.strip() for line in getattr(error, "log", [])]
    try:
        platform = max(i for i, line in enumerate(log) if line.startswith("Platform:"))
        specs = itertools.takewhile(lambda line: line.startswith("- "), log[log.index("Specs:", platform) + 1:])
        virtual = [GenericVirtualPackage(PackageName(n), Version(v), BuildString(b))
                   for n, v, b in re.findall(r"(__\w+)=([^=,\]]+)=([^,\]]*)", log[platform])]
        subdirs = (log[platform].split()[1], "noarch")
        asyncio.run(solve_with_sparse_repodata([spec[2:] for spec in specs], [r for r in repodata if r.subdir in subdirs],
                                               virtual_packages=virtual))
    except SolverError as exc:  # "Cannot solve the request because of: No candidates were found for X."
        reason = " ".join(str(exc).split()).removeprefix("Cannot solve the request because of: ")
        return f"cannot resolve ({', '.join(subdirs)}): {reason} Channels searched: {', '.join(channels)}"
    except Exception:  # a log of another shape, or a spec py-rattler does not parse: rattler-build's message stands
        pass
    return None


def build_one(variant: PlannedVariant, build: BuildOptions, repodata: Sequence[SparseRepoData] = ()) -> Outcome:
    start, channels, output_dir = time.monotonic(), list(build.plan.channels), build.output_dir
    outcome = Outcome(variant.package, variant.label)
    if build.skip_existing and (existing := sorted(output_dir.glob(f"*/{variant.package}-*-{variant.build_string}.conda"))):
        outcome.result, outcome.path, outcome.size = "skipped", existing[0], existing[0].stat().st_size
        return outcome
    evict_from_package_cache(variant.package, str(variant.rendered.recipe.package.version), variant.build_string,
                             build.package_cache)
    log = output_dir / LOGS_DIR / f"{variant.package}-{variant.build_string}.log"
    progress = Progress(f"{variant.package} {variant.label}", build.plan.verbose, log)
    # keep_build: the source's time, which the build script writes there, is read afterwards
    tool_config = ToolConfiguration(test_strategy=build.test, keep_build=True)
    try:
        # the variant's CUDA and its lowest architecture, as conda-forge's CI builds without a GPU; the rest of what the
        # package records of the build machine is the variant's too, not this machine's (docs/reproducible.md)
        linux = Subdir(build.plan.target_platform).is_linux
        machine = {"glibc": variant.config["c_stdlib_version"][0] if linux else None, "linux": LINUX_VERSION if linux else None,
                   # a CPU family, not its model; a cross build's would be the host's too
                   "archspec": str(Subdir.current().arch) if build.plan.target_platform == TARGET_PLATFORM else None}
        clear(root := build.build_root)
        with virtual_package_overrides(variant.cuda, lowest_arch(variant.archs), **machine):
            # the output channel's packages that the tests need, copied into the build root's channel (rattler-build
            # solves from its own output folder; the output channel itself, passed as a channel, would be recorded)
            for path in (p for need in package(variant.package).needs for p in output_dir.glob(f"*/{need}-*.conda")):
                (root / path.parent.name).mkdir(exist_ok=True)
                shutil.copy(path, root / path.parent.name)
            outcome.path = build_in(root, variant.rendered, output_dir, tool_config=tool_config, channels=channels,
                                    progress_callback=progress)
    except Exception as exc:  # rattler_build raises its own error types; report and go on
        lines = str(exc).strip().splitlines()
        why = "Failed to resolve dependencies" in str(exc) and unresolvable(exc, repodata, channels)
        outcome.result = "failed"
        outcome.detail = f"{why or (lines[-1] if lines else repr(exc))} (log: {os.path.relpath(progress.log.name)})"
        return outcome
    finally:
        progress.log.close()
        outcome.seconds = time.monotonic() - start
    outcome.result, outcome.size = "ok", outcome.path.stat().st_size
    outcome.detail = f"cache hits {cache_hits(Path(progress.log.name).read_text(errors='replace'))}"
    return outcome


def planned(plan_options: PlanOptions, selection: Selection | None = None, recipes: Sequence[Path] = ()) -> list[PlannedVariant]:
    """The variants of `selection` (default: plan_options'), rendered as plan_options say (from `recipes`, or recipe/)."""
    if overrides := standin_overrides(plan_options.channels):  # bound, empty or not: the keys below join it
        print(f"note: the stand-in channel overrides {overrides} (its compilers are the host's)")
    if plan_options.line_info:
        overrides["nvcc_lineinfo"] = ["1"]
    target = plan_options.target_platform
    if target != TARGET_PLATFORM:
        # a cross build: py-rattler-build solves the host environment for the variant's host_platform
        # (the recipes name it), or for this machine when the variant has none
        overrides["host_platform"] = [target]
    files = load_variant_files(plan_options.variants_dir, target)
    variants = plan(selection or plan_options.selection, files, overrides=overrides, target_platform=target,
                    recipes=list(recipes))
    if plan_options.verbose:  # what the build string's hash covers
        for variant in variants:
            print(f"{variant.package} {variant.build_string}: {dict(sorted(variant.config.items()))}")
    return variants


def write_variants(path: Path, variants: Sequence[PlannedVariant]) -> None:
    """A variants file that renders exactly these variants (`conda build -m`, `rattler-build build -m`):
    the keys that differ between them zipped together, the rest single values."""
    configs: list[dict[str, str]] = []
    for variant in variants:  # the variant keys the recipe uses, less the virtual and the machine's
        config = {k: v[0] for k, v in sorted(variant.config.items()) if not k.startswith("__") and k != "build_platform"}
        if config not in configs:
            configs.append(config)
    keys = sorted({k for config in configs for k in config})
    values = {k: [config.get(k, next(c[k] for c in configs if k in c)) for config in configs] for k in keys}
    varying = [k for k in keys if len(set(values[k])) > 1]
    data: dict[str, object] = {k: values[k] if k in varying else values[k][:1] for k in keys}
    if varying:
        data["zip_keys"] = [varying]
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_text(yaml.safe_dump(data, sort_keys=False))
        partial.replace(path)  # never half a file under the name
    except OSError as exc:
        with contextlib.suppress(OSError):  # a folder that took no file takes no removal either
            partial.unlink(missing_ok=True)
        raise UsageError(f"--write-variants {path}: cannot write it ({exc.strerror})") from exc
    print(f"wrote {path} ({len(variants)} variant(s)): conda build recipe/PACKAGE -m {path}, or rattler-build build -m")


def run_plan(args: argparse.Namespace) -> int:
    plan_options = PlanOptions.from_args(args)
    if (path := plan_options.write_variants) and (path.is_dir() or not path.parent.is_dir()):
        raise UsageError(f"--write-variants {path}: name a file in an existing folder")
    variants = planned(plan_options)
    rows = [(v.package, v.cuda, f"{v.python}+", v.torch, v.generation, v.archs, v.build_string) for v in variants]
    print_table(["package", "CUDA", "Python", "torch", "generation", "archs", "build string"], rows)
    print(f"{len(variants)} variant(s)")
    if plan_options.write_variants:
        write_variants(plan_options.write_variants, variants)
    return 0


def run(args: argparse.Namespace) -> int:
    build = BuildOptions.from_args(args, os.environ)
    selection = with_needs(build.plan.selection)
    # each package's recipe folder copied with its links followed (recipe/NAME/shared links to recipe/shared): a package
    # ships a copy of its recipe folder, and rebuilds only from what is in it (copied into the build root's tmp/)
    with build_root(build.build_root), tempfile.TemporaryDirectory(prefix="recipes-") as staging:
        recipes = [Path(shutil.copytree(recipe_of(p).parent, Path(staging) / p)) / "recipe.yaml" for p in selection.packages]
        return build_all(build, skip_present_needs(planned(build.plan, selection, recipes), build.plan.selection.packages,
                                                   build.output_dir))


def build_all(build: BuildOptions, variants: list[PlannedVariant]) -> int:
    output_dir, target = build.output_dir, build.plan.target_platform
    # every channel answers before anything is written or downloaded: the host's and the build machine's subdirs
    repodata = channel_repodata(build.plan.channels, list(dict.fromkeys((target, TARGET_PLATFORM, "noarch"))))

    configure_compiler_cache(build.compiler_cache)
    output_dir.mkdir(parents=True, exist_ok=True)
    print(f"building {len(variants)} variant(s) into {output_dir} from {', '.join(build.plan.channels)}")
    outcomes = []
    for i, variant in enumerate(variants, 1):
        step = f"[{i}/{len(variants)}] {variant.package} {variant.label}"
        print(f"{step} ({variant.build_string}, archs {variant.archs})", flush=True)
        outcome = build_one(variant, build, repodata)
        print(f"{step}: {outcome.result} in {human_duration(outcome.seconds or 0)}", flush=True)
        outcomes.append(outcome)
    index_channel(output_dir)
    print()
    print_summary(outcomes)
    if failed := [o for o in outcomes if o.failed]:
        raise PipelineError(f"{len(failed)} of {len(outcomes)} variant(s) failed: {', '.join(o.variant for o in failed)}")
    return 0
