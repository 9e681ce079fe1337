"""Build-time and size benchmarks. Real builds of one package (--package) through ssm-conda build.

    ssm-conda-dev bench-build cache --channel URL        # cold variant A, then B (other Python) warm
    ssm-conda-dev bench-build archs --channel URL        # the all-architecture package vs one architecture
    ssm-conda-dev bench-build generations --channel URL  # every GPU generation's package vs all-architecture
    ssm-conda-dev bench-build lineinfo --channel URL     # with nvcc's line tables vs without (--generation)
    ssm-conda-dev bench-build generations lineinfo --channel URL --output-dir figures/  # both, in one run

`cache` gives the compiler cache a fresh directory, builds variant A (cold), then variant B, which
differs only in Python (warm: the CUDA objects come from the cache), then A again in a fresh build
directory (a rebuild after a recipe-only change), and prints the times, the cache hits and the
ratios to A (target: B under a third of A). `archs` builds one variant's all-architecture package
and its package for one architecture, both without the cache, and prints the ratio.
`generations` builds every package of one (CUDA, torch, Python) of a variant file that splits by
GPU generation, without the cache, then asks pixi's solver (py-rattler) which one an H100
(__cuda_arch 9.0) gets, and prints what that machine downloads and what the all-architecture
package weighs, both against --baseline-mb, and the channel's build time for every generation
against the all-architecture build alone. `lineinfo` builds the packages of --generation (default
sm90 and all) without and with nvcc's source-line tables (--line-info), no cache, and prints sizes
and times side by side.
Benchmarks named together run in one go and share their builds: a build without the compiler cache
that two of them need (the all-architecture package of `generations` and of `lineinfo`) runs once.
The test sections are skipped (--test skip) so that only building is timed; --output-dir keeps every
package built, as an indexed channel, for `ssm-conda-dev gpu-test` or a look inside afterwards.
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

from ssm_conda import options
from ssm_conda.channels import index_channel
from ssm_conda.compiler_cache import CCACHE_ENV, cache_hits
from ssm_conda.console import PipelineError, UsageError, human_duration, human_size, print_table
from ssm_conda.matrix import ALL_ARCHS, load_variant_files, select
from ssm_conda.project import NAMES
from ssm_conda.selection import Selection

from ssm_conda_dev import subcommand
from ssm_conda_dev.solving import solve_for_machine

H100 = "9.0"  # the __cuda_arch of the machine `generations` asks the solver about


@dataclass
class Timing:
    name: str
    python: str
    arch: str
    cache: str
    seconds: float
    size: int
    hits: str  # compiler-cache hits / cacheable compiles, from the build log ("-" without the cache)
    package: str = ""  # the package file, relative to the run's package store (--output-dir)


Ratio = tuple[str, float, str]  # (what, ratio, target)
Figures = tuple[list[Timing], list[Ratio]]


def timed_build(
    name: str, args: argparse.Namespace, python: str, arch: str, cache_dir: Path | None, cache: str,
    line_info: bool, store: Path,
) -> Timing:
    """One ssm-conda build of args.package in a fresh output directory, its output streamed, its wall
    time measured, the package copied into the store. `arch` is a list for --arch, or a GPU
    generation of the variant file ("all", "sm90": args.generations)."""
    generation = arch in args.generations
    channels = [word for channel in args.channel for word in ("--channel", channel)]
    command, env = subcommand("build", "--package", args.package, *channels, "--cuda", args.cuda,
                              "--python", python, "--torch", args.torch,
                              *(["--generation", arch] if generation else ["--arch", arch]), "--test", "skip",
                              *(["--line-info"] if line_info else []))
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
        (package,) = Path(output).glob(f"*/{args.package}-*.conda")
        kept = copy_into(package, store)
        logs = sorted(Path(output).glob("build-logs/*.log"))
        if args.log_dir:
            Path(args.log_dir).mkdir(parents=True, exist_ok=True)
            for path in logs:
                shutil.copy2(path, Path(args.log_dir) / f"{name.replace(' ', '-')}-{path.name}")
        log = "".join(p.read_text(errors="replace") for p in logs)
    shown = f"{arch}: {args.generations[arch]}" if generation else arch
    return Timing(name, python, shown, cache, seconds, kept.stat().st_size, cache_hits(log),
                  str(kept.relative_to(store)))


def copy_into(package: Path, channel: Path) -> Path:
    """package copied into channel's subdir of the same name (linux-64/, noarch/)."""
    (channel / package.parent.name).mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy2(package, channel / package.parent.name / package.name))


