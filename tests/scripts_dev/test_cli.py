"""ssm_conda_dev.cli: ssm-conda-dev's commands, apart from ssm-conda's, parsed and run by ssm_conda.cli's machinery."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from ssm_conda import cli
from ssm_conda_dev import cli as dev_cli

from tests.repo import REPO_ROOT
from tests.scripts.test_cli import assert_every_subcommand_has_help

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


def test_every_subcommand_has_help_text_and_a_description(capsys):
    assert_every_subcommand_has_help(dev_cli.SSM_CONDA_DEV, capsys)


def test_a_channel_maintainers_commands_apart_from_the_development_tools(capsys):
    """ssm-conda is what a channel maintainer runs; the CI matrix, the stand-in, sync-matrix and the benchmarks are
    ssm-conda-dev's."""
    user, dev = {c.name for c in cli.COMMANDS}, {c.name for c in dev_cli.COMMANDS}
    assert user == {"plan", "build", "verify", "doctor", "upload"}
    assert dev == {"ci-matrix", "sync-matrix", "standin", "bench-build", "bench-zstd", "gpu-test", "gpu-bundle", "bench-kernels"}
    assert cli.main(["standin"]) == 2
    assert "invalid choice: 'standin'" in capsys.readouterr().err
    assert dev_cli.main(["plan"]) == 2
    assert all(c.module.startswith("ssm_conda_dev.") for c in dev_cli.COMMANDS)


def test_the_console_script_and_the_module_are_ssm_conda_dev(tmp_path):
    """pyproject's ssm-conda-dev (pixi's tasks, CI) and `python -m ssm_conda_dev` (the tests) both reach it,
    from any folder; the stand-in's recipes and conda-forge record ship with the package that reads them."""
    assert PYPROJECT["project"]["scripts"]["ssm-conda-dev"] == "ssm_conda_dev.cli:entry"
    result = subprocess.run([sys.executable, "-m", "ssm_conda_dev", "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: ssm-conda-dev ") and "standin" in result.stdout
    standin = REPO_ROOT / "scripts" / "ssm_conda_dev" / "standin"
    shipped = PYPROJECT["tool"]["setuptools"]["package-data"]["ssm_conda_dev.standin"]
    data = [p.relative_to(standin) for p in standin.rglob("*") if p.is_file() and "__pycache__" not in p.parts
            and not (p.suffix == ".py" and (p.parent / "__init__.py").exists())]
    assert len(data) > 30 and [p for p in data if not any(p.match(glob) for glob in shipped)] == []
