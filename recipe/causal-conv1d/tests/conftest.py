"""GPU gating for the package's kernel tests, and the bounded subset of upstream's tests.

Every test in this folder needs a GPU except those marked `cpu`. Without one they are skipped,
with the reason in the header and the summary (no NVIDIA driver, torch not a CUDA build, torch
sees no CUDA device). The skip becomes a failure when a GPU is required:

* CAUSAL_CONV1D_REQUIRE_GPU=1 requires one, =0 never does;
* unset, a GPU is required where the NVIDIA driver reports one (nvidia-smi lists a GPU, or
  /proc/driver/nvidia/gpus is not empty): there, a torch that cannot use it is a broken install.
  rattler-build runs package tests in a clean environment that does not pass variables through,
  so this is what makes `rattler-build test` on a GPU machine strict.

The gating itself is shared with mamba-ssm's tests: ../shared/tests/gpu_gate.py (shipped through
the recipe's path source; recipe/shared/tests in the repository).

Upstream's tests/test_causal_conv1d.py (copied here from the source by the recipe) has about
10,000 parametrizations and a 10,000-iteration race test; only UPSTREAM_SUBSET runs, unless
CAUSAL_CONV1D_UPSTREAM=full (everything but the race test).

CAUSAL_CONV1D_TEST_DEVICE=cpu runs the tests on the CPU: only useful against a stand-in extension,
for checking the tests themselves without a GPU.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# shared/tests beside tests/ in the package's test folder (the recipe's path source), and
# recipe/shared/tests in the repository.
SHARED = next((d for d in (HERE.parent / "shared" / "tests", HERE.parent.parent / "shared" / "tests")
               if (d / "gpu_gate.py").is_file()), HERE.parent / "shared" / "tests")
sys.path[:0] = [str(HERE), str(SHARED)]

import gpu_gate  # noqa: E402

GATE = gpu_gate.Gate("causal-conv1d")

UPSTREAM_FILE = "test_causal_conv1d.py"
SKIP_MARKER = GATE.skip_marker
REQUIRED_MARKER = GATE.required_marker
driver_gpus = gpu_gate.driver_gpus
gpu_status = GATE.gpu_status
gpu_required = GATE.gpu_required
test_device = GATE.test_device

# Upstream test -> {parameter: allowed values} and groups of parameters that move together
# (only combinations where they are all equal). Values compare as strings ("torch.float16").
_F = "__tie__"
UPSTREAM_SUBSET: dict[str, dict[str, object]] = {
    "test_causal_conv1d": {
        "dim": {4096 + 32}, "seqlen": {1, 130, 1134},
        _F: [("has_bias", "silu_activation"), ("has_initial_states", "return_final_states")],
    },
    "test_causal_conv1d_update": {"dim": {2048 + 16}, "seqlen": {1, 5}, _F: [("has_bias", "silu_activation")]},
    "test_causal_conv1d_update_with_batch_gather": {
        "dim": {2048 + 16}, "seqlen": {1, 5}, _F: [("has_bias", "silu_activation")],
    },
    "test_causal_conv1d_update_with_padding": {
        "dim": {2048 + 16}, "seqlen": {1, 5}, _F: [("has_bias", "silu_activation")],
    },
    "test_causal_conv1d_get_states": {"dim": {2048 + 16}},
    "test_causal_conv1d_varlen": {"dim": {4096 + 32}, "seqlen": {8, 151, 1134}, _F: [("has_bias", "silu_activation")]},
    "test_causal_conv1d_ref_varlen_initial_states": {},
    "test_causal_conv1d_varlen_initial_states": {_F: [("has_bias", "silu_activation")]},
    "test_causal_conv1d_varlen_padding": {"dim": {4096 + 32}, "seqlen": {128, 1024}, _F: [("has_bias", "silu_activation")]},
    "test_causal_conv1d_bwd_deterministic_reproducible": {},
    "test_causal_conv1d_bwd_deterministic_close_to_default": {},
    "test_causal_conv1d_bwd_default_mode_is_not_reproducible": {},
    # test_causal_conv1d_race_condition (10,000 iterations) never runs here.
}
UPSTREAM_NEVER = {"test_causal_conv1d_race_condition"}


def pytest_configure(config: pytest.Config) -> None:
    GATE.configure(config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = [GATE.header_line()]
    if gpu_status()[0] and test_device() != "cpu":
        lines.append(_arch_line())
    return lines


def _arch_line() -> str:
    """Whether the extension has code for this GPU, said before hundreds of kernel tests fail."""
    try:
        import check_arch
        import torch

        path = check_arch.find_extension()
        verdict = check_arch.check(check_arch.read_fatbins(path), torch.cuda.get_device_capability(0), path.name)
        return ("causal-conv1d arch: " if verdict.ok else "causal-conv1d arch ERROR: ") + verdict.message
    except Exception as exc:  # reported, and test_arch.py fails with the details
        return f"causal-conv1d arch: could not check ({exc})"


def _upstream_missing() -> str:
    """Modules upstream's test file imports that are absent ('' when all import)."""
    missing = [m for m in ("torch", "einops", "triton") if importlib.util.find_spec(m) is None]
    return ", ".join(missing)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    # Without its imports upstream's file cannot even be collected; on a machine that needs no
    # GPU that is a skip, said in the summary; where a GPU is required, the import error shows.
    # On Windows too it is left out, said in the summary: conda-forge builds triton for Linux only.
    if collection_path.name == UPSTREAM_FILE and _upstream_missing() and (sys.platform == "win32" or not gpu_required()):
        return True
    return None


def _upstream_selected(item: pytest.Item) -> bool:
    name = item.originalname if isinstance(item, pytest.Function) else item.name
    if name in UPSTREAM_NEVER:
        return False
    if os.environ.get("CAUSAL_CONV1D_UPSTREAM") == "full":
        return True
    rules = UPSTREAM_SUBSET.get(name)
    if rules is None:
        return False
    params = item.callspec.params if hasattr(item, "callspec") else {}
    for key, allowed in rules.items():
        if key == _F:
            for group in allowed:  # type: ignore[union-attr]
                if len({str(params[p]) for p in group if p in params}) > 1:
                    return False
        elif key in params and str(params[key]) not in {str(v) for v in allowed}:  # type: ignore[union-attr]
            return False
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, dropped = [], []
    for item in items:
        if item.path.name == UPSTREAM_FILE and not _upstream_selected(item):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    GATE.skip_without_gpu(items)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    GATE.runtest_setup(item)  # upstream's own skipif(no CUDA) must not hide a missing GPU either


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ANN001
    if _upstream_missing() and (Path(str(config.rootpath)) / "tests" / UPSTREAM_FILE).exists():
        terminalreporter.write_line(f"upstream {UPSTREAM_FILE} not collected: missing {_upstream_missing()}")
    line = GATE.summary_line()
    if line:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def extension_module() -> str:
    return "causal_conv1d._C"


@pytest.fixture(scope="session")
def kernel_ops() -> tuple[str, str, tuple[str, ...]]:
    return ("causal_conv1d_cuda", "causal_conv1d", ("causal_conv1d_fwd", "causal_conv1d_bwd", "causal_conv1d_update"))


@pytest.fixture(scope="session")
def expected_archs_env() -> str:
    return "CAUSAL_CONV1D_EXPECTED_ARCHS"
