"""recipe/mamba-ssm/tests/test_transformers.py run on the CPU against stand-ins: the tests themselves work.

As test_kernels_dry_run.py: upstream's real Python packages (mamba_ssm from the pinned mamba-ssm
sdist, causal_conv1d from causal-conv1d's) on the CPU stand-ins of their extensions, one pytest run
in a subprocess parametrized over planted bugs (the plugin below, written as planted_bugs.py ahead
of cpu_kernel's on the path). transformers binds the packages when it imports its modeling
modules, so the plugin plants each bug first and has every test import them afresh.

* Against correct stand-ins every CPU test passes; so do the GPU tests whose kernels have a CPU
  stand-in (Mamba's forward and training step), transformers' device gate opened to CPU tensors
  for them as it is for CUDA ones; those through Triton kernels skip, saying why.
* With one bug planted at a time, exactly the tests that cover it fail: causal_conv1d without its
  causal_conv1d_fn (transformers falls back to torch), a mamba_ssm that cannot import for want of
  selective_scan_cuda (likewise, silently), transformers 5.15 to 5.24's missing device gate (CPU
  tensors sent to the CUDA packages), the GPU tests' tensors kept on the torch path although the
  packages are bound (the spies' count), and two kernel bugs of the stand-ins (the comparison
  with the torch path).

About fifteen seconds on 2 cores, besides unpacking the sdists (shared with test_kernels_dry_run.py).
What it cannot show is the CUDA and Triton kernels under transformers: that needs a GPU
(ssm-conda-dev gpu-test).
"""

from __future__ import annotations

import re

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests.recipe.planted_runs import outcomes_by_bug
from tests.repo import RECIPES_DIR

TRANSFORMERS_TESTS = RECIPES_DIR / "mamba-ssm" / "tests" / "test_transformers.py"
EXT, BINDS = "test_extensions_import", "test_transformers_binds_the_packaged_function"
CPU_PATH, GPU = "test_cpu_tensors_take_the_torch_path", "test_model_runs_on_the_packaged_kernels"
MAMBA_SSM_BINDINGS = ["mamba-mamba_inner_fn", "mamba-mamba_selective_scan", "mamba-mamba_selective_state_update",
                      "mamba2-mamba2_selective_state_update", "mamba2-mamba2_chunk_scan",
                      "mamba2-mamba2_split_conv1d_scan_combined"]
CONV_BINDINGS = ["mamba-causal_conv1d_fn", "mamba-causal_conv1d_update", "mamba2-causal_conv1d_fn",
                 "mamba2-causal_conv1d_update"]
CPU_CASES = {f"{EXT}[]", *(f"{BINDS}[{b}]" for b in MAMBA_SSM_BINDINGS + CONV_BINDINGS),
             f"{CPU_PATH}[mamba]", f"{CPU_PATH}[mamba2]"}
GPU_ON_STAND_INS = {f"{GPU}[mamba-forward]", f"{GPU}[mamba-train]"}
GPU_TRITON = {f"{GPU}[mamba-decode]", f"{GPU}[mamba2-forward]", f"{GPU}[mamba2-decode]", f"{GPU}[mamba2-train]"}
# bug -> the cases that must fail; every other case must pass (or skip, the Triton ones)
PLANTED = {
    "conv_fn_missing": {f"{BINDS}[mamba-causal_conv1d_fn]", f"{BINDS}[mamba2-causal_conv1d_fn]",
                        f"{CPU_PATH}[mamba]", f"{CPU_PATH}[mamba2]", *GPU_ON_STAND_INS},
    "selective_scan_cuda_missing": {f"{EXT}[]", *(f"{BINDS}[{b}]" for b in MAMBA_SSM_BINDINGS),
                                    f"{CPU_PATH}[mamba]", f"{CPU_PATH}[mamba2]", *GPU_ON_STAND_INS},
    "no_device_gate": {f"{CPU_PATH}[mamba]", f"{CPU_PATH}[mamba2]"},
    "device_gate_closed": GPU_ON_STAND_INS,
    "scan_D_dropped": GPU_ON_STAND_INS,
    "conv_flipped_weight": GPU_ON_STAND_INS,
}

