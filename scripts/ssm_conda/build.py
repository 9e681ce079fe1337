"""Build the causal-conv1d conda packages, one per variant, into a local channel.

    python scripts/build.py plan [selectors]     # the matrix, rendered, nothing built
    python scripts/build.py [build] [selectors]  # build the selected variants

Selectors: --cuda (a file in variants/), --python and --torch (any X.Y: values outside the
variant files are overrides), --arch (all = the variant file's list, native = the GPUs here, or
"8.0;9.0+PTX"). Drives rattler-build through its Python API.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import yaml

from ssm_conda.channels import DEFAULT_CHANNEL, index_channel, normalise_channel
from ssm_conda.console import (
    PipelineError,
    UsageError,
    format_table,
    human_duration,
    human_size,
)
from ssm_conda.machine import compute_capabilities_from_driver
from ssm_conda.matrix import PlannedVariant, Selection, plan
from ssm_conda.paths import cache_dir

STANDIN_OVERRIDES = "standin-variants.yaml"
CCACHE_ENV = "CAUSAL_CONV1D_CCACHE_DIR"  # read by recipe/build.sh (a build secret: never recorded)
CCACHE_HINT = "~/.cache/causal-conv1d-conda/ccache"
CHANNEL_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*(/label/[A-Za-z0-9_.-]+)?")
# `ccache --show-stats`, which recipe/build.sh prints at the end of a build that used the cache:
# "Cacheable calls: 4 / 9 (44.44%)", then "  Hits: 3 / 4 (75.00%)" (the build script's stderr, such
# as a `set -x` trace, can land between the two).
CCACHE_HITS_RE = re.compile(r"Cacheable calls:\s+(\d+)\s*/\s*\d+.*\n(?:.*\n)*?\s*Hits:\s+(\d+)")


def add_selector_arguments(parser: argparse.ArgumentParser) -> None:
    """--cuda/--python/--torch/--arch, shared by every CLI that selects variants."""
    parser.add_argument("--cuda", help="CUDA version of a file in variants/ (e.g. 13.0)")
    parser.add_argument("--python", help="Python X.Y (default: every one in variants/)")
    parser.add_argument("--torch", help="pytorch minor X.Y (default: every one in variants/)")
    parser.add_argument(
        "--arch",
        help='GPU architectures: all (the variant file\'s list, default), native, or "8.0;9.0+PTX"',
    )


def selection_from_args(args: argparse.Namespace) -> Selection:
    return Selection(cuda=args.cuda, python=args.python, torch=args.torch, arch=args.arch)


def configure_plan(parser: argparse.ArgumentParser) -> None:
    add_selector_arguments(parser)
    add_channel_argument(parser)


def add_channel_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-c", "--channel",
        action="append",
        help=f"channel to solve from (repeatable; default {DEFAULT_CHANNEL}); file:// URLs and "
        "local directories work",
    )


def configure(parser: argparse.ArgumentParser) -> None:
    configure_plan(parser)
    parser.add_argument("--output-dir", default="output", help="output channel (default: output)")
    parser.add_argument(
        "--skip-existing", action="store_true", help="skip variants already in the output channel"
    )
    parser.add_argument(
        "--test", choices=["native", "skip"], default="native",
        help="run the recipe's test section after each build (default: native)",
    )
    parser.add_argument(
        "--no-cache", action="store_true",
        help=f"do not use the compiler cache (default: ccache in $CAUSAL_CONV1D_CCACHE_DIR or {CCACHE_HINT})",
    )


def standin_overrides(channels: Sequence[str]) -> dict[str, list[str]]:
    """Variant keys that an offline stand-in channel says it must override (its real compilers)."""
    overrides: dict[str, list[str]] = {}
    for channel in channels:
        if channel.startswith("file://"):
            path = Path(url2pathname(urlparse(channel).path)) / STANDIN_OVERRIDES
            if path.is_file():
                data = yaml.safe_load(path.read_text()) or {}
                overrides.update({k: [str(x) for x in v] for k, v in data.items()})
    return overrides


def cache_hits(log: str) -> str:
    """ "3/4" (compiler-cache hits / cacheable compiles) from a build log, "-" if the cache was off."""
    found = CCACHE_HITS_RE.findall(log)
    return f"{found[-1][1]}/{found[-1][0]}" if found else "-"


@dataclass
class Outcome:
    variant: PlannedVariant
    result: str
    seconds: float = 0.0
    package: Path | None = None
    error: str = ""
    cache_hits: str = "-"


class Progress:
    """rattler-build progress callback.

    Every log line goes to a log file; the terminal gets the milestones (compile steps, test
    results, warnings and errors), or everything with --verbose.
    """

    MILESTONE = re.compile(
        r"\[\d+/\d+\] |✔|✖|Testing commands|tests? (passed|failed)|\d+ passed|GPU tests skipped|"
        r"Cacheable calls|^\s+Hits:|^Errors:|Input file modified|Packaging new files|Linking check|overlink",
        re.IGNORECASE,
    )

    def __init__(self, label: str, verbose: bool, log_path: Path) -> None:
        self.label = label
        self.verbose = verbose
        self.start = time.monotonic()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log = log_path.open("w", encoding="utf-8")

    def _print(self, message: str) -> None:
        elapsed = human_duration(time.monotonic() - self.start)
        print(f"  [{self.label} {elapsed}] {message}", flush=True)

    def close(self) -> None:
        self.log.close()

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

    def on_download_progress(self, event) -> None:  # noqa: ANN001
        pass

    def on_download_complete(self, event) -> None:  # noqa: ANN001
        pass


def configure_compiler_cache(disabled: bool, output_dir: Path) -> None:
    """Point the build script's ccache at a directory outside the output channel, or at nothing."""
    if disabled:
        os.environ.pop(CCACHE_ENV, None)
        print("compiler cache: off (--no-cache)")
        return
    directory = Path(os.environ.get(CCACHE_ENV) or cache_dir() / "ccache").resolve()
    if directory.is_relative_to(output_dir):
        raise UsageError(f"{CCACHE_ENV}={directory} is inside the output channel {output_dir}; put it elsewhere")
    directory.mkdir(parents=True, exist_ok=True)
    os.environ[CCACHE_ENV] = str(directory)
    print(f"compiler cache: {directory} (--no-cache to build without it)")


