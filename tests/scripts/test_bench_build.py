"""scripts/bench_build.py: bad input fails before any build starts (the benchmark itself is real builds)."""

import subprocess
import sys

import pytest

from scripts.common import REPO_ROOT


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["cache", "--channel", "/no/such/channel"], "error: channel '/no/such/channel' is not a channel name"),
        (["cache", "--channel", "conda-forge", "--python-b", "3"], "error: unknown Python version '3'"),
        (["archs", "--channel", "conda-forge", "--cuda", "11.8"], "error: unknown CUDA version '11.8'"),
        (["archs", "--channel", "conda-forge", "--arch", "sm_90"], "error: unknown architecture 'sm_90'"),
    ],
)
def test_bad_input_exits_2_before_building(args, message):
    result = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "bench_build.py"), *args],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith(message), result.stderr
    assert "==" not in result.stdout  # no build was started
