"""Which variants a command works on: the selector flags and the Selection they make (matrix.py plans it and chooses
built packages by it), and a build string less its hash (which covers every variant key, a stand-in's compilers too)."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from ssm_conda.project import NAMES


def without_hash(build: str) -> str:
    """cuda130_py312_torch213_sm90 of cuda130_py312_torch213_sm90_h1a2b3c4_0."""
    return re.sub(r"_h[0-9a-f]+_\d+$", "", build)  # rattler-build's hash and build number ending a build string (build.string)


@dataclass(frozen=True)
class Selection:
    """What the user asked for; None means every value the variant files list."""

    cuda: str | None = None
    python: str | None = None
    torch: str | None = None
    arch: str | None = None
    generations: tuple[str, ...] | None = None
    packages: tuple[str, ...] = NAMES  # in build order


def add_selector_arguments(parser: argparse.ArgumentParser, package_help: str) -> None:
    parser.add_argument("--package", action="append", choices=NAMES, help=package_help)
    parser.add_argument("--cuda", help="the variants of this CUDA version: a file in variants/ (e.g. 13.0)")
    parser.add_argument("--python", help="the variants of this Python X.Y (default: every one in variants/)")
    parser.add_argument("--torch", help="the variants of this pytorch minor X.Y (default: every one in variants/)")
    parser.add_argument("--generation", action="append", help="the variants of this GPU generation (repeatable; default: every "
                        "one the variant file lists): all (the all-architecture package) or a per-generation one, e.g. sm90")
    parser.add_argument("--arch", help='the variant for these GPU architectures instead of the variant file\'s lists: native '
                        '(the GPUs here) or a list such as "8.0;9.0+PTX"')


def selection_from_args(args: argparse.Namespace) -> Selection:
    packages = tuple(p for p in NAMES if p in (args.package or NAMES))
    generations = tuple(dict.fromkeys(args.generation)) if args.generation else None
    return Selection(cuda=args.cuda, python=args.python, torch=args.torch, arch=args.arch,
                     generations=generations, packages=packages)
