"""GPU gating for mamba-ssm's kernel tests (the same as causal-conv1d's: ../shared/tests/gpu_gate.py).

Every test in this folder needs a GPU except those marked `cpu`. Without one they are skipped,
with the reason in the header and the summary (no NVIDIA driver, torch not a CUDA build, torch
sees no CUDA device). The skip becomes a failure when a GPU is required:

* MAMBA_SSM_REQUIRE_GPU=1 requires one, =0 never does;
* unset, a GPU is required where the NVIDIA driver reports one: there, a torch that cannot use it
  is a broken install (rattler-build's clean test environment passes no variables through).

MAMBA_SSM_TEST_DEVICE=cpu runs the tests on the CPU: only useful against stand-in extensions, for
checking the tests themselves without a GPU. Tests of Triton kernels skip there, saying why.
"""

from __future__ import annotations

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

GATE = gpu_gate.Gate("mamba-ssm")
SKIP_MARKER = GATE.skip_marker
REQUIRED_MARKER = GATE.required_marker


def pytest_configure(config: pytest.Config) -> None:
    GATE.configure(config)
    config.addinivalue_line("markers", "triton: runs Triton kernels (a GPU even in a CPU dry run)")


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [GATE.header_line()]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    GATE.skip_without_gpu(items)
    if GATE.test_device() == "cpu":
        reason = "Triton kernel: needs a GPU (MAMBA_SSM_TEST_DEVICE=cpu is a dry run against CPU stand-ins)"
        for item in items:
            if item.get_closest_marker("triton"):
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    GATE.runtest_setup(item)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ANN001
    line = GATE.summary_line()
    if line:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def extension_module() -> str:
    return "mamba_ssm._C"


@pytest.fixture(scope="session")
def kernel_ops() -> tuple[str, str, tuple[str, ...]]:
    return ("selective_scan_cuda", "selective_scan", ("fwd", "bwd"))


@pytest.fixture(scope="session")
def expected_archs_env() -> str:
    return "MAMBA_SSM_EXPECTED_ARCHS"
