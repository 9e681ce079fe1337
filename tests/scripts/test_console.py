"""ssm_conda.console: the exit that skips interpreter finalization still flushes and keeps the status; a summary
row's result is one of the known states; a path from the user is one the system takes."""

import pwd
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ssm_conda.console import Outcome, UsageError, user_path

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


def test_user_path_expands_home_and_refuses_what_the_system_would(monkeypatch, tmp_path):
    """~ and ~USER expanded; a ~USER of no user, a path of 4096 bytes or more, or a name over 255 bytes (non-ASCII
    counts its UTF-8 bytes) is a UsageError naming the value (the first 60 characters of a long one)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    assert user_path("~/x", "--output-dir") == tmp_path / "x"
    assert user_path("~root/x", "--output-dir") == Path(pwd.getpwnam("root").pw_dir, "x")
    assert user_path("a/~b", "channel") == Path("a/~b")
    with pytest.raises(UsageError, match=r"^channel ~nobody_here/chan: no user 'nobody_here' here; accepted: a path, ~/"):
        user_path("~nobody_here/chan", "channel")
    longest = "/".join(["d" * 255] * 16)[:4095]  # the limits themselves pass
    assert user_path(longest, "package") == Path(longest)
    for value, length in [(longest + "d", 4096), ("n" * 256, 256), ("x/" + "é" * 128, 130)]:
        with pytest.raises(UsageError, match=rf"^package {re.escape(value[:60])}\.\.\. is too long \({length} characters; "
                                             r"the limit is 4096, 255 per name\)$"):
            user_path(value, "package")
