"""ssm_conda.cli: one command, every subcommand with a useful --help, -v anywhere, one-line errors."""

from __future__ import annotations

import subprocess
import sys

import pytest
from ssm_conda import cli
from ssm_conda_dev import subcommand


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
    assert "cuda130_py312_torch213_sm90_h" in result.stdout
