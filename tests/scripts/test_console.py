"""ssm_conda.console: the exit that skips interpreter finalization still flushes and keeps the status."""

import subprocess
import sys

from tests.repo import REPO_ROOT


def test_exit_without_finalizing_flushes_and_keeps_the_status():
    code = ("import atexit, sys; from ssm_conda.console import exit_without_finalizing; "
            "atexit.register(lambda: print('finalized')); "
            "print('out', end=''); print('err', end='', file=sys.stderr); exit_without_finalizing(3)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (3, "out", "err")  # no atexit: not finalized
