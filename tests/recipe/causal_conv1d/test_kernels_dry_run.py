"""recipe/causal-conv1d/tests/test_kernels.py run on the CPU against a stand-in extension: the tests themselves work.

No GPU is here, so the package's kernel tests would only ever be skipped. This runs them with
CAUSAL_CONV1D_TEST_DEVICE=cpu, beneath upstream's real Python interface (from the pinned sdist)
and cpu_kernel/causal_conv1d_cuda.py in place of the compiled extension:

* against a correct stand-in every case passes (the tests, their references, tolerances, state
  and gradient plumbing run end to end);
* with one bug planted at a time, exactly the tests that cover that feature fail.

All of it is one pytest run in a subprocess (cpu_kernel/planted_bugs.py parametrizes the kernel
tests over the bugs), about half a minute.

What it cannot show is that the CUDA kernels pass: that needs a GPU (ssm-conda-dev gpu-test).
"""

from __future__ import annotations

import pytest
from ssm_conda.paths import recipe_of

from tests.recipe.planted_runs import outcomes_by_bug

KERNEL_TESTS = recipe_of("causal-conv1d").parent / "tests" / "test_kernels.py"

# bug -> (test functions that must fail, a word every failing case id has, a word none has)
PLANTED = {
    "flipped_weight": ({"test_fwd_bwd", "test_states", "test_seq_idx", "test_update", "test_update_state_indices"},
                       None, None),
    "silu_grad": ({"test_fwd_bwd", "test_states", "test_seq_idx"}, None, "linear"),
    "dweight_scale": ({"test_fwd_bwd", "test_states", "test_seq_idx"}, None, None),
    "dbias_missing": ({"test_fwd_bwd", "test_states", "test_seq_idx"}, None, "nobias"),
    "dinitial_missing": ({"test_states", "test_seq_idx"}, "initial", None),
    "final_states_shift": ({"test_states"}, "final", None),
    "seq_idx_ignored": ({"test_seq_idx"}, None, None),
    "padding_not_zeroed": ({"test_seq_idx"}, "padding", None),
    "state_not_written": ({"test_update", "test_update_state_indices"}, None, None),
    "cache_seqlens_ignored": ({"test_update", "test_update_state_indices"}, "cache_seqlens", None),
    "padded_row_computed": ({"test_update_state_indices"}, "padding", None),
}


@pytest.fixture(scope="module")
def outcomes(cpu_causal_conv1d, tmp_path_factory) -> dict[str, dict[str, str]]:
    """{bug ("none" for the correct stand-in): {case id: passed|failed|error|skipped: ...}}, from one run."""
    env = {"CAUSAL_CONV1D_TEST_DEVICE": "cpu",
           "CAUSAL_CONV1D_CPU_KERNEL_BUGS": ",".join(["none", *PLANTED, "no_such_bug"])}
    return outcomes_by_bug(KERNEL_TESTS, tmp_path_factory.mktemp("dry-run"), env, cpu_causal_conv1d,
                           clear=("CAUSAL_CONV1D_",), timeout=600)


def test_every_case_passes_against_a_correct_kernel(outcomes):
    correct = outcomes["none"]
    assert len(correct) >= 360
    not_passed = {name: outcome for name, outcome in correct.items() if outcome != "passed"}
    assert not not_passed, not_passed


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_a_planted_bug_fails_exactly_the_tests_that_cover_it(outcomes, bug):
    functions, every_has, none_has = PLANTED[bug]
    # fp32, width-4 cases only (planted_bugs.py): every feature; "none" covers all dtypes and widths.
    cases = outcomes[bug]
    assert len(cases) == len(outcomes["none"]) // 9
    failed = sorted(name for name, outcome in cases.items() if outcome == "failed")
    assert {name.split("[")[0] for name in failed} == functions, failed
    assert all(every_has in name for name in failed) if every_has else True, failed
    assert not any(none_has in name for name in failed) if none_has else True, failed
    assert not any(outcome == "error" or outcome.startswith("skipped") for outcome in cases.values()), cases


def test_an_unknown_planted_bug_is_refused(outcomes):
    assert set(outcomes["no_such_bug"].values()) == {"failed"}
