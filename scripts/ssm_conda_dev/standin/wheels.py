"""PyPI wheels the stand-in repacks: which one fits (its PEP 425 tags among those CPython X.Y on
linux-64 or linux-aarch64 with a given glibc installs), its metadata as conda run requirements,
downloading it."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from importlib.metadata import PathDistribution
from pathlib import Path
from typing import NamedTuple

from packaging.metadata import InvalidMetadata, Metadata
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, NormalizedName, canonicalize_name, parse_wheel_filename
from packaging.version import Version
from ssm_conda.console import PipelineError, UsageError, human_duration, human_size

from ssm_conda_dev.standin.catalog import CONDA_NAMES

NVIDIA_LIB_RE = re.compile(r"nvidia/[^/]+/lib/[^/]+\.so[.0-9]*")  # in an installed NVIDIA wheel's RECORD


@dataclass(frozen=True)
class Wheel:
    path: Path  # the .whl; for an installed distribution, the site-packages holding it
    name: NormalizedName
    version: str
    lib_files: tuple[str, ...] = ()  # for an installed distribution: its libraries


# conda's platform -> the machine name in PEP 425 platform tags and PEP 508's platform_machine
MACHINES = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}


def linux_platforms(glibc: str, platform: str = "linux-64") -> list[str]:
    """The platform tags a glibc on `platform` runs, newest first. packaging computes these only for
    the running interpreter; the stand-in needs them for a given glibc and machine, for pip download
    --platform too (pip does not expand perennial manylinux_2_X tags to older ones)."""
    major, minor = (int(part) for part in glibc.split(".")[:2])
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags = [tag for n in range(minor, 4, -1) for tag in (f"manylinux_{major}_{n}", legacy.get(n)) if tag]
    return [f"{tag}_{MACHINES[platform]}" for tag in (*tags, "linux")]


@dataclass(frozen=True)
class TargetPython:
    """The CPython a stand-in is built for: X.Y on a platform (linux-64, linux-aarch64) with a glibc."""

    py_ver: str  # 3.11
    glibc: str
    python_full_version: str = ""  # 3.11.7 where known
    platform: str = "linux-64"

    @property
    def tag(self) -> str:
        return "cp" + self.py_ver.replace(".", "")

    @cached_property
    def supported_tags(self) -> frozenset[Tag]:
        version, platforms = tuple(int(part) for part in self.py_ver.split(".")[:2]), linux_platforms(self.glibc, self.platform)
        return frozenset((*cpython_tags(version, abis=[self.tag], platforms=platforms),
                          *compatible_tags(version, self.tag, platforms)))

    def marker_environment(self) -> dict[str, str]:
        """PEP 508 marker values for this Python on its platform (no extra requested)."""
        full = self.python_full_version or f"{self.py_ver}.0"
        return {"python_version": self.py_ver, "python_full_version": full, "implementation_version": full,
                "sys_platform": "linux", "platform_system": "Linux", "platform_machine": MACHINES[self.platform],
                "os_name": "posix", "implementation_name": "cpython", "platform_python_implementation": "CPython",
                "extra": ""}


def parse_wheel(path: Path) -> tuple[Wheel, frozenset[Tag]] | None:
    """The wheel a file name describes, and its tags; None for a name that is not a wheel's."""
    try:
        name, version, _build, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename:
        return None
    return Wheel(path, name, str(version)), tags


def fits(path: Path, target: TargetPython) -> bool:
    """Whether a wheel installs on the target CPython and platform."""
    parsed = parse_wheel(path)
    return parsed is not None and not parsed[1].isdisjoint(target.supported_tags)


def is_pure(wheel: Wheel) -> bool:
    """A wheel for any Python 3 and platform (py3-none-any): what a noarch: python package repacks."""
    parsed = parse_wheel(wheel.path)
    return parsed is not None and all(tag.abi == "none" and tag.platform == "any" for tag in parsed[1])