class Builds:
    """The run's builds, their packages kept in `store`. A build without the compiler cache runs once
    and its Timing serves every benchmark of the run that asks for it; one with a cache depends on
    the cache's state, so it always runs."""

    def __init__(self, args: argparse.Namespace, store: Path) -> None:
        self.args = args
        self.store = store
        self.done: dict[tuple[str, str, bool], Timing] = {}

    def __call__(self, name: str, python: str, arch: str, cache_dir: Path | None = None, cache: str = "off",
                 line_info: bool = False) -> Timing:
        key = (python, arch, line_info)
        if cache_dir is None and key in self.done:
            return self.done[key]
        timing = timed_build(name, self.args, python, arch, cache_dir, cache, line_info, self.store)
        if cache_dir is None:
            self.done[key] = timing
        return timing

    def path(self, timing: Timing) -> Path:
        return self.store / timing.package


def report(timings: Sequence[Timing], ratios: Sequence[Ratio], args: argparse.Namespace) -> None:
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
    if args.output_dir:
        print(f"packages kept in {args.output_dir} (an indexed channel)")


def bench_cache(args: argparse.Namespace, build: Builds) -> Figures:
    with tempfile.TemporaryDirectory(prefix="bench-ccache-") as cache:
        a = build("variant A", args.python_a, args.arch, Path(cache), "cold")
        b = build("variant B", args.python_b, args.arch, Path(cache), "warm")
        # A again in a fresh build directory: what a rebuild after a recipe-only change costs.
        again = build("A rebuilt", args.python_a, args.arch, Path(cache), "warm")
    return [a, b, again], [("warm B / cold A", b.seconds / a.seconds, "< 0.33"),
                           ("A rebuilt / cold A", again.seconds / a.seconds, "well under B / A")]


def bench_archs(args: argparse.Namespace, build: Builds) -> Figures:
    one = build("one arch", args.python_a, args.arch)
    every = build(ALL_ARCHS, args.python_a, ALL_ARCHS)
    return [one, every], [("all archs / one arch", every.seconds / one.seconds, "several times")]


def bench_generations(args: argparse.Namespace, build: Builds) -> Figures:
    timings = [build(generation, args.python_a, generation) for generation in args.generations]
    with tempfile.TemporaryDirectory(prefix="bench-generations-") as channel:
        for timing in timings:
            copy_into(build.path(timing), Path(channel))
        index_channel(Path(channel))
        records = solve_for_machine([Path(channel).as_uri(), *args.channel], [args.package], cuda=args.cuda,
                                    cuda_arch=H100)
    (picked,) = [r.file_name for r in records if r.name.normalized == args.package]
    h100 = next(t for t in timings if Path(t.package).name == picked)
    every = next(t for t in timings if t.name == ALL_ARCHS)
    baseline = args.baseline_mb * 1e6
    total = sum(t.seconds for t in timings)
    return timings, [
        (f"H100 download ({h100.name}, {human_size(h100.size)}) / {args.baseline_mb} MB", h100.size / baseline,
         "a fraction"),
        (f"all-architecture package ({human_size(every.size)}) / {args.baseline_mb} MB", every.size / baseline,
         "below 1"),
        (f"channel build time, every generation ({human_duration(total)}) / "
         f"all-architecture alone ({human_duration(every.seconds)})", total / every.seconds,
         "about 2: every architecture is compiled twice")]


