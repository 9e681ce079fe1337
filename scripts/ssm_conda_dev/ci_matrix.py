"""The CI jobs, from variants/ alone: one per (platform, CUDA, pytorch minor, GPU generation), building the packages
the plan renders there (causal-conv1d, then mamba-ssm; win-64 has causal-conv1d only) for every Python of its file.
On Linux every Python after the first compiles from the job's compiler cache; linux-aarch64's jobs cross-compile
on the linux-64 runners. win-64's build natively on windows-2022 runners with no compiler cache: every Python
compiles cold there, so a Windows job whose Pythons together would not fit the runner MARGIN times is split into
one job per Python.

    ssm-conda-dev ci-matrix              # one line, {"include": [{"name": "cuda130-torch2.13-sm90", ...}, ...]}
    ssm-conda-dev ci-matrix --durations  # each job's expected time (2 cores, an upper bound on more: docs/ci.md)"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from ssm_conda import options
from ssm_conda.archs import parse_arch_list
from ssm_conda.console import UsageError, human_duration, print_table
from ssm_conda.matrix import PLATFORMS, load_variant_files, plan
from ssm_conda.paths import variants_dir
from ssm_conda.project import package
from ssm_conda.selection import Selection

# The packages' times are their records' cold_s and cached_s (ssm_conda.project); docs/ci.md says how to measure them.
# causal-conv1d without cache: 6m35s for one architecture, 45m16s for eight; cold time = base + each x archs
ARCH_BASE_S, ARCH_EACH_S = 63, 332
SETUP_S = 600  # per job: pixi, the CUDA compiler and pytorch downloaded and installed (an allowance, not measured)
RUNNER_LIMIT_S = 6 * 3600  # GitHub-hosted jobs stop at 6 hours
MARGIN = 2.0  # the longest cold job must fit this many times into the limit
# An ESTIMATE, NOT YET MEASURED (no Windows runner here): a Windows build takes this many times the Linux figures.
# nvcc's host passes through MSVC's cl.exe and Windows' process and file overheads are typically slower than gcc's on
# Linux; 2.0 is a conservative guess, to be replaced by the first run's times (docs/ci.md).
WINDOWS_FACTOR = 2.0
NO_COMPILER_CACHE = frozenset({"win-64"})  # recipe/shared/build-extension.bat uses no ccache: every Python compiles cold
SLOWDOWN = {"win-64": WINDOWS_FACTOR}  # a platform's build time over the Linux figures (1 where not listed)
RUNNERS = {"win-64": "windows-2022"}  # conda-forge's Windows image; every other platform: DEFAULT_RUNNER
DEFAULT_RUNNER = "ubuntu-24.04"  # linux-aarch64 cross-compiles there too
PREFIXES = {"linux-64": "", "linux-aarch64": "aarch64-", "win-64": "win-"}  # of the job names


def cold_seconds(name: str, archs: int) -> float:
    """A package's first build of a job with an empty cache, scaled from sm90 by its architecture count."""
    return package(name).cold_s * (ARCH_BASE_S + ARCH_EACH_S * archs) / (ARCH_BASE_S + ARCH_EACH_S)


def job_seconds(platform: str, pythons: dict[str, int], archs: int) -> tuple[float, float]:
    """(cold, from the last run's cache) for a job building `pythons[name]` Pythons of each package on `platform`."""
    factor = SLOWDOWN.get(platform, 1.0)
    if platform in NO_COMPILER_CACHE:  # nothing is reused: each Python is a first build, however often the job ran
        each = sum(count * cold_seconds(name, archs) for name, count in pythons.items())
        return SETUP_S + factor * each, SETUP_S + factor * each
    cold = sum(cold_seconds(name, archs) + (count - 1) * package(name).cached_s for name, count in pythons.items())
    cached = sum(count * package(name).cached_s for name, count in pythons.items())
    return SETUP_S + factor * cold, SETUP_S + factor * cached


