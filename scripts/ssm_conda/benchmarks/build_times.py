"""Build-time benchmarks (issue: fast, targeted builds). Real builds through ssm-conda build.

    ssm-conda bench-build cache --channel URL   # cold variant A, then B (other Python) warm
    ssm-conda bench-build archs --channel URL   # --arch all vs one architecture, no cache

`cache` gives the compiler cache a fresh directory, builds variant A (cold), then variant B, which
differs only in Python (warm: the CUDA objects come from the cache), then A again in a fresh build
directory (a rebuild after a recipe-only change), and prints the times, the cache hits and the
ratios to A (target: B under a third of A). `archs` builds one variant for every architecture of
its variant file and for one architecture, both without the cache, and prints the ratio.
The test sections are skipped (--test skip) so that only building is timed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ssm_conda.build import CCACHE_ENV, cache_hits
from ssm_conda.channels import normalise_channel
from ssm_conda.cli import subcommand
from ssm_conda.console import PipelineError, human_duration, human_size, print_table
from ssm_conda.matrix import Selection, select


@dataclass
class Timing:
    name: str
    python: str
    arch: str
    cache: str
    seconds: float
    size: int
    hits: str  # compiler-cache hits / cacheable compiles, from the build log ("-" without the cache)


def timed_build(
    name: str, args: argparse.Namespace, python: str, arch: str, cache_dir: Path | None, cache: str = "off",
) -> Timing:
    """One ssm-conda build run in a fresh output directory, its output streamed, its wall time measured."""
    command, env = subcommand("build", "--channel", args.channel, "--cuda", args.cuda,
                              "--python", python, "--torch", args.torch, "--arch", arch, "--test", "skip")
    env.pop(CCACHE_ENV, None)
    if cache_dir is None:
        command.append("--no-cache")
    else:
        env[CCACHE_ENV] = str(cache_dir)
    with tempfile.TemporaryDirectory(prefix="bench-build-") as output:
        print(f"== {name}: python {python}, arch {arch}, cache {'on' if cache_dir else 'off'}", flush=True)
        start = time.monotonic()
        result = subprocess.run([*command, "--output-dir", output], env=env)
        seconds = time.monotonic() - start
        if result.returncode != 0:
            raise PipelineError(f"{name}: ssm-conda build exited {result.returncode}")
        (package,) = Path(output).glob("*/causal-conv1d-*.conda")
        logs = sorted(Path(output).glob("build-logs/*.log"))
        if args.log_dir:
            Path(args.log_dir).mkdir(parents=True, exist_ok=True)
            for path in logs:
                shutil.copy2(path, Path(args.log_dir) / f"{name.replace(' ', '-')}-{path.name}")
        log = "".join(p.read_text(errors="replace") for p in logs)
        return Timing(name, python, arch, cache, seconds, package.stat().st_size, cache_hits(log))


def report(timings: Sequence[Timing], ratios: Sequence[tuple[str, float, str]], args: argparse.Namespace) -> None:
    """The builds as a table and each (name, ratio, target), or the same figures as JSON (--json)."""
    figures = json.dumps({"builds": [asdict(t) for t in timings], **{name: ratio for name, ratio, _ in ratios}}, indent=2)
    if args.json_file:
        Path(args.json_file).write_text(figures + "\n")
    if args.json:
        print(figures)
        return
    rows = [(t.name, t.python, t.arch, t.cache, t.hits, human_duration(t.seconds), human_size(t.size))
            for t in timings]
    print()
    print_table(["build", "python", "arch", "cache", "hits", "time", "size"], rows)
    for name, ratio, target in ratios:
        print(f"{name}: {ratio:.2f} (target {target})")


def bench_cache(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-ccache-") as cache:
        a = timed_build("variant A", args, args.python_a, args.arch, Path(cache), "cold")
        b = timed_build("variant B", args, args.python_b, args.arch, Path(cache), "warm")
        # A again in a fresh build directory: what a rebuild after a recipe-only change costs.
        again = timed_build("A rebuilt", args, args.python_a, args.arch, Path(cache), "warm")
    report([a, b, again], [("warm B / cold A", b.seconds / a.seconds, "< 0.33"),
                           ("A rebuilt / cold A", again.seconds / a.seconds, "well under B / A")], args)


def bench_archs(args: argparse.Namespace) -> None:
    one = timed_build("one arch", args, args.python_a, args.arch, None)
    every = timed_build("all archs", args, args.python_a, "all", None)
    report([one, every], [("all archs / one arch", every.seconds / one.seconds, "several times")], args)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", choices=["cache", "archs"])
    parser.add_argument("--channel", required=True, help="channel to build from (e.g. the stand-in)")
    parser.add_argument("--cuda", default="13.0")
    parser.add_argument("--torch", default="2.14")
    parser.add_argument("--arch", default="9.0", help="the one architecture (default 9.0)")
    parser.add_argument("--python-a", default="3.11", help="Python of variant A")
    parser.add_argument("--python-b", default="3.12", help="Python of variant B (cache benchmark)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on stdout instead of the table")
    parser.add_argument("--json-file", metavar="PATH", help="also write the figures as JSON to PATH")
    parser.add_argument("--log-dir", help="keep each build's full log here (ccache statistics included)")


def run(args: argparse.Namespace) -> int:
    # Bad input fails here, before the first (long) build starts.
    args.channel = normalise_channel(args.channel)
    for python in (args.python_a, args.python_b):
        select(Selection(cuda=args.cuda, python=python, torch=args.torch, arch=args.arch))
    {"cache": bench_cache, "archs": bench_archs}[args.what](args)
    return 0
