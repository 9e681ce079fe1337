"""tests/conda_forge_records.yaml (conda-forge's records of what pixi.toml asks for, from the feedstocks) written as
a local channel: one repodata.json per subdir, which py-rattler and conda solve from. Its win-64 subdir is
tests/win64_records.yaml's (win64_standin: conda-forge's win-64 records, read from the feedstocks alike), whose
noarch records join the channel's where this file records no package of that name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

RECORDS = Path(__file__).with_name("conda_forge_records.yaml")
SUBDIRS = ("linux-64", "linux-aarch64", "win-64")


def expanded(name: str, record: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(subdir, repodata record) of one record of the file: one per subdir and Python it is built for."""
    found = []
    for subdir in record.get("subdirs", ["noarch"]):
        for python in record.get("pythons", [None]):
            fill = {"sub": subdir, "py_nodot": python.replace(".", "") if python else ""}
            aarch64 = record.get("aarch64", []) if subdir == "linux-aarch64" else []
            depends = [d.format(**fill) for d in [*record.get("depends", []), *aarch64]]
            if python:
                major, minor = python.split(".")
                depends += [f"python >={python},<{major}.{int(minor) + 1}.0a0", f"python_abi {python}.* *_cp{major}{minor}"]
            entry = {"name": name.format(**fill), "version": record["version"], "build": record["build"].format(**fill),
                     "build_number": record["build_number"], "depends": depends, "subdir": subdir,
                     "constrains": [c.format(**fill) for c in record.get("constrains", [])]}
            if subdir == "noarch":
                entry["noarch"] = "python" if any(d.split()[0] == "python" for d in depends) else "generic"
            found.append((subdir, entry))
    return found


def records() -> dict[str, dict[str, dict[str, Any]]]:
    """subdir -> file name -> repodata record, of every record of the file, and of tests/win64_records.yaml: all its
    win-64 records, and its noarch ones of the packages the file does not record (python_abi, cuda-version,
    setuptools and wheel stay the file's, as the Linux solves have always had them)."""
    from tests import win64_standin  # here: win64_standin imports write_channel from this module

    by_subdir: dict[str, dict[str, Any]] = {s: {} for s in (*SUBDIRS, "noarch")}
    for name, package in yaml.safe_load(RECORDS.read_text()).items():
        for record in package["records"]:
            for subdir, entry in expanded(name, record):
                by_subdir[subdir][f"{entry['name']}-{entry['version']}-{entry['build']}.conda"] = entry
    recorded = {r["name"] for packages in by_subdir.values() for r in packages.values()}
    for entry in (e["repodata"] for e in win64_standin.entries()):
        if entry["subdir"] == "win-64" or entry["name"] not in recorded:
            by_subdir[entry["subdir"]][f"{entry['name']}-{entry['version']}-{entry['build']}.conda"] = entry
    return by_subdir


def write_channel(folder: Path, by_subdir: dict[str, dict[str, dict[str, Any]]] | None = None) -> str:
    """The records (default: the file's) as a channel in `folder`, as a file:// URL."""
    for subdir, packages in (by_subdir or records()).items():
        (folder / subdir).mkdir(parents=True, exist_ok=True)
        (folder / subdir / "repodata.json").write_text(json.dumps({"info": {"subdir": subdir}, "packages": {},
                                                                    "packages.conda": packages}, indent=1))
    return folder.as_uri()
