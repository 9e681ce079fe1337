"""recipe/causal-conv1d/tests on a machine without a GPU: every GPU test skips with the reason, or fails when required.

Runs pytest on recipe/causal-conv1d/tests in a subprocess with this Python (with or without torch: the reason
differs, the outcome must not). Also the upstream-subset selection of recipe/causal-conv1d/tests/conftest.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.recipe.causal_conv1d.recipe_modules import RECIPE_TESTS, load_recipe_module

conftest = load_recipe_module("conftest")

pytestmark = pytest.mark.skipif(
    bool(conftest.driver_gpus()), reason="this machine has an NVIDIA GPU: the no-GPU behaviour cannot be shown"
)


def run_recipe_tests(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CAUSAL_CONV1D_")}
    environ.update(env, PYTHONDONTWRITEBYTECODE="1")
    # -m "not cpu": the CPU-side arch tests need the installed extension (the package's test env).
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-m", "not cpu",
         "--rootdir", str(RECIPE_TESTS), "-c", os.devnull, str(RECIPE_TESTS)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=environ,
    )


def test_every_gpu_test_skips_with_the_reason(tmp_path):
    result = run_recipe_tests(tmp_path)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    summary = re.search(r"(\d+) skipped", out)
    assert summary and int(summary.group(1)) >= 360, out
    assert not re.search(r"\d+ (passed|failed|error)", out), out
    assert "causal-conv1d GPU (optional): NOT usable:" in out
    assert conftest.SKIP_MARKER in out
    reasons = re.findall(r"SKIPPED \[\d+\] .*: no usable GPU: (.+)", out)
    assert reasons and all(r == reasons[0] for r in reasons), out
    assert re.search(r"no NVIDIA driver|torch is not importable|not a CUDA build|sees no CUDA device", reasons[0])


def test_required_gpu_turns_skips_into_failures(tmp_path):
    result = run_recipe_tests(tmp_path, CAUSAL_CONV1D_REQUIRE_GPU="1")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "causal-conv1d GPU (required)" in out
    assert conftest.REQUIRED_MARKER in out
    assert "skipped" not in out.splitlines()[-1], out


def _item(name, **params):
    return SimpleNamespace(name=name, originalname=name, callspec=SimpleNamespace(params=params))


def test_upstream_subset_selection(monkeypatch):
    monkeypatch.delenv("CAUSAL_CONV1D_UPSTREAM", raising=False)
    select = conftest._upstream_selected
    base = dict(dim=4128, seqlen=130, width=4, has_bias=True, silu_activation=True, itype="torch.bfloat16",
                channel_last=True, has_initial_states=False, return_final_states=False)
    assert select(_item("test_causal_conv1d", **base))
    assert not select(_item("test_causal_conv1d", **{**base, "dim": 64}))
    assert not select(_item("test_causal_conv1d", **{**base, "seqlen": 2048}))
    assert not select(_item("test_causal_conv1d", **{**base, "has_bias": False}))  # tied to silu
    assert not select(_item("test_causal_conv1d", **{**base, "has_initial_states": True}))
    assert select(_item("test_causal_conv1d", **{**base, "has_initial_states": True, "return_final_states": True}))
    assert select(_item("test_causal_conv1d_ref_varlen_initial_states"))
    assert not select(_item("test_causal_conv1d_race_condition", seqlen=2048))
    assert not select(_item("test_some_new_upstream_test"))
    monkeypatch.setenv("CAUSAL_CONV1D_UPSTREAM", "full")
    assert select(_item("test_causal_conv1d", **{**base, "dim": 64}))
    assert not select(_item("test_causal_conv1d_race_condition", seqlen=2048))


def test_require_flag_parsing(monkeypatch):
    monkeypatch.setenv("CAUSAL_CONV1D_REQUIRE_GPU", "1")
    assert conftest.gpu_required()
    monkeypatch.setenv("CAUSAL_CONV1D_REQUIRE_GPU", "0")
    assert not conftest.gpu_required()
    monkeypatch.delenv("CAUSAL_CONV1D_REQUIRE_GPU")
    assert conftest.gpu_required() is False  # no driver here (module skip otherwise)
