"""recipe/mamba-ssm/tests on a machine without a GPU: every GPU test skips with the reason, or fails when required.

The gating is recipe/shared/tests/gpu_gate.py, shared with causal-conv1d (MAMBA_SSM_ variables here).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ssm_conda.paths import RECIPES_DIR

RECIPE_TESTS = RECIPES_DIR / "mamba-ssm" / "tests"
sys.path.insert(0, str(RECIPES_DIR / "shared" / "tests"))
import gpu_gate  # noqa: E402

pytestmark = pytest.mark.skipif(
    bool(gpu_gate.driver_gpus()), reason="this machine has an NVIDIA GPU: the no-GPU behaviour cannot be shown"
)


def run_recipe_tests(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MAMBA_SSM_")}
    environ.update(env, PYTHONDONTWRITEBYTECODE="1")
    # -m "not cpu": the construct test needs mamba_ssm installed (the package's test env).
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-m", "not cpu",
         "--rootdir", str(RECIPE_TESTS), "-c", os.devnull, str(RECIPE_TESTS)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=environ,
    )


def test_every_gpu_test_skips_with_the_reason(tmp_path):
    out = (result := run_recipe_tests(tmp_path)).stdout + result.stderr
    assert result.returncode == 0, out
    summary = re.search(r"(\d+) skipped", out)
    assert summary and int(summary.group(1)) >= 30, out
    assert not re.search(r"\d+ (passed|failed|error)", out), out
    assert "mamba-ssm GPU (optional): NOT usable:" in out
    assert "mamba-ssm GPU tests skipped:" in out
    reasons = re.findall(r"SKIPPED \[\d+\] .*: no usable GPU: (.+)", out)
    assert reasons and all(r == reasons[0] for r in reasons), out


def test_required_gpu_turns_skips_into_failures(tmp_path):
    out = (result := run_recipe_tests(tmp_path, MAMBA_SSM_REQUIRE_GPU="1")).stdout + result.stderr
    assert result.returncode == 1, out
    assert "mamba-ssm GPU (required)" in out
    assert "mamba-ssm GPU required but unusable:" in out
    assert "skipped" not in out.splitlines()[-1], out
