"""Repository-level facts: pins agree, CI runs the README's test command, nothing generated is tracked."""

import re
import subprocess
import tomllib

from ssm_conda.paths import REPO_ROOT


def requirements() -> dict[str, str]:
    """requirements.txt as {name: version spec}."""
    pins = {}
    for line in (REPO_ROOT / "requirements.txt").read_text().splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*([<>=!~][^#]*?)\s*(#.*)?", line.strip())
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def test_pixi_and_requirements_pin_the_same_tooling():
    pixi = tomllib.loads((REPO_ROOT / "pixi.toml").read_text())
    wanted = requirements()
    wanted.pop("pyyaml")  # a conda dependency in pixi.toml
    assert pixi["pypi-dependencies"] == wanted
    assert "pyyaml" in pixi["dependencies"]


def test_pixi_tasks_have_descriptions():
    pixi = tomllib.loads((REPO_ROOT / "pixi.toml").read_text())
    tasks = dict(pixi["tasks"])
    for feature in pixi.get("feature", {}).values():
        tasks.update(feature.get("tasks", {}))
    assert {"build", "plan", "test", "lint"} <= set(tasks)
    for name, task in tasks.items():
        assert task.get("description"), name


def test_ci_runs_the_readme_test_command():
    readme = (REPO_ROOT / "README.md").read_text()
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    command = "python -m pytest --slow"
    assert command in readme and command in ci


def test_no_build_outputs_tracked():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    assert not re.search(r"\.(conda|whl|tar\.gz|tar\.bz2)$", tracked, re.M)