def admits(wheel: Wheel, target: TargetPython) -> bool:
    """Whether the wheel's Requires-Python holds for the target CPython."""
    requires_python = read_metadata(wheel.path).requires_python
    python = Version(target.marker_environment()["python_full_version"])
    return requires_python is None or requires_python.contains(python, prereleases=True)


def find_wheel(dirs: Sequence[Path], name: str, constraint: str, target: TargetPython,
               accept: Callable[[Wheel], bool] = lambda wheel: True, ours: Path | None = None) -> Wheel | None:
    """The newest wheel of `name` in `dirs` that fits the target and the constraint and that `accept`
    takes (first dir wins a tie); `ours`: the folder downloads go to (readable())."""
    spec, wanted = SpecifierSet(constraint), canonicalize_name(name)
    found = [parsed[0] for directory in dirs if directory.is_dir() for path in sorted(directory.glob("*.whl"))
             if (parsed := parse_wheel(path)) and parsed[0].name == wanted and Version(parsed[0].version) in spec
             and not parsed[1].isdisjoint(target.supported_tags) and accept(parsed[0])]
    newest = max(found, key=lambda wheel: Version(wheel.version), default=None)  # max keeps the first of equals
    return readable(newest, ours) if newest else None


def readable(wheel: Wheel, ours: Path | None = None) -> Wheel:
    """The wheel, if its zip directory reads: one cut short or not a zip stops the run here, named
    (one in `ours`, the folder downloads go to, is from an interrupted download)."""
    try:
        zipfile.ZipFile(wheel.path).close()
    except (zipfile.BadZipFile, OSError) as exc:
        if wheel.path.parent == ours:
            raise PipelineError(f"{wheel.path}: not a readable wheel ({exc}); delete it: the next run downloads it "
                                "again") from None
        raise UsageError(f"{wheel.path}: not a readable wheel ({exc}); delete it or replace it") from None
    return wheel


class WheelMetadata(NamedTuple):
    requires: list[Requirement]
    requires_python: SpecifierSet | None
    console_scripts: list[str]  # "name = module:function", as conda recipes' entry_points


def read_metadata(source: Path) -> WheelMetadata:
    """Requires-Dist, Requires-Python and console scripts of a .whl or an installed .dist-info."""
    dist_info = source if source.is_dir() else next(
        (d for d in zipfile.Path(source).iterdir() if d.name.endswith(".dist-info") and (d / "METADATA").is_file()), None)
    if dist_info is None:
        raise UsageError(f"{source} has no .dist-info/METADATA: not a wheel")
    dist = PathDistribution(dist_info)  # type: ignore[arg-type]
    try:
        meta = Metadata.from_email(dist.read_text("METADATA") or "", validate=False)
        requires, requires_python = meta.requires_dist or [], meta.requires_python
    except InvalidMetadata as exc:
        raise PipelineError(f"{source.name}: unreadable metadata: {exc}") from None
    scripts = [f"{ep.name} = {ep.value}" for ep in dist.entry_points.select(group="console_scripts")]
    return WheelMetadata(requires, requires_python, scripts)


def applicable(requires: Iterable[Requirement], target: TargetPython) -> list[Requirement]:
    """The requirements whose markers hold on the target (no extras requested)."""
    env = target.marker_environment()
    return [req for req in requires if req.marker is None or req.marker.evaluate(env)]


def requirement_pins(source: Path, target: TargetPython) -> dict[str, str]:
    """{name: PEP 440 specifier} of what a wheel or an installed .dist-info requires on the target."""
    return {canonicalize_name(req.name): str(req.specifier) for req in applicable(read_metadata(source).requires, target)}


