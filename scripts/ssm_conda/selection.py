"""Which variants a command works on: the selector flags, their Selection, and the built packages it chooses
by name and build string less the hash (which covers every variant key, a stand-in's compilers too)."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from ssm_conda.matrix import Selection, VariantFile, load_variant_files, plan
from ssm_conda.project import NAMES as PACKAGES

T = TypeVar("T")
HASH_SUFFIX_RE = re.compile(r"_h[0-9a-f]+_\d+$")  # rattler-build's hash and build number ending a build string (build.string)


def without_hash(build: str) -> str:
    """cuda130_py312_torch213_sm90 of cuda130_py312_torch213_sm90_h1a2b3c4_0."""
    return HASH_SUFFIX_RE.sub("", build)


def add_selector_arguments(parser: argparse.ArgumentParser, package_help: str) -> None:
    parser.add_argument("--package", action="append", choices=PACKAGES, help=package_help)
    parser.add_argument("--cuda", help="the variants of this CUDA version: a file in variants/ (e.g. 13.0)")
    parser.add_argument("--python", help="the variants of this Python X.Y (default: every one in variants/)")
    parser.add_argument("--torch", help="the variants of this pytorch minor X.Y (default: every one in variants/)")
    parser.add_argument("--generation", action="append", help="the variants of this GPU generation (repeatable; default: every "
                        "one the variant file lists): all (the all-architecture package) or a per-generation one, e.g. sm90")
    parser.add_argument("--arch", help='the variant for these GPU architectures instead of the variant file\'s lists: native '
                        '(the GPUs here) or a list such as "8.0;9.0+PTX"')


def selection_from_args(args: argparse.Namespace) -> Selection:
    packages = tuple(p for p in PACKAGES if p in (args.package or PACKAGES))
    generations = tuple(dict.fromkeys(args.generation)) if args.generation else None
    return Selection(cuda=args.cuda, python=args.python, torch=args.torch, arch=args.arch,
                     generations=generations, packages=packages)


def choose_built(items: Iterable[T], name_and_build: Callable[[T], tuple[str, str]], selection: Selection,
                 variants_dir: Path | None = None) -> list[T]:
    """The `items` that are variants `selection` chooses; `variants_dir` (default: the workspace's) is read only if needed."""
    items = list(items)
    if selection == Selection():  # no selector: everything (upload sends whatever the channel holds)
        return items
    if replace(selection, packages=PACKAGES) == Selection():
        return [item for item in items if name_and_build(item)[0] in selection.packages]
    wanted = {(v.package, without_hash(v.build_string)) for v in plan(selection, load_variant_files(variants_dir))}
    named = ((item, *name_and_build(item)) for item in items)
    return [item for item, name, build in named if (name, without_hash(build)) in wanted]


def build_glob(vfile: VariantFile, python: str, torch: str, generation: str | None = None) -> str:
    """A glob of the build strings of one (CUDA, Python, torch) variant, of `generation` or any, less the hash."""
    selection = Selection(cuda=vfile.cuda, python=python, torch=torch, generations=(generation,) if generation else None,
                          packages=PACKAGES[:1])
    rendered = [without_hash(v.build_string) + "_" for v in plan(selection, files=[vfile])]
    return os.path.commonprefix(rendered) + "*"
