"""Build an offline stand-in conda channel for building recipe/causal-conv1d/recipe.yaml without conda-forge.

Every package the recipe asks for (python, pip, pytorch, the CUDA libraries, cuda-nvcc_linux-64,
the compilers, the sysroot, ...) is repacked, under conda-forge's name, by a small rattler-build
recipe of its own (ssm_conda_dev/standin/recipes/) from what this machine has: a CPython with a shared
libpython, PyPI wheels (torch, NVIDIA's CUDA libraries and the toolkit's nvcc, crt, nvvm, runtime
and CCCL, pure-Python packages), and the machine's gcc and glibc: no system CUDA toolkit. Versions
tell the truth: where they differ from what a variant file asks for (gcc, glibc), the channel root
gets standin-variants.yaml, which `ssm-conda build` merges over the variant file. Every package is
then checked against conda-forge's record (conda_forge.yaml, standin/fidelity.py).

    ssm-conda-dev standin                                          # ~/.cache/causal-conv1d-conda/standin
    ssm-conda-dev standin --python-prefix ~/.pyenv/versions/3.12.1   # add Python 3.12's packages

Wheels are looked for in the cache's wheels/ folder and every --wheel-dir; missing ones are
downloaded into the cache from PyPI (torch: about 550 MB) unless --offline. Re-running reuses
every package whose stand-in recipe is unchanged; a run for another Python adds that Python's
packages and keeps the others'.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ssm_conda.channels import index_channel
from ssm_conda.console import PipelineError, UsageError, human_duration, human_size, print_summary
from ssm_conda.matrix import PLATFORMS
from ssm_conda.paths import cache_dir

from ssm_conda_dev.standin import debian
from ssm_conda_dev.standin.catalog import CROSSENV, all_names
from ssm_conda_dev.standin.fidelity import check_channel
from ssm_conda_dev.standin.host import TorchChoice, WheelSource, check_patchelf, discover, gather, target_wheels
from ssm_conda_dev.standin.packages import aarch64_standins, cross_standins, standins
from ssm_conda_dev.standin.repack import build_channel, write_variants_file
from ssm_conda_dev.standin.wheels import TargetPython


def default_dir() -> Path:
    return cache_dir() / "standin"


def wheel_cache() -> Path:
    """Where downloaded wheels go, and the one wheel folder looked in by default."""
    return cache_dir() / "wheels"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output-dir", type=Path, metavar="DIR",
                        help=f"the local output channel: the stand-in channel it writes, or adds to (default {default_dir()})")
    parser.add_argument("--python-prefix", help="CPython installation to repack (default: the running one's base)")
    parser.add_argument("--torch-wheel", help="torch wheel to repack (default: the newest fitting one found)")
    parser.add_argument("--torch-installed", metavar="SITE_PACKAGES",
                        help="repack the torch installed in this site-packages instead of a wheel")
    parser.add_argument("--torch", help="torch minor to pick from the wheels found, e.g. 2.13")
    parser.add_argument("--cuda", help="CUDA X.Y of the toolkit packages, from NVIDIA's wheels "
                                       "(default: the one torch was built for)")
    parser.add_argument("--cc", help="host gcc to wrap (default: the newest /usr/bin/gcc-N)")
    parser.add_argument("--wheel-dir", action="append", default=[], metavar="DIR",
                        help=f"another folder of wheels to look in, before {wheel_cache()} (repeatable)")
    parser.add_argument("--offline", action="store_true",
                        help="never pip download a missing wheel (torch for another Python, small pure-Python ones)")
    parser.add_argument("--rebuild", action="append", default=[], metavar="NAME",
                        help="rebuild this package even if the channel has it (repeatable; 'all' for every one): "
                             "a changed stand-in recipe keeps its name, version and build string")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="compression threads")
    parser.add_argument("--target-platform", choices=PLATFORMS, default="linux-64",
                        help="the conda platform to add packages for; linux-aarch64: what cross-compiling for it on "
                             "linux-64 needs (Debian's cross gcc, glibc and CPython 3.11; cross-python; aarch64 wheels of "
                             "torch and NVIDIA's CUDA); the channel must hold the linux-64 packages of Python 3.11 already")


def rebuild_names(values: list[str]) -> frozenset[str]:
    """--rebuild's names (repeated or comma-separated), checked against the stand-ins."""
    names = frozenset(n.strip() for item in values for n in item.split(",") if n.strip())
    known = all_names() | {"all"}
    if names - known:
        raise UsageError(f"--rebuild: unknown package {', '.join(sorted(names - known))}; "
                         f"accepted: {', '.join(sorted(known))}")
    return names


@dataclass(frozen=True)
class StandinOptions:
    """`ssm-conda-dev standin`'s arguments and environment, checked: all that the work below sees."""

    channel: Path
    python_prefix: Path
    cc: str | None
    torch: TorchChoice
    wheels: WheelSource
    debian_cache: Path
    rebuild: frozenset[str]
    threads: int
    target_platform: str


