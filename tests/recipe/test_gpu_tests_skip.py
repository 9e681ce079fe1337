"""Each package's tests (recipe/<package>/tests) on a machine without a GPU: every GPU test skips with
the reason, or fails when a GPU is required. The gating is recipe/shared/tests/gpu_gate.py.

Runs pytest on the package's tests in a subprocess with this Python (with or without torch: the
reason differs, the outcome must not). `-m "not cpu"`: the CPU-side tests need the installed
extension (the package's test environment).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.recipe.causal_conv1d.recipe_modules import SHARED_TESTS, load_recipe_module
from tests.repo import RECIPES_DIR

gpu_gate = load_recipe_module("gpu_gate", SHARED_TESTS)
pytestmark = pytest.mark.skipif(
    bool(gpu_gate.driver_gpus()), reason="this machine has an NVIDIA GPU: the no-GPU behaviour cannot be shown"
)
# package, its environment variables' prefix, how many GPU tests it has at least
PACKAGES = [("causal-conv1d", "CAUSAL_CONV1D_", 360), ("mamba-ssm", "MAMBA_SSM_", 30)]


def run_recipe_tests(package: str, prefix: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    tests = RECIPES_DIR / package / "tests"
    environ = {k: v for k, v in os.environ.items() if not k.startswith(prefix)}
    environ.update(env, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-m", "not cpu",
         "--rootdir", str(tests), "-c", os.devnull, str(tests)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=environ,
    )


@pytest.mark.parametrize(("package", "prefix", "at_least"), PACKAGES)
def test_every_gpu_test_skips_with_the_reason(package, prefix, at_least, tmp_path):
    result = run_recipe_tests(package, prefix, tmp_path)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    summary = re.search(r"(\d+) skipped", out)
    assert summary and int(summary.group(1)) >= at_least, out
    assert not re.search(r"\d+ (passed|failed|error)", out), out
    assert f"{package} GPU (optional): NOT usable:" in out
    assert f"{package} GPU tests skipped:" in out
    reasons = re.findall(r"SKIPPED \[\d+\] .*: no usable GPU: (.+)", out)
    assert reasons and all(r == reasons[0] for r in reasons), out
    assert re.search(r"no NVIDIA driver|torch is not importable|not a CUDA build|sees no CUDA device", reasons[0])


@pytest.mark.parametrize(("package", "prefix", "at_least"), PACKAGES)
def test_required_gpu_turns_skips_into_failures(package, prefix, at_least, tmp_path):
    result = run_recipe_tests(package, prefix, tmp_path, **{f"{prefix}REQUIRE_GPU": "1"})
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert f"{package} GPU (required)" in out
    assert f"{package} GPU required but unusable:" in out
    assert "skipped" not in out.splitlines()[-1], out
