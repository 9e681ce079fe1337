"""ssm_conda.selection: one set of selector flags for plan, build, upload and ssm-conda-dev gpu-test (which built packages a
selection chooses: tests/scripts/test_matrix.py)."""

from __future__ import annotations

import argparse

import pytest
from ssm_conda import cli
from ssm_conda.selection import without_hash
from ssm_conda_dev import cli as dev_cli

SELECTORS = {"--package", "--cuda", "--python", "--torch", "--generation", "--arch"}


def options(argv: list[str]) -> set[str]:
    parser = cli.build_parser(argv, dev_cli.SSM_CONDA_DEV if argv[0] == "gpu-test" else cli.SSM_CONDA)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[argv[0]]
    if argv[0] == "upload":  # the flags stand before and after the target, once each
        sub = next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction)).choices["prefix"]
    return {flag for action in sub._actions for flag in action.option_strings}


@pytest.mark.parametrize("command", ["plan", "build", "upload", "gpu-test"])
def test_every_command_that_selects_takes_the_same_selectors(command):
    assert SELECTORS <= options([command])


def test_without_hash():
    assert without_hash("cuda130_py312_torch213_sm90_h1a2b3c4_0") == "cuda130_py312_torch213_sm90"
