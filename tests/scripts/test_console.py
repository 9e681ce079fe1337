"""ssm_conda.console: the exit that skips interpreter finalization still flushes and keeps the status; a summary
row's result is one of the known states."""

import subprocess
import sys

import pytest
from ssm_conda.console import Outcome

from tests.repo import REPO_ROOT


def test_exit_without_finalizing_flushes_and_keeps_the_status():
    code = ("import atexit, sys; from ssm_conda.console import exit_without_finalizing; "
            "atexit.register(lambda: print('finalized')); "
            "print('out', end=''); print('err', end='', file=sys.stderr); exit_without_finalizing(3)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (3, "out", "err")  # no atexit: not finalized


def test_a_result_is_one_of_the_known_states():
    outcome = Outcome("causal-conv1d", result="ok")
    outcome.result = "failed"
    assert outcome.failed
    with pytest.raises(ValueError, match=r"unknown result 'sucess'; accepted: pending, ok, "):
        outcome.result = "sucess"  # type: ignore[assignment]
    with pytest.raises(ValueError, match=r"unknown result 'done'"):
        Outcome("mamba-ssm", result="done")  # type: ignore[arg-type]