def print_plan(variants: Sequence[PlannedVariant]) -> None:
    rows = [(v.cuda, v.python, v.torch, v.archs, v.build_string) for v in variants]
    print(format_table(["CUDA", "Python", "torch", "archs", "build string"], rows))
    print(f"{len(variants)} variant(s)")


def build_one(
    variant: PlannedVariant,
    channels: list[str],
    output_dir: Path,
    args: argparse.Namespace,
) -> Outcome:
    from rattler_build import ToolConfiguration

    tool_config = ToolConfiguration(
        test_strategy=args.test,
        skip_existing="local" if args.skip_existing else "none",
    )
    start = time.monotonic()
    progress = Progress(variant.label, args.verbose, output_dir / "build-logs" / f"{variant.build_string}.log")
    # Without a driver the solver sees no __cuda, and CUDA builds of pytorch need one.
    overridden = "CONDA_OVERRIDE_CUDA" not in os.environ and not compute_capabilities_from_driver()
    if overridden:
        os.environ["CONDA_OVERRIDE_CUDA"] = variant.cuda
    try:
        result = variant.rendered.run_build(
            tool_config=tool_config,
            output_dir=str(output_dir),
            channels=channels,
            progress_callback=progress,
        )
    except Exception as exc:  # rattler_build raises its own error types; report and go on
        lines = str(exc).strip().splitlines()
        error = f"{lines[-1] if lines else repr(exc)} (log: {os.path.relpath(progress.log.name)})"
        return Outcome(variant, "failed", time.monotonic() - start, error=error)
    finally:
        progress.close()
        if overridden:
            del os.environ["CONDA_OVERRIDE_CUDA"]
    packages = [Path(p) for p in result.packages]
    if not packages:
        existing = sorted(output_dir.glob(f"*/causal-conv1d-*-{variant.build_string}.conda"))
        return Outcome(variant, "skipped", time.monotonic() - start, existing[0] if existing else None)
    hits = cache_hits(Path(progress.log.name).read_text(errors="replace"))
    return Outcome(variant, "ok", time.monotonic() - start, packages[0], cache_hits=hits)


def print_summary(outcomes: Sequence[Outcome]) -> None:
    rows = []
    for o in outcomes:
        size = human_size(o.package.stat().st_size) if o.package and o.package.exists() else "-"
        where = os.path.relpath(o.package) if o.package else (o.error or "-")
        rows.append((o.variant.label, o.result, human_duration(o.seconds), o.cache_hits, size, where))
    print()
    print(format_table(["variant", "result", "time", "cache hits", "size", "path"], rows))


def planned(args: argparse.Namespace) -> tuple[list[str], list[PlannedVariant]]:
    channels = [normalise_channel(c) for c in (args.channel or [DEFAULT_CHANNEL])]
    overrides = standin_overrides(channels)
    if overrides:
        print(f"note: the stand-in channel overrides {overrides} (its compilers are the host's)")
    return channels, plan(selection_from_args(args), overrides=overrides)


def run_plan(args: argparse.Namespace) -> int:
    print_plan(planned(args)[1])
    return 0


def run(args: argparse.Namespace) -> int:
    channels, variants = planned(args)

    output_dir = Path(args.output_dir).resolve()
    configure_compiler_cache(args.no_cache, output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    print(f"building {len(variants)} variant(s) into {output_dir} from {', '.join(channels)}")
    outcomes = []
    for i, variant in enumerate(variants, 1):
        step = f"[{i}/{len(variants)}] {variant.label}"
        print(f"{step} ({variant.build_string}, archs {variant.archs})", flush=True)
        outcome = build_one(variant, channels, output_dir, args)
        print(f"{step}: {outcome.result} in {human_duration(outcome.seconds)}", flush=True)
        outcomes.append(outcome)
    index_channel(output_dir)
    print_summary(outcomes)
    failed = [o for o in outcomes if o.result == "failed"]
    if failed:
        raise PipelineError(f"{len(failed)} of {len(outcomes)} variant(s) failed: "
                            + ", ".join(o.variant.label for o in failed))
    return 0

