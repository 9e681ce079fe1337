"""The packages to upload, checked before anything is sent: only what recipe/ builds (as variants/ renders it), each archive
complete, named as its index.json says, in its subdir, holding only what it may (contents.py), with the local repodata's sha256.
A foreign or bad file sends nothing."""

from __future__ import annotations

import contextlib
import functools
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ssm_conda.channels import check_archive, find_packages, name_and_build_of, sha256_of
from ssm_conda.console import UsageError
from ssm_conda.contents import check_contents
from ssm_conda.matrix import PLATFORMS, PlannedVariant, choose_built, load_variant_files, plan
from ssm_conda.project import NAMES
from ssm_conda.selection import Selection, without_hash


@dataclass
class LocalPackage:
    path: Path
    subdir: str
    rendered: PlannedVariant  # what variants/ renders for its name, version and build string less hash
    size: int = 0
    sha256: str = ""
    problem: str | None = None

    @property
    def filename(self) -> str:
        return self.path.name

    @property
    def name_and_build(self) -> tuple[str, str]:
        """Name and build string taken from the file name (the pre-check holds them to index.json's)."""
        return name_and_build_of(self.filename)

    @property
    def variant(self) -> str:
        """cuda130_py312_torch213_sm90 for our packages: the build string without its hash."""
        return without_hash(self.name_and_build[1]) or "-"


def repodata_filenames(repodata: dict[str, Any]) -> dict[str, str]:
    """filename -> sha256 ('' if the repodata does not list one)."""
    records = {**repodata.get("packages", {}), **repodata.get("packages.conda", {})}
    return {name: str(rec.get("sha256", "")) for name, rec in records.items()}


def select_packages(output_dir: Path, selection: Selection, variants_dir: Path | None = None) -> list[LocalPackage]:
    """The packages of `output_dir` the selectors choose (each refused unless recipe/ builds it)."""
    output_dir = output_dir.resolve()
    if not output_dir.is_dir():
        raise UsageError(f"output channel {output_dir} is not a directory (build first, or pass --output-dir)")
    paths = find_packages([output_dir])
    if not paths:
        raise UsageError(f"no .conda or .tar.bz2 packages in {output_dir}")
    packages = [LocalPackage(p, p.parent.name, refuse_foreign(p, output_dir, variants_dir), p.stat().st_size) for p in paths]
    chosen = choose_built(packages, lambda p: p.name_and_build, selection, variants_dir)  # as rattler-build renders them
    if not chosen:
        shown = ", ".join(p.filename for p in packages[:6]) + (" ..." if len(packages) > 6 else "")
        raise UsageError(f"no package in {output_dir} matches the selectors; found: {shown}")
    return chosen


@functools.cache
def rendered(subdir: str, variants_dir: Path | None) -> dict[str, PlannedVariant]:
    """NAME-VERSION-BUILD, less the build string's hash -> its variant, of every package recipe/ builds for `subdir`."""
    variants = plan(files=load_variant_files(variants_dir, subdir), target_platform=subdir) if subdir in PLATFORMS else []
    return {f"{v.package}-{v.rendered.recipe.package.version}-{without_hash(v.build_string)}": v for v in variants}


def refuse_foreign(path: Path, output_dir: Path, variants_dir: Path | None) -> PlannedVariant:
    """Only what recipe/ builds is sent: the channel is prepended with strict priority, so anything else
    (python, libgcc, another project's numpy) would shadow conda-forge's package for its users."""
    if not path.is_relative_to(output_dir):
        raise UsageError(f"a link in {output_dir} points to {path}, outside it; upload sends only the channel's own files")
    shown, name = path.relative_to(output_dir), name_and_build_of(path.name)[0]
    if name not in NAMES:
        raise UsageError(f"{shown}: {name} is not built by recipe/ (only {', '.join(NAMES)} are published); "
                         f"move it out of {output_dir}")
    stem = path.name.removesuffix(".conda").removesuffix(".tar.bz2")
    if not (variant := rendered(path.parent.name, variants_dir).get(without_hash(stem))):
        raise UsageError(f"{shown}: not a build variants/ renders for {path.parent.name} (an --arch build, or a variant "
                         f"or version no longer listed); move it out of {output_dir}")
    return variant


def check_package(pkg: LocalPackage, indexed: dict[str, str]) -> None:
    """Fill in sha256, or set `problem`; `indexed` is the local repodata's filename -> sha256."""
    ext, pkg.problem = ".conda" if pkg.filename.endswith(".conda") else ".tar.bz2", None
    try:
        with tempfile.TemporaryDirectory(prefix="ssm-conda-upload-") as unpacked:
            index = check_archive(pkg.path, Path(unpacked))
            expected = f"{index.name.normalized}-{index.version}-{index.build}{ext}"
            if pkg.filename != expected:
                pkg.problem = f"file name does not match its index.json (expected {expected})"
            elif index.subdir != pkg.subdir:
                pkg.problem = f"lies in {pkg.subdir}/ but its index.json says subdir {index.subdir}"
            else:
                check_contents(Path(unpacked), index, pkg.rendered)
    except ValueError as exc:
        pkg.problem = str(exc)
    if not pkg.problem:
        pkg.sha256 = sha256_of(pkg.path)
        if indexed.get(pkg.filename) not in (None, "", pkg.sha256):  # not listed, or listed without one: nothing to compare
            pkg.problem = "sha256 differs from the channel's repodata.json (file changed or truncated)"


def check_all(packages: list[LocalPackage], output_dir: Path) -> list[LocalPackage]:
    """Check every package against its subdir's local repodata, if indexed; returns the invalid ones."""
    indexed: dict[str, dict[str, str]] = {}  # subdir -> filename -> sha256
    for subdir in {p.subdir for p in packages}:
        with contextlib.suppress(OSError, ValueError):  # not indexed: {}
            indexed[subdir] = repodata_filenames(json.loads((output_dir / subdir / "repodata.json").read_text()))
    for pkg in packages:
        check_package(pkg, indexed.get(pkg.subdir, {}))
    return [p for p in packages if p.problem]