def bench_lineinfo(args: argparse.Namespace, build: Builds) -> Figures:
    timings, ratios = [], []
    for generation in args.generation or ["sm90", ALL_ARCHS]:
        without = build(generation, args.python_a, generation)
        with_tables = build(f"{generation} with line tables", args.python_a, generation, line_info=True)
        timings += [without, with_tables]
        ratios += [(f"{generation}: package with / without line tables", with_tables.size / without.size, "none: a figure"),
                   (f"{generation}: build time with / without", with_tables.seconds / without.seconds, "none: a figure")]
    return timings, ratios


# in the order a combined run takes them
BENCHMARKS = {"cache": bench_cache, "archs": bench_archs, "generations": bench_generations, "lineinfo": bench_lineinfo}


def run_benchmarks(args: argparse.Namespace, store: Path) -> Figures:
    """Every benchmark named, in BENCHMARKS' order, over one Builds: each build once in the figures."""
    build = Builds(args, store)
    timings: list[Timing] = []
    ratios: list[Ratio] = []
    for what, bench in BENCHMARKS.items():
        if what in args.what:
            more, their_ratios = bench(args, build)
            timings += [t for t in more if not any(t is seen for seen in timings)]
            ratios += their_ratios
    return timings, ratios


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", nargs="+", choices=list(BENCHMARKS),
                        help="one benchmark, or several to run in one go, sharing their builds")
    parser.add_argument("--generation", action="append",
                        help="lineinfo: the GPU generation(s) to build (repeatable; default sm90 and all)")
    parser.add_argument("--package", choices=NAMES, default=NAMES[0], help=f"what to build (default {NAMES[0]})")
    options.add_channels(parser, "a channel to build from (e.g. the stand-in)")
    parser.add_argument("--cuda", default="13.0", help="the CUDA version of the variants built (default 13.0)")
    parser.add_argument("--torch", default="2.14", help="the pytorch minor of the variants built (default 2.14)")
    parser.add_argument("--arch", default="9.0", help="the one architecture (default 9.0)")
    parser.add_argument("--python-a", default="3.11", help="Python of variant A")
    parser.add_argument("--python-b", default="3.12", help="Python of variant B (cache benchmark)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on stdout instead of the table")
    parser.add_argument("--json-file", type=Path, metavar="PATH", help="also write the figures as JSON to PATH")
    parser.add_argument("--log-dir", type=Path, metavar="DIR",
                        help="keep each build's full log here (ccache statistics included)")
    parser.add_argument("--output-dir", type=Path, metavar="DIR",
                        help="the local output channel to keep every package built in, indexed (default: none, discarded)")
    parser.add_argument("--baseline-mb", type=float, default=184.0,
                        help="generations: the size to compare with, in MB (default 184.0: causal-conv1d 1.7.0 for "
                        "CUDA 13.0 before the generation split, 8 architectures, measured here; see the README)")


def run(args: argparse.Namespace) -> int:
    # Bad input fails here, before the first (long) build starts.
    args.channel = options.channels(args.channel)
    for python in (args.python_a, args.python_b):
        select(Selection(cuda=args.cuda, python=python, torch=args.torch, arch=args.arch))
    # the variant file's generations, read once: every build and check below uses them
    args.generations = next(f for f in load_variant_files() if f.cuda == args.cuda).generations
    if "generations" in args.what and len(args.generations) < 2:
        raise UsageError(f"--cuda {args.cuda}: its variant file does not split by GPU generation")
    if args.baseline_mb <= 0:
        raise UsageError(f"--baseline-mb {args.baseline_mb}: give the size in MB, above 0")
    for generation in args.generation or []:
        if generation not in args.generations:
            raise UsageError(f"--generation {generation!r}: accepted for CUDA {args.cuda}: {', '.join(args.generations)}")
    keep = args.output_dir
    if keep is not None and keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
        raise UsageError(f"--output-dir {keep}: not an empty directory; give a new or empty one")
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        timings, ratios = run_benchmarks(args, keep)
        index_channel(keep)
    else:
        with tempfile.TemporaryDirectory(prefix="bench-packages-") as store:
            timings, ratios = run_benchmarks(args, Path(store))
    report(timings, ratios, args)
    return 0
