"""recipe/mamba-ssm/tests/test_kernels.py run on the CPU against stand-in extensions: the tests themselves work.

No GPU is here, so the package's kernel tests would only ever be skipped. This runs them with
MAMBA_SSM_TEST_DEVICE=cpu beneath upstream's real Python packages (mamba_ssm from the pinned
mamba-ssm sdist, causal_conv1d from causal-conv1d's), with cpu_kernel/selective_scan_cuda.py and
causal-conv1d's cpu_kernel/causal_conv1d_cuda.py in place of the compiled extensions:

* against correct stand-ins every CPU-capable case passes (selective_scan_fn, mamba_inner_fn
  through causal_conv1d.cpp_functions, the Mamba block's fast and slow paths, constructing the
  blocks without the optional kernel packages); the Triton tests skip, saying why;
* with one bug planted at a time, exactly the cases that cover it fail: a selective-scan bug
  (cpu_kernel/selective_scan_cuda.py: BUGS), or a causal-conv1d bug seen through mamba_ssm.

All of it is one pytest run in a subprocess (cpu_kernel/planted_bugs.py parametrizes the kernel
tests over the bugs), about a minute. What it cannot show is that the CUDA and Triton kernels
pass: that needs a GPU (ssm-conda-dev gpu-test).
"""

from __future__ import annotations

import pytest

from tests.recipe.planted_runs import outcomes_by_bug
from tests.repo import RECIPES_DIR

KERNEL_TESTS = RECIPES_DIR / "mamba-ssm" / "tests" / "test_kernels.py"
SCAN, INNER, BLOCK = "test_selective_scan", "test_mamba_inner_fn", "test_mamba_block"
CPU_TESTS = {SCAN, INNER, BLOCK, "test_construct_without_optional_kernels"}
TRITON_TESTS = {"test_selective_state_update", "test_mamba2_block"}

# bug -> {test function that must fail: the word (of its case id) every failing case has, and
# every case with it fails; None: every case}. Every other case must pass.
PLANTED = {
    "D_dropped": {SCAN: "D", INNER: None, BLOCK: None},
    "softplus_ignored": {SCAN: "softplus", INNER: None, BLOCK: None},
    "z_gate_missing": {SCAN: "z", INNER: None, BLOCK: None},
    "last_state_wrong": {SCAN: "last"},
    # 1% of dB is below the block test's resolution (its x_proj gradients are under atol): the
    # direct tests see it.
    "dB_scale": {SCAN: None, INNER: None},
    # causal-conv1d's stand-in bugs, through mamba_inner_fn and the Mamba block's two paths
    "conv_flipped_weight": {INNER: None, BLOCK: None},
    "conv_dweight_scale": {INNER: None, BLOCK: None},
}


@pytest.fixture(scope="module")
def outcomes(cpu_mamba_ssm, tmp_path_factory) -> dict[str, dict[str, str]]:
    """{bug ("none" for the correct stand-ins): {case id: passed|failed|error|skipped: ...}}, from one run."""
    env = {"MAMBA_SSM_TEST_DEVICE": "cpu", "MAMBA_SSM_CPU_KERNEL_BUGS": ",".join(["none", *PLANTED, "no_such_bug"])}
    return outcomes_by_bug(KERNEL_TESTS, tmp_path_factory.mktemp("dry-run"), env, cpu_mamba_ssm,
                           clear=("MAMBA_SSM_", "CAUSAL_CONV1D_"), timeout=900)


def _function(case: str) -> str:
    return case.split("[")[0]


def test_every_cpu_case_passes_against_correct_stand_ins(outcomes):
    correct = outcomes["none"]
    cpu = {case: outcome for case, outcome in correct.items() if _function(case) in CPU_TESTS}
    assert {_function(case) for case in cpu} == CPU_TESTS
    assert len(cpu) >= 23  # 16 selective_scan (no fp16/bf16 L2100 here), 4 inner, 2 block, 1 construct
    not_passed = {case: outcome for case, outcome in cpu.items() if outcome != "passed"}
    assert not not_passed, not_passed


def test_triton_tests_skip_on_the_cpu_saying_why(outcomes):
    triton = {case: outcome for case, outcome in outcomes["none"].items() if _function(case) in TRITON_TESTS}
    assert {_function(case) for case in triton} == TRITON_TESTS
    assert all(outcome.startswith("skipped: Triton kernel: needs a GPU") for outcome in triton.values()), triton


def expected_failures(bug: str, cases: list[str]) -> set[str]:
    expected = set()
    for case in cases:
        function, params = _function(case), case.split("[", 1)[1].rstrip("]")
        if function in PLANTED[bug] and (PLANTED[bug][function] is None or PLANTED[bug][function] in params.split("-")):
            expected.add(case)
    return expected


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_a_planted_bug_fails_exactly_the_cases_that_cover_it(outcomes, bug):
    cases = outcomes[bug]
    ran = {case: outcome for case, outcome in cases.items() if not outcome.startswith("skipped")}
    failed = {case for case, outcome in ran.items() if outcome == "failed"}
    expected = expected_failures(bug, list(ran))
    assert expected, f"{bug} is covered by no case that ran"
    assert failed == expected, {"missed": sorted(expected - failed), "unexpected": sorted(failed - expected)}
    assert not any(outcome == "error" for outcome in cases.values()), cases


def test_an_unknown_planted_bug_is_refused(outcomes):
    kernel_cases = {case: o for case, o in outcomes["no_such_bug"].items() if _function(case) in {SCAN, INNER, BLOCK}}
    assert kernel_cases and set(kernel_cases.values()) == {"failed"}, kernel_cases