@dataclass(frozen=True)
class Job:
    name: str  # cuda130-torch2.13-sm90; aarch64-cuda130-torch2.13-sm90; win-cuda130-torch2.13-sm90(-py3.12)
    platform: str  # the target: linux-64, linux-aarch64 (cross-compiled) or win-64
    runner: str  # the workflow's runs-on: ubuntu-24.04, or windows-2022 for win-64
    file: str
    cuda: str
    torch: str
    generation: str
    python: str  # "": every Python of the file; X.Y: that one alone (a Windows job split to fit the runner)
    archs: str
    packages: int  # as the plan renders them on the platform (win-64: causal-conv1d's alone)
    cold_minutes: int  # an empty compiler cache
    cached_minutes: int  # every compile from the last run's cache (a recipe-only change); win-64 has none: = cold


def jobs(directory: Path | None = None) -> list[Job]:
    found = []
    for platform in PLATFORMS:
        if not (files := load_variant_files(directory, platform)):
            raise UsageError(f"no variant files (*.yaml) in {directory or variants_dir()}")
        for vfile in files:
            planned = plan(Selection(cuda=vfile.cuda), files=[vfile], target_platform=platform)
            groups: dict[tuple[str, str], list[tuple[str, str]]] = {}  # (torch, generation) -> (package, python), in order
            for v in planned:
                groups.setdefault((v.torch, v.generation), []).append((v.package, v.python))
            for (torch, generation), built in groups.items():
                archs = len(parse_arch_list(vfile.generations[generation]))
                name = f"{PREFIXES[platform]}cuda{vfile.cuda.replace('.', '')}-torch{torch}-{generation}"
                whole = job_seconds(platform, Counter(p for p, _ in built), archs)
                if platform not in NO_COMPILER_CACHE or whole[0] * MARGIN <= RUNNER_LIMIT_S:
                    parts = [("", built, whole)]  # with a compiler cache, the Pythons share it: never split
                else:
                    pythons = list(dict.fromkeys(py for _, py in built))
                    parts = [(py, [b for b in built if b[1] == py],
                              job_seconds(platform, Counter(p for p, q in built if q == py), archs)) for py in pythons]
                for python, part, (cold, cached) in parts:
                    found.append(Job(f"{name}-py{python}" if python else name, platform,
                                     RUNNERS.get(platform, DEFAULT_RUNNER), vfile.display_path, vfile.cuda, torch,
                                     generation, python, vfile.generations[generation], len(part), round(cold / 60),
                                     round(cached / 60)))
    return found


def configure(parser: argparse.ArgumentParser) -> None:
    options.add_variants_dir(parser)
    parser.add_argument("--durations", action="store_true", help="print each job's expected time instead of JSON")


@dataclass(frozen=True)
class CiMatrixOptions:
    variants_dir: Path
    durations: bool
    verbose: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CiMatrixOptions:
        return cls(options.variants_folder(args.variants_dir), args.durations, args.verbose)


def run(args: argparse.Namespace) -> int:
    chosen = CiMatrixOptions.from_args(args)
    found = jobs(chosen.variants_dir)
    if chosen.verbose:  # on stderr: stdout is the workflow's one line of JSON
        print(f"jobs of {', '.join(sorted({j.file for j in found}))} in {chosen.variants_dir}", file=sys.stderr)
    if chosen.durations:
        rows = [(j.name, j.runner, j.packages, j.archs, human_duration(60 * j.cold_minutes),
                 human_duration(60 * j.cached_minutes)) for j in found]
        print_table(["job", "runner", "packages", "architectures", "cold (2 cores)", "from the cache"], rows)
        longest = max(found, key=lambda j: j.cold_minutes)
        print(f"{len(found)} jobs, {sum(j.packages for j in found)} packages; longest: {longest.name}, {longest.cold_minutes} "
              f"min cold, {RUNNER_LIMIT_S / 60 / longest.cold_minutes:.1f}x within the 6 h job limit (required: {MARGIN}x)")
        if windows := [j for j in found if j.platform in SLOWDOWN]:
            print(f"{len(windows)} of them on {', '.join(sorted({j.runner for j in windows}))}: Linux's figures x "
                  f"{WINDOWS_FACTOR}, an estimate not yet measured, each Python compiled cold (no compiler cache there)")
    else:
        print(json.dumps({"include": [asdict(j) for j in found]}, separators=(",", ":")))
    return 0
