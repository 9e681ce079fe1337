"""recipe/causal-conv1d/tests/conftest.py: which of upstream's tests run, and the REQUIRE_GPU flag.
(Skipping without a GPU, for both packages: tests/recipe/test_gpu_tests_skip.py.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.recipe.causal_conv1d.recipe_modules import load_recipe_module

conftest = load_recipe_module("conftest")

pytestmark = pytest.mark.skipif(
    bool(conftest.driver_gpus()), reason="this machine has an NVIDIA GPU: the no-GPU behaviour cannot be shown"
)


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


@pytest.mark.parametrize(("platform", "gpu_required", "ignored"), [
    ("linux", False, True), ("linux", True, False), ("win32", True, True), ("win32", False, True)])
def test_upstream_s_file_without_triton_is_left_out_where_no_gpu_is_required_and_on_windows(
        monkeypatch, tmp_path, platform, gpu_required, ignored):
    """Where a GPU is required, a missing import fails the run (a broken install), but conda-forge has no triton for
    Windows at all: there upstream's file is left out, which the summary says."""
    monkeypatch.setattr(conftest, "_upstream_missing", lambda: "triton")
    monkeypatch.setattr(conftest, "gpu_required", lambda: gpu_required)
    monkeypatch.setattr(conftest.sys, "platform", platform)
    assert bool(conftest.pytest_ignore_collect(tmp_path / conftest.UPSTREAM_FILE, None)) is ignored
    assert conftest.pytest_ignore_collect(tmp_path / "test_kernels.py", None) is None