PLUGIN = '''"""pytest plugin (-p planted_bugs), written by tests/recipe/mamba_ssm/test_transformers_dry_run.py:
recipe/mamba-ssm/tests/test_transformers.py once per planted bug, in one process.

TRANSFORMERS_DRY_RUN_BUGS=none,conv_fn_missing,... parametrizes every test over those bugs (ids
`bug=<name>`). Each test imports transformers' Mamba modeling modules afresh, after its bug is
planted: transformers binds the packages at that import. With MAMBA_SSM_TEST_DEVICE=cpu the GPU
tests' CPU tensors go to the stand-ins, as CUDA tensors go to the kernels.
"""

import os
import sys

import pytest

MODELING = ("transformers.models.mamba.modeling_mamba", "transformers.models.mamba2.modeling_mamba2")


def _bugs():
    return [b for b in os.environ.get("TRANSFORMERS_DRY_RUN_BUGS", "").split(",") if b]


def _mamba_ssm_modules():
    return {n: m for n, m in sys.modules.items() if n == "mamba_ssm" or n.startswith("mamba_ssm.")}


@pytest.fixture(autouse=True)
def planted_bug(request, monkeypatch):
    bug = getattr(request, "param", "none")
    import transformers.integrations.hub_kernels as hub

    gpu_test = not request.node.get_closest_marker("cpu")
    # no_device_gate: transformers 5.15 to 5.24, the packages get tensors on any device;
    # device_gate_closed: the GPU tests' tensors take the torch path although the packages are bound
    if bug == "no_device_gate" or (gpu_test and bug != "device_gate_closed"):
        for package in ("causal_conv1d", "mamba_ssm"):
            monkeypatch.setitem(hub._PACKAGE_SUPPORTED_DEVICES, package, ("cuda", "cpu"))
    stashed = {}
    if bug == "conv_fn_missing":  # transformers finds no causal_conv1d.causal_conv1d_fn
        import causal_conv1d

        monkeypatch.delattr(causal_conv1d, "causal_conv1d_fn")
    elif bug == "selective_scan_cuda_missing":  # the extension not shipped: import mamba_ssm fails
        stashed = _mamba_ssm_modules()
        for name in stashed:
            del sys.modules[name]
        monkeypatch.setitem(sys.modules, "selective_scan_cuda", None)
    elif bug.startswith("scan_"):
        monkeypatch.setenv("MAMBA_SSM_CPU_KERNEL_BUG", bug.removeprefix("scan_"))
    elif bug.startswith("conv_"):
        monkeypatch.setenv("CAUSAL_CONV1D_CPU_KERNEL_BUG", bug.removeprefix("conv_"))
    elif bug not in ("none", "no_device_gate", "device_gate_closed"):
        raise ValueError(f"unknown planted bug {bug!r}")
    for name in MODELING:
        sys.modules.pop(name, None)
    yield bug
    if stashed:
        for name in _mamba_ssm_modules():
            del sys.modules[name]
        sys.modules.update(stashed)


def pytest_generate_tests(metafunc):
    if _bugs() and "planted_bug" in metafunc.fixturenames:
        metafunc.parametrize("planted_bug", _bugs(), indirect=True, ids=[f"bug={b}" for b in _bugs()])
'''


@pytest.fixture(scope="module")
def outcomes(cpu_mamba_ssm, tmp_path_factory) -> dict[str, dict[str, str]]:
    """{bug ("none" for the correct stand-ins): {case id: passed|failed|error|skipped: ...}}, from one run."""
    plugin = tmp_path_factory.mktemp("transformers-plugin")
    (plugin / "planted_bugs.py").write_text(PLUGIN)
    env = {"MAMBA_SSM_TEST_DEVICE": "cpu", "TRANSFORMERS_DRY_RUN_BUGS": ",".join(["none", *PLANTED])}
    return outcomes_by_bug(TRANSFORMERS_TESTS, tmp_path_factory.mktemp("transformers-dry-run"), env,
                           [plugin, *cpu_mamba_ssm], clear=("MAMBA_SSM_", "CAUSAL_CONV1D_", "USE_HUB_KERNELS"),
                           timeout=600)


def test_recipe_pins_the_transformers_these_tests_need():
    """mamba-ssm's run requirement is transformers >= 5.25 (the device gate: CPU tensors take the torch
    path), and this environment's transformers meets it (the dry run would fail otherwise)."""
    import transformers

    recipe = (RECIPES_DIR / "mamba-ssm" / "recipe.yaml").read_text()
    pins = re.findall(r"^\s*- transformers\s*(\S*)\s*$", recipe, re.MULTILINE)
    assert len(pins) == 1 and pins[0], pins
    pin = SpecifierSet(pins[0], prereleases=True)
    assert Version("5.24.99") not in pin and Version("5.25.0") in pin, pins[0]
    assert Version(transformers.__version__) in pin, (
        f"transformers {transformers.__version__} here; the tests need {pins[0]}: pip install -U transformers")


def test_every_cpu_case_and_the_stand_in_gpu_cases_pass_against_correct_stand_ins(outcomes):
    correct = outcomes["none"]
    assert CPU_CASES | GPU_ON_STAND_INS | GPU_TRITON == set(correct), sorted(correct)
    not_passed = {case: outcome for case, outcome in correct.items()
                  if case in CPU_CASES | GPU_ON_STAND_INS and outcome != "passed"}
    assert not not_passed, not_passed


def test_triton_cases_skip_on_the_cpu_saying_why(outcomes):
    triton = {case: outcomes["none"][case] for case in GPU_TRITON}
    assert all(outcome.startswith("skipped: Triton kernel: needs a GPU") for outcome in triton.values()), triton


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_a_planted_bug_fails_exactly_the_cases_that_cover_it(outcomes, bug):
    cases = outcomes[bug]
    ran = {case: outcome for case, outcome in cases.items() if not outcome.startswith("skipped")}
    assert set(ran) == CPU_CASES | GPU_ON_STAND_INS, sorted(ran)
    failed = {case for case, outcome in ran.items() if outcome == "failed"}
    assert failed == PLANTED[bug], {"missed": sorted(PLANTED[bug] - failed), "unexpected": sorted(failed - PLANTED[bug])}
    assert not any(outcome == "error" for outcome in cases.values()), cases
