"""ssm-conda: build, test and publish conda packages of Mamba's CUDA kernels (causal-conv1d, mamba-ssm).

The tools for developing this project are a command of their own, `ssm-conda-dev`. Every subcommand takes -v/--verbose,
before or after its name; `ssm-conda COMMAND --help` says what it does and what it accepts. Bad input is one line on
stderr naming the value and what is accepted, with exit status 2, and nothing is written."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ssm_conda.console import ArgumentParser, PipelineError, UsageError, exit_without_finalizing, user_path
from ssm_conda.paths import choose_workspace

WORKSPACE_ENV = "SSM_CONDA_WORKSPACE"


@dataclass(frozen=True)
class Command:
    name: str
    module: str  # defines configure(parser) and run(args), or the names below
    help: str
    configure: str = "configure"
    run: str = "run"


COMMANDS = (
    Command("plan", "ssm_conda.build", "print the variant matrix as rattler-build renders it; builds nothing",
            "configure_plan", "run_plan"),
    Command("build", "ssm_conda.build", "build the selected variants into the output channel"),
    Command("doctor", "ssm_conda.doctor.command", "which package fits this machine (driver, GPUs, torch), and how to get it"),
    Command("upload", "ssm_conda.upload.command", "upload the output channel's packages to prefix.dev, anaconda.org, "
            "Quetz, Artifactory or S3"),
    Command("verify", "ssm_conda.verify", "rebuild packages from the recipe and environments they record and compare "
            "them byte for byte"),
)


@dataclass(frozen=True)
class Tool:  # a console script: ssm-conda, or ssm-conda-dev on the same parser
    prog: str
    description: str  # the top of its --help
    commands: tuple[Command, ...]


SSM_CONDA = Tool("ssm-conda", __doc__ or "", COMMANDS)


def _common(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """-v and --workspace, before or after the command name."""
    parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS if suppress else False,
                        help="more output (full logs, every step)")
    parser.add_argument("--workspace", type=Path, metavar="DIR", default=argparse.SUPPRESS if suppress else None,
                        help=f"the checkout holding recipe/ and variants/ (default: ${WORKSPACE_ENV}, else the "
                             "nearest one at or above the current directory)")


def build_parser(argv: Sequence[str] = (), tool: Tool = SSM_CONDA) -> argparse.ArgumentParser:
    """The whole command line; only the module of the subcommand named in argv is imported (startup
    stays quick, and a GPU machine timing kernels needs neither rattler-build nor torch's build tools)."""
    parser = ArgumentParser(prog=tool.prog, description=tool.description, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(parser, suppress=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = next((a for a in argv if any(c.name == a for c in tool.commands)), None)
    for command in tool.commands:
        child = sub.add_parser(command.name, help=command.help, formatter_class=argparse.RawDescriptionHelpFormatter)
        # SUPPRESS: a -v given before the command name is not reset by the subcommand's default
        _common(child, suppress=True)
        child.set_defaults(_command=command)
        if command.name == wanted:
            module = importlib.import_module(command.module)
            child.description = module.__doc__
            getattr(module, command.configure)(child)
    return parser


def parse_args(argv: Sequence[str] | None, tool: Tool = SSM_CONDA) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    return build_parser(argv, tool).parse_args(argv)


def main(argv: Sequence[str] | None = None, tool: Tool = SSM_CONDA) -> int:
    """Parse and run one subcommand; returns the exit status (tests call this), our errors one line on stderr, escaped."""
    try:
        parsed = parse_args(argv, tool)
        for name, value in ((n, v) for n, v in vars(parsed).items() if isinstance(v, Path)):  # each path option, checked first
            user_path(value, "--" + name.replace("_", "-"))
        if chosen := parsed.workspace or os.environ.get(WORKSPACE_ENV):
            choose_workspace(chosen, "--workspace" if parsed.workspace else WORKSPACE_ENV)
        command: Command = parsed._command
        return getattr(importlib.import_module(command.module), command.run)(parsed)
    except (UsageError, PipelineError) as exc:
        print("error: " + "".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(exc)), file=sys.stderr)
        return 2 if isinstance(exc, UsageError) else 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def entry() -> None:
    """The console script: py-rattler's threads must not see the interpreter finalize."""
    exit_without_finalizing(main(sys.argv[1:]))
