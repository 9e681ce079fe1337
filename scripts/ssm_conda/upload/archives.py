"""The packages to upload, checked before anything is sent: each a valid conda archive named as its
index.json says, in its subdir, with the sha256 the local repodata lists. One bad archive: nothing is sent.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

from rattler.package import IndexJson

from ssm_conda.channels import find_packages, name_and_build_of, sha256_of
from ssm_conda.console import UsageError
from ssm_conda.matrix import Selection
from ssm_conda.selection import choose_built, without_hash
from ssm_conda.upload.credentials import one_line
from ssm_conda.upload.served import repodata_filenames


@dataclass
class LocalPackage:
    path: Path
    subdir: str
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


def local_packages(output_dir: Path) -> list[LocalPackage]:
    if not output_dir.is_dir():
        raise UsageError(f"output channel {output_dir} does not exist (build first, or pass --output-dir)")
    paths = find_packages([output_dir])
    if not paths:
        raise UsageError(f"no .conda or .tar.bz2 packages in {output_dir}")
    return [LocalPackage(path=p, subdir=p.parent.name, size=p.stat().st_size) for p in paths]


def filter_packages(packages: list[LocalPackage], selection: Selection) -> list[LocalPackage]:
    """The packages the selectors choose (ssm_conda.selection: as rattler-build renders the recipes)."""
    return choose_built(packages, lambda p: p.name_and_build, selection)


def select_packages(output_dir: Path, selection: Selection) -> list[LocalPackage]:
    packages = local_packages(output_dir)
    chosen = filter_packages(packages, selection)
    if not chosen:
        shown = ", ".join(p.filename for p in packages[:6]) + (" ..." if len(packages) > 6 else "")
        raise UsageError(f"no package in {output_dir} matches the selectors; found: {shown}")
    return chosen


def _zip_problem(path: Path) -> str | None:
    # rattler reads only the info-* member: a corrupt pkg-* member would go unnoticed.
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError) as exc:
        return f"not a valid .conda archive ({exc})"
    return f"corrupt .conda archive (member {bad} fails its CRC check)" if bad else None


def check_package(pkg: LocalPackage, indexed: dict[str, str]) -> None:
    """Fill in sha256, or set `problem`; `indexed` is the local repodata's filename -> sha256."""
    pkg.problem = "empty file" if pkg.size == 0 else None
    if pkg.problem is None and pkg.filename.endswith(".conda"):
        pkg.problem = _zip_problem(pkg.path)
    if pkg.problem:
        return
    try:
        index = IndexJson.from_package_archive(pkg.path)
    except Exception as exc:  # rattler raises its own exception types
        pkg.problem = f"not a valid conda archive ({one_line(exc, 120)})"
        return
    ext = ".conda" if pkg.filename.endswith(".conda") else ".tar.bz2"
    expected = f"{index.name.normalized}-{index.version}-{index.build}{ext}"
    if pkg.filename != expected:
        pkg.problem = f"file name does not match its index.json (expected {expected})"
    elif index.subdir and index.subdir != pkg.subdir:
        pkg.problem = f"lies in {pkg.subdir}/ but its index.json says subdir {index.subdir}"
    else:
        pkg.sha256 = sha256_of(pkg.path)
        listed = indexed.get(pkg.filename)
        if listed and listed != pkg.sha256:
            pkg.problem = "sha256 differs from the channel's repodata.json (file changed or truncated)"


def check_all(packages: list[LocalPackage], output_dir: Path) -> list[LocalPackage]:
    """Check every package against its subdir's local repodata, if indexed; returns the invalid ones."""
    indexed: dict[str, dict[str, str]] = {}  # subdir -> filename -> sha256
    for pkg in packages:
        if pkg.subdir not in indexed:
            try:
                indexed[pkg.subdir] = repodata_filenames(json.loads((output_dir / pkg.subdir / "repodata.json").read_text()))
            except (OSError, ValueError):
                indexed[pkg.subdir] = {}
        check_package(pkg, indexed[pkg.subdir])
    return [p for p in packages if p.problem]


def invalid_message(invalid: list[LocalPackage], output_dir: Path) -> str:
    first = invalid[0]
    more = f" (and {len(invalid) - 1} more invalid)" if len(invalid) > 1 else ""
    return f"{first.path.relative_to(output_dir)}: {first.problem}{more}; nothing was uploaded"