def options(args: argparse.Namespace) -> StandinOptions:
    """The options, every one checked (and patchelf found) before anything is looked for or written."""
    if args.torch_wheel and args.torch_installed:
        raise UsageError("--torch-wheel and --torch-installed exclude each other")
    if args.threads < 1:
        raise UsageError(f"--threads {args.threads}: must be at least 1")
    if args.target_platform == "win-64":  # Windows' binaries are neither this machine's nor in Linux wheels
        raise UsageError("--target-platform win-64: no stand-in repacks Windows' packages here; linux-64 and linux-aarch64 "
                         "have one (tests/win64_records.yaml is win-64's, metadata only)")
    rebuild = rebuild_names(args.rebuild)
    check_patchelf()
    dirs = [Path(d).expanduser() for d in args.wheel_dir]
    if missing := [d for d in dirs if not d.is_dir()]:
        raise UsageError(f"--wheel-dir {missing[0]}: no such folder")
    torch = TorchChoice(installed=Path(args.torch_installed) if args.torch_installed else None,
                        wheel=Path(args.torch_wheel) if args.torch_wheel else None, minor=args.torch, cuda=args.cuda)
    return StandinOptions(
        channel=(args.output_dir or default_dir()).expanduser().resolve(),
        python_prefix=Path(args.python_prefix or sys.base_prefix), cc=args.cc, torch=torch,
        wheels=WheelSource(tuple(dict.fromkeys([*dirs, wheel_cache()])), wheel_cache(), args.offline, args.verbose),
        debian_cache=cache_dir() / "debian", rebuild=rebuild, threads=args.threads,
        target_platform=args.target_platform)


def run(args: argparse.Namespace) -> int:
    opts = options(args)
    start = time.monotonic()
    if opts.target_platform == "linux-aarch64":
        return run_cross(opts, start)
    machine = discover(opts.python_prefix, opts.cc, opts.torch, opts.wheels)  # every input checked before anything is written
    channel = opts.channel
    outcomes = build_channel(standins(machine), machine.target.py_ver, channel, opts.threads,
                             lambda msg: print(msg, flush=True), opts.rebuild, opts.wheels.verbose)
    variants_file = write_variants_file(channel, machine)
    index_channel(channel, force=True)
    total = sum(p.stat().st_size for p in channel.glob("*/*.conda"))
    print_summary(outcomes, title=f"stand-in packages for python {machine.target.py_ver}")
    print(f"channel: {channel.as_uri()} ({len(outcomes)} packages for python {machine.target.py_ver}, "
          f"{human_size(total)} in all, {human_duration(time.monotonic() - start)})")
    print(f"variant overrides: {variants_file} (merge over the variant file: compilers and glibc are the machine's)")
    if problems := check_channel(channel, packages=[o.path for o in outcomes]):
        print("\n".join(problems))
        raise PipelineError(f"the stand-in channel differs from conda-forge's packages in {len(problems)} places "
                            "(above; the record is ssm_conda_dev/standin/conda_forge.yaml)")
    print("every recorded package matches conda-forge's (ssm_conda_dev/standin/conda_forge.yaml)")
    return 0


def run_cross(opts: StandinOptions, start: float) -> int:
    """The linux-aarch64 additions to a channel: Debian's packages (cached under the cache's debian/: its
    CPython among them) and the aarch64 wheels, every input found before anything is written."""
    channel = opts.channel
    debs = debian.fetch(opts.debian_cache, offline=opts.wheels.offline)
    py_ver = debs.py_ver
    if not list((channel / "linux-64").glob(f"python-{py_ver}.*.conda")):
        raise UsageError(f"{channel} has no linux-64 python {py_ver}, which cross-compiling runs: build the channel "
                         f"for it first (ssm-conda-dev standin --python-prefix <a CPython {py_ver}>)")
    build_python = TargetPython(py_ver, os.confstr("CS_GNU_LIBC_VERSION").split()[-1])
    crossenv = gather([("crossenv", "crossenv", CROSSENV, f"crossenv{CROSSENV}")], opts.wheels,
                      build_python)["crossenv"]
    aarch64_python = TargetPython(py_ver, debs.glibc_version, debs.python_version, "linux-aarch64")
    aarch64 = target_wheels(opts.torch, opts.wheels, aarch64_python)
    todo = [*cross_standins(debs, crossenv, build_python), *aarch64_standins(aarch64)]
    outcomes = build_channel(todo, py_ver, channel, opts.threads, lambda msg: print(msg, flush=True), opts.rebuild,
                             opts.wheels.verbose)
    index_channel(channel, force=True)
    print_summary(outcomes, title=f"stand-in packages for cross-compiling to linux-aarch64 (python {py_ver})")
    print(f"channel: {channel.as_uri()} ({len(outcomes)} packages for linux-aarch64, pytorch {aarch64.torch_version} "
          f"(CUDA {aarch64.cuda_mm}), {human_duration(time.monotonic() - start)})")
    return 0
