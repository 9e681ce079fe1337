"""The stand-in channel against conda-forge: each package the record (conda_forge.yaml) names, as
built, has conda-forge's noarch kind, version, build, files, depends, constrains and run_exports.

`ssm-conda-dev standin` runs this after every build and fails on a difference; the tests run it on
channels with a planted difference. What conda-forge has that the stand-in cannot reproduce is
listed in the record (standin_lacks), with the reason.
"""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from packaging.version import Version
from ssm_conda.channels import find_packages, name_and_build_of

from ssm_conda_dev.standin import reuse

RECORD = Path(__file__).resolve().parent / "conda_forge.yaml"


def load_record(path: Path = RECORD) -> dict[str, dict[str, Any]]:
    return yaml.safe_load(path.read_text())


@dataclass(frozen=True)
class Built:
    """What one built package says of itself."""

    path: Path
    name: str
    version: str
    build: str
    build_number: int
    noarch: str | None
    depends: list[str]
    constrains: list[str]
    run_exports: dict[str, list[str]]
    files: dict[str, str | None]  # path -> symlink target, None for a file


async def _read(path: Path) -> Built:
    from rattler.package_streaming import PackageArchive

    archive = await PackageArchive.from_path(path)
    index = await archive.index_json()
    exports = await archive.run_exports_json()
    paths = await archive.paths_json()
    files: dict[str, str | None] = {str(p.relative_path): None for p in paths.paths}
    if any(p.path_type.softlink for p in paths.paths):
        async for entry in archive.stream("pkg"):
            if entry.is_symlink:
                files[entry.name] = entry.link_target
    run_exports = {kind: list(getattr(exports, kind) or []) for kind in ("weak", "strong", "noarch", "weak_constrains",
                                                                         "strong_constrains")} if exports else {}
    noarch = "generic" if index.noarch.generic else "python" if index.noarch.python else None
    return Built(path, index.name.normalized, str(index.version), str(index.build), index.build_number,
                 noarch, list(index.depends), list(index.constrains), {k: v for k, v in run_exports.items() if v},
                 files)


def read_package(path: Path) -> Built:
    return asyncio.run(_read(path))


def placeholders(built: Built, channel_facts: dict[str, str]) -> dict[str, str]:
    release = Version(built.version).release
    py = reuse.package_python(built.path) or ""
    return {
        "v": built.version,
        "v_minor_next": f"{release[0]}.{release[1] + 1}.0a0" if len(release) > 1 else "",
        "v_major_next": f"{release[0] + 1}.0a0",
        "py": py, "py_tag": "cp" + py.replace(".", ""), "py_nodot": py.replace(".", ""),
        **channel_facts,
    }


def channel_facts(channel: Path) -> dict[str, str]:
    """The values the record's placeholders take that the channel as a whole decides: its CUDA, glibc, triton."""
    def version_of(name: str) -> str:
        found = sorted(channel.glob(f"*/{name}-[0-9]*.conda"))
        return found[-1].name.removesuffix(".conda").rsplit("-", 2)[1] if found else ""

    cuda = version_of("cuda-version")
    major = cuda.split(".")[0] if cuda else "0"
    minor = int(cuda.split(".")[1]) if "." in cuda else 0
    glibc = version_of("sysroot_linux-64")
    return {"cuda": cuda, "cuda_major": major, "cuda_nodot": cuda.replace(".", ""),
            "cuda_minor_next": f"{major}.{minor + 1}.0a0", "cuda_major_next": str(int(major) + 1),
            "glibc": ".".join(glibc.split(".")[:2]), "triton": version_of("triton")}


def _spec(value: str, names: dict[str, str]) -> str:
    return " ".join(value.format(**names).split())


