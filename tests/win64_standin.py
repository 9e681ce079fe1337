"""tests/win64_records.yaml (a metadata-only win-64 stand-in of conda-forge) as a local channel, one repodata.json per
subdir, and the run_exports of its records, which repodata does not carry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.conda_forge_records import write_channel

RECORDS = Path(__file__).with_name("win64_records.yaml")
SUBDIRS = ("win-64", "noarch")


def flat(items: list[Any]) -> list[str]:
    """A record's list with the lists spliced into it by YAML aliases made flat."""
    return [x for item in items for x in (flat(item) if isinstance(item, list) else [item])]


def expanded(name: str, record: dict[str, Any]) -> list[dict[str, Any]]:
    """The repodata records of one record of the file (one per Python of `pythons`), each with its run_exports."""
    found = []
    for python in record.get("pythons", [None]):
        fill = {}
        if python:
            major, minor = python.split(".")
            fill = {"py": python, "py_nodot": f"{major}{minor}", "py_next": f"{major}.{int(minor) + 1}"}
        entry = {"name": name, "version": record["version"], "build": record["build"].format(**fill),
                 "build_number": record["build_number"], "subdir": record["subdir"],
                 "depends": [d.format(**fill) for d in flat(record.get("depends", []))],
                 "constrains": [c.format(**fill) for c in flat(record.get("constrains", []))]}
        if record["subdir"] == "noarch":
            entry["noarch"] = record.get("noarch", "generic")
        if "track_features" in record:
            entry["track_features"] = record["track_features"]
        exports = {kind: [s.format(**fill) for s in specs] for kind, specs in record.get("run_exports", {}).items()}
        found.append({"repodata": entry, "run_exports": exports, "stub": record.get("stub", False)})
    return found


def entries() -> list[dict[str, Any]]:
    """Every record of the file: {"repodata": the repodata.json record, "run_exports": {kind: specs}, "stub": bool}."""
    return [e for name, package in yaml.safe_load(RECORDS.read_text()).items()
            for record in package["records"] for e in expanded(name, record)]


def write(folder: Path, records: list[dict[str, Any]]) -> str:
    """The records as a channel in `folder` (win-64 and noarch), as a file:// URL."""
    by_subdir: dict[str, dict[str, Any]] = {s: {} for s in SUBDIRS}
    for e in records:
        r = e["repodata"]
        by_subdir[r["subdir"]][f"{r['name']}-{r['version']}-{r['build']}.conda"] = r
    return write_channel(folder, by_subdir)


def run_exports(records: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, list[str]]]:
    """(name, version, build) -> the record's run_exports ({"weak": [...], "strong": [...]})."""
    return {(e["repodata"]["name"], e["repodata"]["version"], e["repodata"]["build"]): e["run_exports"] for e in records}
