"""ssm_conda.cli: one command, every subcommand with a useful --help, -v anywhere, one-line errors."""

from __future__ import annotations

import glob
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from ssm_conda import cli
from ssm_conda_dev import subcommand

from tests.repo import REPO_ROOT


def assert_every_subcommand_has_help(tool: cli.Tool, capsys: pytest.CaptureFixture[str]) -> None:
    """Help text in the list of commands, and each command's --help with a description (ssm-conda-dev's too)."""
    with pytest.raises(SystemExit) as exit_info:
        cli.parse_args(["--help"], tool)
    assert exit_info.value.code == 0
    top = capsys.readouterr().out
    for command in tool.commands:
        assert command.name in top and command.help.split()[0] in top
        with pytest.raises(SystemExit):
            cli.parse_args([command.name, "--help"], tool)
        text = capsys.readouterr().out
        assert text.startswith(f"usage: {tool.prog} {command.name}"), text[:200]
        assert "-v, --verbose" in text
        assert len(text.splitlines()) > 5, text  # a description, not a bare usage line


def test_every_subcommand_has_help_text_and_a_description(capsys):
    assert_every_subcommand_has_help(cli.SSM_CONDA, capsys)


@pytest.mark.parametrize("argv", [["-v", "plan"], ["plan", "-v"], ["plan", "--verbose"]])
def test_verbose_before_or_after_the_subcommand(argv):
    assert cli.parse_args(argv).verbose is True


def test_verbose_defaults_to_off():
    assert cli.parse_args(["plan"]).verbose is False


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bulid"], "invalid choice: 'bulid'"),
        (["build", "--cuda"], "expected one argument"),
        (["plan", "--no-such-option"], "unrecognized arguments: --no-such-option"),
        ([], "required: COMMAND"),
    ],
)
def test_bad_command_lines_are_one_line_and_exit_2(argv, message, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err


def test_the_module_runs_without_being_installed(tmp_path):
    """A GPU machine runs the tooling from a carried checkout: `ssm_conda_dev.subcommand` sets PYTHONPATH."""
    argv, env = subcommand("plan", "--cuda", "13.0", "--python", "3.12", "--torch", "2.13")
    assert argv[:3] == [sys.executable, "-m", "ssm_conda"]
    assert env["PYTHONPATH"].split(":")[0].endswith("/scripts")
    result = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "cuda130_cp312abi3_torch213_sm90_h" in result.stdout


def oldest_allowed_python() -> tuple[str, str]:
    """The oldest Python X.Y that pyproject.toml's requires-python allows, and an interpreter of it (on PATH or pyenv's)."""
    requires = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert (found := re.fullmatch(r">=(3\.\d+)", requires)), f"requires-python {requires!r}: this test reads >=3.X"
    version = found[1]
    pyenv = sorted(glob.glob(str(Path.home() / f".pyenv/versions/{version}.*/bin/python")))
    candidates = [shutil.which(f"python{version}"), *pyenv, f"/usr/bin/python{version}"]
    for python in filter(None, candidates):
        if subprocess.run([python, "-c", "import sys; print(sys.version)"], capture_output=True).returncode == 0:
            return version, python
    pytest.skip(f"no Python {version} on this machine (pyproject.toml's requires-python {requires}): install it, e.g. "
                f"with pyenv, to check that the tool runs there")


IMPORT_EVERY_MODULE = """
import importlib, pkgutil, ssm_conda
for module in pkgutil.walk_packages(ssm_conda.__path__, "ssm_conda."):
    if module.name not in ("ssm_conda.__main__", "ssm_conda.doctor.interpreter_probe"):  # scripts: run, not imported
        importlib.import_module(module.name)
        print(module.name)
"""


def test_the_tool_installs_and_runs_on_the_oldest_python_it_allows(tmp_path):
    """A plain install (pip install of a copy, not editable) under that Python: every module imports, every command's
    --help loads its module, plan renders, and doctor probes that Python. (upload's targets imported
    typing.dataclass_transform, which Python 3.10 lacks.) About 20 s with pip's cache."""
    version, python = oldest_allowed_python()
    source, venv = tmp_path / "source", tmp_path / "venv"
    source.mkdir()
    shutil.copy(REPO_ROOT / "pyproject.toml", source)
    shutil.copytree(REPO_ROOT / "scripts", source / "scripts", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "-q", str(source)], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr[-3000:]

    def tool(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)

    imported = tool(str(venv / "bin" / "python"), "-c", IMPORT_EVERY_MODULE)
    assert imported.returncode == 0, imported.stderr[-3000:]
    modules = {".".join(p.relative_to(REPO_ROOT / "scripts").with_suffix("").parts).removesuffix(".__init__")
               for p in (REPO_ROOT / "scripts" / "ssm_conda").rglob("*.py")}
    assert set(imported.stdout.split()) == modules - {"ssm_conda", "ssm_conda.__main__", "ssm_conda.doctor.interpreter_probe"}
    ssm_conda = str(venv / "bin" / "ssm-conda")
    for command in cli.COMMANDS:
        shown = tool(ssm_conda, command.name, "--help")
        assert shown.returncode == 0 and shown.stdout.startswith(f"usage: ssm-conda {command.name}"), shown.stderr[-3000:]
    planned = tool(ssm_conda, "plan", "--cuda", "13.0", "--python", "3.12", "--torch", "2.13", "--generation", "sm90")
    assert (planned.returncode, planned.stdout.splitlines()[-1:]) == (0, ["2 variant(s)"]), planned.stderr
    doctor = tool(ssm_conda, "doctor", "--json")
    assert doctor.returncode == 0, doctor.stderr[-3000:]
    assert json.loads(doctor.stdout)["facts"]["interpreter"]["version"].startswith(f"{version}.")


@pytest.mark.parametrize("from_variable", [False, True], ids=["--workspace", "variable"])
def test_a_bad_workspace_is_named_where_it_came_from(from_variable, tmp_path, monkeypatch, capsys):
    """--workspace, or SSM_CONDA_WORKSPACE when the value came from there: the user fixes the one they set."""
    monkeypatch.setenv(cli.WORKSPACE_ENV, str(tmp_path))
    assert cli.main(["plan"] if from_variable else ["plan", "--workspace", str(tmp_path)]) == 2
    name = cli.WORKSPACE_ENV if from_variable else "--workspace"
    assert capsys.readouterr().err == f"error: {name} {tmp_path}: not a causal-conv1d-conda checkout (no recipe/*/recipe.yaml " \
                                      "and variants/)\n"


def test_an_error_line_escapes_control_bytes(tmp_path, monkeypatch, capsys):
    """A hostile file name cannot clear the screen or start a second line of the error."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(["verify", "x\x1b[2J\ny\x9b.conda"]) == 2
    assert capsys.readouterr().err == "error: no such file or directory: x\\x1b[2J\\ny\\x9b.conda\n"