def file_problems(entries: list[str], files: dict[str, str | None], names: dict[str, str],
                  lacks: set[str]) -> list[str]:
    problems = []
    for entry in entries:
        if entry in lacks:
            continue
        text = entry.format(**names)
        if text.startswith("!"):
            if hits := fnmatch.filter(files, text[1:]):
                problems.append(f"has {hits[0]}, which conda-forge's does not")
            continue
        path, _, target = text.partition(" -> ")
        want_file = path.endswith(" (file)")
        path = path.removesuffix(" (file)")
        hits = fnmatch.filter(files, path)
        if not hits:
            problems.append(f"lacks {path}")
        elif target and files[hits[0]] != target:
            problems.append(f"{path} should be a symlink to {target}, is {files[hits[0]] or 'a file'}")
        elif want_file and files[hits[0]] is not None:
            problems.append(f"{path} should be a file, is a symlink to {files[hits[0]]}")
    return problems


def compare(built: Built, record: dict[str, Any], facts: dict[str, str]) -> list[str]:
    """How one built package differs from its record (lacks listed in the record excepted)."""
    names = placeholders(built, facts)
    lacks = set(record.get("standin_lacks") or {})
    problems = []
    if (record.get("noarch")) != built.noarch:
        problems.append(f"noarch is {built.noarch}, conda-forge's {record.get('noarch')}")
    if "version" in record and not fnmatch.fnmatchcase(built.version, record["version"].format(**names)):
        problems.append(f"version is {built.version}, conda-forge's {record['version'].format(**names)}")
    if "build_number" in record and record["build_number"] != built.build_number:
        problems.append(f"build number is {built.build_number}, conda-forge's {record['build_number']}")
    if "build" in record and not fnmatch.fnmatchcase(built.build, record["build"].format(**names)):
        problems.append(f"build string {built.build} does not match conda-forge's {record['build'].format(**names)}")
    problems += file_problems(record.get("files", []), built.files, names, lacks)
    have = {" ".join(d.split()) for d in built.depends}
    want = {_spec(d, names) for d in record.get("depends", []) if d not in lacks}
    problems += [f"does not depend on {d}" for d in sorted(want - have)]
    if record.get("depends_exact"):
        problems += [f"depends on {d}, which conda-forge's does not" for d in sorted(have - want)]
    want_constrains = {_spec(c, names) for c in record.get("constrains", [])}
    have_constrains = {" ".join(c.split()) for c in built.constrains}
    if want_constrains != have_constrains:
        problems.append(f"constrains {sorted(have_constrains)}, conda-forge's {sorted(want_constrains)}")
    want_exports = {kind: sorted(_spec(s, names) for s in specs)
                    for kind, specs in (record.get("run_exports") or {}).items()}
    have_exports = {kind: sorted(" ".join(s.split()) for s in specs) for kind, specs in built.run_exports.items()}
    if want_exports != have_exports:
        problems.append(f"run_exports {have_exports}, conda-forge's {want_exports}")
    return problems


# The record is conda-forge's linux-64 packages: a channel's linux-aarch64 ones (cuda-cudart, python,
# ... under the same names, with sbsa-linux paths) are made by the same definitions, not checked here.
RECORDED_SUBDIRS = ("linux-64", "noarch")


def check_channel(channel: Path, record: dict[str, dict[str, Any]] | None = None,
                  packages: Sequence[Path] | None = None) -> list[str]:
    """Every difference between the channel's linux-64 and noarch packages (or those of `packages`: a run checks what
    it made, another Python's packages are their run's) and the record, one line each ("name version: ...")."""
    record = load_record() if record is None else record
    facts = channel_facts(channel)
    found = [p for p in (find_packages([channel]) if packages is None else packages) if p.parent.name in RECORDED_SUBDIRS]
    problems = []
    for name, entry in record.items():
        packages = [p for p in found if name_and_build_of(p.name)[0] == name]
        if not packages:
            problems.append(f"{name}: the channel has no such package")
        for package in packages:
            built = read_package(package)
            problems += [f"{name} {built.version}: {p}" for p in compare(built, entry, facts)]
    return problems
