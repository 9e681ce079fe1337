"""The CI jobs, from variants/ alone: one per (platform, CUDA, pytorch minor, GPU generation), building causal-conv1d,
then mamba-ssm, for every Python of its file, so that every Python after the first compiles from the job's compiler
cache. linux-aarch64's jobs cross-compile on the linux-64 runners.

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
from ssm_conda.project import PACKAGES, package
from ssm_conda.selection import Selection

# The packages' times are their records' cold_s and cached_s (ssm_conda.project); docs/ci.md says how to measure them.
# causal-conv1d without cache: 6m35s for one architecture, 45m16s for eight; cold time = base + each x archs
ARCH_BASE_S, ARCH_EACH_S = 63, 332
SETUP_S = 600  # per job: pixi, the CUDA compiler and pytorch downloaded and installed (an allowance, not measured)
RUNNER_LIMIT_S = 6 * 3600  # GitHub-hosted jobs stop at 6 hours
MARGIN = 2.0  # the longest cold job must fit this many times into the limit


def cold_seconds(name: str, archs: int) -> float:
    """A package's first build of a job with an empty cache, scaled from sm90 by its architecture count."""
    return package(name).cold_s * (ARCH_BASE_S + ARCH_EACH_S * archs) / (ARCH_BASE_S + ARCH_EACH_S)


@dataclass(frozen=True)
class Job:
    name: str  # cuda130-torch2.13-sm90; aarch64-cuda130-torch2.13-sm90
    platform: str  # the target: linux-64, or linux-aarch64 (cross-compiled)
    file: str
    cuda: str
    torch: str
    generation: str
    archs: str
    packages: int
    cold_minutes: int  # an empty compiler cache
    cached_minutes: int  # every compile from the last run's cache (a recipe-only change)


def jobs(directory: Path | None = None) -> list[Job]:
    found = []
    for platform in PLATFORMS:
        if not (files := load_variant_files(directory, platform)):
            raise UsageError(f"no variant files (*.yaml) in {directory or variants_dir()}")
        prefix = "" if platform == "linux-64" else f"{platform.removeprefix('linux-')}-"
        for vfile in files:
            planned = plan(Selection(cuda=vfile.cuda), files=[vfile], target_platform=platform)
            packages = Counter((v.torch, v.generation) for v in planned)
            for torch, generation in packages:  # in the plan's order
                archs = len(parse_arch_list(vfile.generations[generation]))
                pythons = packages[torch, generation] // len(PACKAGES)
                cold = SETUP_S + sum(cold_seconds(p.name, archs) + (pythons - 1) * p.cached_s for p in PACKAGES)
                cached = SETUP_S + pythons * sum(p.cached_s for p in PACKAGES)
                found.append(Job(f"{prefix}cuda{vfile.cuda.replace('.', '')}-torch{torch}-{generation}", platform,
                                 vfile.display_path, vfile.cuda, torch, generation, vfile.generations[generation],
                                 packages[torch, generation], round(cold / 60), round(cached / 60)))
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
        rows = [(j.name, j.packages, j.archs, human_duration(60 * j.cold_minutes), human_duration(60 * j.cached_minutes))
                for j in found]
        print_table(["job", "packages", "architectures", "cold (2 cores)", "from the cache"], rows)
        longest = max(found, key=lambda j: j.cold_minutes)
        print(f"{len(found)} jobs, {sum(j.packages for j in found)} packages; longest: {longest.name}, {longest.cold_minutes} "
              f"min cold, {RUNNER_LIMIT_S / 60 / longest.cold_minutes:.1f}x within the 6 h job limit (required: {MARGIN}x)")
    else:
        print(json.dumps({"include": [asdict(j) for j in found]}, separators=(",", ":")))
    return 0
