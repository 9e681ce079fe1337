"""The bounded subset of upstream's tests/test_causal_conv1d.py, collected from the real file.

The package's test section copies upstream's test file next to recipe/causal-conv1d/tests, and
recipe/causal-conv1d/tests/conftest.py keeps only UPSTREAM_SUBSET of its ~10,000 cases. Here the same layout is
collected (no GPU is needed to collect) under upstream's real Python interface and the CPU
stand-in extension, and the selection is checked against what upstream's file really
parametrizes, so that a new sdist cannot silently widen, empty or bypass the subset:

* every rule names a test, a parameter and values that exist upstream, and selects cases;
* every upstream test is either in the subset or explicitly never run (the race test);
* the subset is the size docs/testing.md states, and `CAUSAL_CONV1D_UPSTREAM=full` takes all but the
  race test.

Collecting upstream's file needs einops and triton (causal_conv1d_varlen imports it), as on a GPU
machine; requirements-dev.txt has both.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from ssm_conda.matrix import rendered_recipe
from ssm_conda.paths import recipe_of

from tests.recipe.causal_conv1d.recipe_modules import load_recipe_module
from tests.repo import REPO_ROOT

# Written next to the copied tests and loaded with -p: records every collected upstream case
# (name, parameters as strings) and whether the conftest kept it.
RECORDER = '''
import json, os

_deselected = []

def pytest_deselected(items):
    _deselected.extend(items)

def _case(item):
    params = item.callspec.params if hasattr(item, "callspec") else {}
    return {"name": item.originalname, "params": {k: str(v) for k, v in params.items()}}

def pytest_collection_finish(session):
    upstream = lambda item: item.path.name == "test_causal_conv1d.py"
    record = {"selected": [_case(i) for i in session.items if upstream(i)],
              "deselected": [_case(i) for i in _deselected if upstream(i)],
              "ours": sum(1 for i in session.items if not upstream(i))}
    with open(os.environ["RECORD_FILE"], "w") as f:
        json.dump(record, f)
'''


conftest = load_recipe_module("conftest")


def lay_out_test_files(source_root: Path, work: Path) -> None:
    """The files of recipe.yaml's script test, where rattler-build puts them: `files.recipe` from the
    recipe folder, `files.source` from the patched sdist or from the path source that provides them."""
    recipe = rendered_recipe("causal-conv1d")
    (files,) = [t["files"] for t in recipe["tests"] if "files" in t]  # the pytest script's
    recipe_dir = recipe_of("causal-conv1d").parent
    roots = {s["target_directory"].rstrip("/") + "/": recipe_dir / s["path"] for s in recipe["source"] if "path" in s}
    wanted = [(recipe_dir / name, name) for name in files.get("recipe", [])]
    for name in files.get("source", []):
        prefix = next((p for p in roots if name.startswith(p)), None)
        wanted.append((roots[prefix] / name.removeprefix(prefix) if prefix else source_root / name, name))
    for src, name in wanted:
        dst = work / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst)


def collect(tmp: Path, source_root: Path, sys_path: list[Path], **env: str) -> dict:
    """pytest --collect-only over the package's test layout: recipe/causal-conv1d/tests + upstream's file in tests/."""
    for module in ("einops", "triton"):
        assert importlib.util.find_spec(module), f"collecting upstream's tests needs {module} (requirements-dev.txt)"
    work = tmp / "test"
    lay_out_test_files(source_root, work)
    assert (work / "tests" / conftest.UPSTREAM_FILE).is_file(), sorted(work.rglob("*.py"))
    (work / "subset_recorder.py").write_text(RECORDER)
    record = tmp / "record.json"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CAUSAL_CONV1D_")}
    environ.update(env, RECORD_FILE=str(record), PYTHONDONTWRITEBYTECODE="1",
                   PYTHONPATH=os.pathsep.join(str(p) for p in [work, *sys_path]))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "subset_recorder", "--collect-only", "-q",
         "--rootdir", str(work), "-c", os.devnull, "tests/"],
        capture_output=True, text=True, timeout=300, cwd=work, env=environ,
    )
    assert result.returncode == 0 and record.is_file(), result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(record.read_text())


@pytest.fixture(scope="module")
def source_root(cpu_causal_conv1d) -> Path:
    return cpu_causal_conv1d[-1]  # the sdist (the CPU stand-in comes first)


@pytest.fixture(scope="module")
def subset(tmp_path_factory, source_root, cpu_causal_conv1d) -> dict:
    return collect(tmp_path_factory.mktemp("subset"), source_root, cpu_causal_conv1d)


def upstream_parameters(record: dict) -> dict[str, dict[str, set[str]]]:
    """{upstream test: {parameter: values}} over every collected case, kept or not."""
    params: dict[str, dict[str, set[str]]] = {}
    for case in record["selected"] + record["deselected"]:
        test = params.setdefault(case["name"], {})
        for key, value in case["params"].items():
            test.setdefault(key, set()).add(value)
    return params


def test_every_rule_names_what_upstream_has(subset):
    upstream = upstream_parameters(subset)
    for name, rules in conftest.UPSTREAM_SUBSET.items():
        assert name in upstream, f"UPSTREAM_SUBSET names {name}, which upstream's file no longer has"
        for key, allowed in rules.items():
            groups = allowed if key == conftest._F else [(key,)]
            for parameter in (p for group in groups for p in group):
                assert parameter in upstream[name], f"{name} has no parameter {parameter!r}: {sorted(upstream[name])}"
            if key != conftest._F:
                missing = {str(v) for v in allowed} - upstream[name][key]
                assert not missing, f"{name}[{key}] values {missing} are not upstream's {sorted(upstream[name][key])}"


def test_every_upstream_test_is_decided(subset):
    """A test upstream adds must be put in the subset (or excluded) on purpose, not dropped silently."""
    upstream = set(upstream_parameters(subset))
    undecided = upstream - set(conftest.UPSTREAM_SUBSET) - conftest.UPSTREAM_NEVER
    assert not undecided, f"upstream tests neither in UPSTREAM_SUBSET nor UPSTREAM_NEVER: {sorted(undecided)}"
    assert conftest.UPSTREAM_NEVER <= upstream


def test_the_subset_is_bounded_and_covers_every_rule(subset):
    selected = Counter(case["name"] for case in subset["selected"])
    total = sum(selected.values()) + len(subset["deselected"])
    print(f"upstream subset: {sum(selected.values())} of {total} cases; per test: {dict(selected)}")
    assert set(selected) == set(conftest.UPSTREAM_SUBSET), selected
    assert not selected.keys() & conftest.UPSTREAM_NEVER
    # The figure docs/testing.md gives for the subset, and the whole file is ~10,000 cases.
    readme = (REPO_ROOT / "docs" / "testing.md").read_text()
    stated = re.search(r"(\d+)-case subset of\s+upstream's own", readme)
    assert stated and int(stated.group(1)) == sum(selected.values()), (stated and stated.group(0), selected)
    assert total > 10 * sum(selected.values())
    assert subset["ours"] >= 360  # recipe/causal-conv1d/tests beside it are collected too


def test_full_mode_takes_all_but_the_race_test(tmp_path, source_root, cpu_causal_conv1d, subset):
    full = collect(tmp_path, source_root, cpu_causal_conv1d, CAUSAL_CONV1D_UPSTREAM="full")
    dropped = {case["name"] for case in full["deselected"]}
    assert dropped == conftest.UPSTREAM_NEVER, dropped
    assert len(full["selected"]) + len(full["deselected"]) == len(subset["selected"]) + len(subset["deselected"])
