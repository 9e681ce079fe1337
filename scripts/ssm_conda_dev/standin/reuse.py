"""What the channel directory already holds: packages, the digest stamps of their recipes, pruning. A
package is reused when complete and built from the same recipe (its digest stamp under .recipes/
matches): its file name only changes with its version and variant hash, not with its recipe."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.version import Version

TARGET_PLATFORM = "linux-64"
# Packages whose version is their Python's (X.Y or X.Y.Z): one per Python, noarch or not.
PYTHON_VERSIONED = ("python", "python_abi", "python-abi3", "cpython", "python-gil")
INTERPRETER_VERSIONED = ("cpython", "python-gil")  # noarch, pinned to one interpreter's X.Y.Z
# py311 in a build string (py311h1234abc_0, cuda130_generic_py311_h...): built for CPython 3.11.
PY_BUILD_TAG_RE = re.compile(r"(?:^|_)py(3)(\d+)(?=h|_|$)")


def package_path(channel: Path, subdir: str, name: str, version: str, build: str) -> Path:
    return channel / subdir / f"{name}-{version}-{build}.conda"


def stamp_path(package: Path) -> Path:
    """Where the digest of the recipe a package was built from is kept (outside the served subdirs)."""
    return package.parent.parent / ".recipes" / f"{package.parent.name}-{package.name}.sha256"


def recipe_digest(recipe_path: Path, context: dict[str, Any]) -> str:
    """sha256 over what decides a stand-in's content: its recipe, its context and the helpers it names."""
    text = recipe_path.read_text()
    named = json.dumps(context, sort_keys=True, default=str)
    digest = hashlib.sha256(text.encode() + b"\0" + named.encode())
    for helper in sorted(recipe_path.parent.iterdir()):
        if helper != recipe_path and (helper.name in text or helper.name in named):
            digest.update(b"\0" + helper.name.encode() + b"\0" + helper.read_bytes())
    return digest.hexdigest()


def is_stamped(package: Path, digest: str) -> bool:
    stamp = stamp_path(package)
    return stamp.is_file() and stamp.read_text() == digest


def write_stamp(package: Path, digest: str) -> None:
    """A new file, never written through: a channel copied with hard links (cp -al) keeps the original's stamps."""
    stamp = stamp_path(package)
    stamp.parent.mkdir(exist_ok=True)
    tmp = stamp.with_name(stamp.name + ".tmp")
    tmp.write_text(digest)
    tmp.replace(stamp)


def is_complete_package(path: Path) -> bool:
    """A .conda file that was written to the end (a zip with its metadata and both tarballs)."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except (zipfile.BadZipFile, OSError):  # absent, a folder, or cut short
        return False
    return "metadata.json" in names and all(any(n.startswith(part) for n in names) for part in ("info-", "pkg-"))


def existing_package(channel: Path, subdir: str, name: str, version: str, build: str) -> Path | None:
    """The package if the channel already holds it complete; a broken leftover is removed."""
    path = package_path(channel, subdir, name, version, build)
    if is_complete_package(path):
        return path
    path.unlink(missing_ok=True)
    return None


def clean_build_dirs(channel: Path) -> None:
    """rattler-build's work directories in the output channel (left by a failed build too)."""
    for leftover in ("bld", "src_cache", "build_artifacts", "build_cache"):
        shutil.rmtree(channel / leftover, ignore_errors=True)
    (channel / "rattler-build-log.txt").unlink(missing_ok=True)


def package_python(path: Path) -> str | None:
    """The Python X.Y a stand-in package is built for (from its file name), or None for any Python:
    python-3.12.1-*, python_abi-3.12-* (PYTHON_VERSIONED) and builds tagged py312 (numpy, pytorch, ...) are 3.12's."""
    name, version, build = path.name.removesuffix(".conda").rsplit("-", 2)
    if name in PYTHON_VERSIONED:
        return ".".join(version.split(".")[:2])
    match = PY_BUILD_TAG_RE.search(build)
    return f"{match[1]}.{match[2]}" if match else None


def channel_pythons(channel: Path) -> list[str]:
    """The Pythons the channel holds a python package for, oldest first."""
    return sorted({package_python(p) for p in (channel / TARGET_PLATFORM).glob("python-*.conda")} - {None},
                  key=Version)  # type: ignore[arg-type]


def slot(package: Path) -> tuple[str, ...]:
    """What a newer build of a package replaces: its name in its subdir; for a noarch: python one (pyh...), that
    version only: another version is another Python's (Requires-Python: networkx 3.4 for 3.10, 3.6 for 3.11 on);
    likewise cpython and python-gil, one per interpreter (linux-64's 3.11.7 and linux-aarch64's Debian 3.11.2)."""
    name, version, build = package.name.removesuffix(".conda").rsplit("-", 2)
    versioned = build.startswith("pyh") or name in INTERPRETER_VERSIONED
    return (package.parent.name, name, version) if versioned else (package.parent.name, name)


def prune_channel(channel: Path, keep: set[Path], py_ver: str, log: Callable[[str], None]) -> list[Path]:
    """Remove older builds of what this run built (a changed stand-in recipe) in the subdir it built
    them in. Packages of another Python or platform stay: one channel serves them all."""
    built = {slot(p) for p in keep}
    removed = sorted(p for subdir in {p.parent.name for p in keep} for p in (channel / subdir).glob("*.conda")
                     if slot(p) in built and p not in keep and package_python(p) in (None, py_ver))
    for stale in removed:
        log(f"removing {stale.parent.name}/{stale.name}: no stand-in builds it any more")
        stale.unlink()
        stamp_path(stale).unlink(missing_ok=True)
    return removed