def conda_specifier(pep440: str | SpecifierSet) -> str:
    """A PEP 440 specifier set as a conda version spec: ~=3.8.0 is >=3.8.0,<3.9.0a0."""
    parts = []
    for spec in SpecifierSet(str(pep440)):
        if spec.operator == "~=":
            # Compatible release: drop the last release part, bump the one before it (~=4.10: <5.0a0).
            release = Version(spec.version).release[:-1]
            upper = (*release[:-1], release[-1] + 1)
            parts += [f">={spec.version}", f"<{'.'.join(map(str, upper))}.0a0"]
        else:
            parts.append(f"{'==' if spec.operator == '===' else spec.operator}{spec.version}")
    return ",".join(sorted(parts, key=lambda p: (not p.startswith(">"), p)))


def noarch_python(requires_python: SpecifierSet | str | None, python_min: str) -> TargetPython:
    """The Python a noarch package's markers are read for: the oldest CPython X.Y from `python_min` on that
    Requires-Python admits. As conda-forge's noarch recipes state what their python_min needs (tomli,
    exceptiongroup), one build serves every Python, whichever Python's run made it."""
    major, minor = (int(part) for part in python_min.split("."))
    spec = SpecifierSet(str(requires_python or ""))
    py_ver = next((f"{major}.{m}" for m in range(minor, minor + 10) if spec.contains(f"{major}.{m}.0", prereleases=True)),
                  python_min)
    return TargetPython(py_ver, "")


def conda_run_requirements(requires: Iterable[Requirement], requires_python: SpecifierSet | str | None,
                           target: TargetPython) -> list[str]:
    """Conda run requirements from a wheel's Requires-Dist and Requires-Python, for the target Python."""
    run = [f"python {conda_specifier(requires_python)}" if requires_python else "python"]
    for req in applicable(requires, target):
        name = canonicalize_name(req.name)
        run.append(f"{CONDA_NAMES.get(name, name)} {conda_specifier(req.specifier)}".strip())
    return run


def installed_nvidia(site: Path, pypi: str) -> Wheel | None:
    """An installed NVIDIA library distribution, as a Wheel whose path is the site-packages."""
    for dist_info in sorted(site.glob("*.dist-info")):
        name, _, version = dist_info.name.removesuffix(".dist-info").partition("-")
        record = dist_info / "RECORD"
        if canonicalize_name(name) == canonicalize_name(pypi) and record.exists():
            files = [row.split(",", 1)[0] for row in record.read_text().splitlines()]
            return Wheel(site, canonicalize_name(name), version, tuple(f for f in files if NVIDIA_LIB_RE.fullmatch(f)))
    return None


def pip_download(requirements: Sequence[str], dest: Path, target: TargetPython, verbose: bool = False,
                 pure: bool = False) -> list[Path]:
    """Download the wheels of `requirements` for the target from PyPI into `dest`, one at a time; the
    wheels that were not there before. On a terminal pip draws its own progress bar (on stderr);
    elsewhere each download is one line with its size and time. `pure`: py3-none-any wheels only
    (charset-normalizer has binary ones too, which pip would prefer)."""
    dest.mkdir(parents=True, exist_ok=True)
    show_pip = verbose or sys.stderr.isatty()
    platforms = [arg for platform in linux_platforms(target.glibc, target.platform) for arg in ("--platform", platform)]
    if pure:
        platforms = ["--platform", "any"]
    new: list[Path] = []
    for requirement in requirements:
        before = set(dest.glob("*.whl"))
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--python-version", target.py_ver, "--implementation", "py" if pure else "cp",
               *([] if pure else ["--abi", target.tag]), *platforms, "-d", str(dest), *([] if show_pip else ["-q"]), requirement]
        start = time.monotonic()
        sys.stderr.flush()
        # pip's progress bar and log go to its stdout: onto our stderr (fd 2), keeping our stdout for results
        result = subprocess.run(cmd, stdout=2 if show_pip else subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["pip download failed"])[-1]
            raise UsageError(f"no {requirement} wheel here and pip download failed: {last}")
        seconds = time.monotonic() - start
        for path in sorted(set(dest.glob("*.whl")) - before):
            print(f"downloaded {path.name} ({human_size(path.stat().st_size)} in {human_duration(seconds)})",
                  file=sys.stderr, flush=True)
            new.append(path)
    return new
