"""pytest plugin (-p planted_bugs): run recipe/mamba-ssm/tests/test_kernels.py once per planted bug, in one process.

MAMBA_SSM_CPU_KERNEL_BUGS=none,D_dropped,... parametrizes every kernel test over those bugs (ids
`bug=<name>`); "none" is the correct stand-ins. A bug named conv_<name> is causal-conv1d's stand-in
bug <name> (CAUSAL_CONV1D_CPU_KERNEL_BUG), seen through mamba_ssm's calls into causal_conv1d;
any other is selective_scan_cuda's (MAMBA_SSM_CPU_KERNEL_BUG).

To keep the run short on a CPU: planted bugs run on the float32 cases only, and the 2100-step case
(two kernel chunks, ten seconds of Python loop here) runs for the correct stand-in in float32 and
for last_state_wrong (the bug it is there for) only.
"""

from __future__ import annotations

import os

import pytest

MAMBA = "MAMBA_SSM_CPU_KERNEL_BUG"
CONV = "CAUSAL_CONV1D_CPU_KERNEL_BUG"
LONG = "L2100"


def _bugs() -> list[str]:
    return [b for b in os.environ.get("MAMBA_SSM_CPU_KERNEL_BUGS", "").split(",") if b]


@pytest.fixture(autouse=True)
def planted_bug(request: pytest.FixtureRequest):
    bug = getattr(request, "param", "none")
    os.environ[MAMBA], os.environ[CONV] = "", ""
    if bug.startswith("conv_"):
        os.environ[CONV] = bug.removeprefix("conv_")
    elif bug != "none":
        os.environ[MAMBA] = bug
    yield bug
    os.environ.pop(MAMBA, None)
    os.environ.pop(CONV, None)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if _bugs() and "planted_bug" in metafunc.fixturenames:
        metafunc.parametrize("planted_bug", _bugs(), indirect=True, ids=[f"bug={b}" for b in _bugs()])


def _kept(item: pytest.Item) -> bool:
    params = item.callspec.params if hasattr(item, "callspec") else {}
    bug = params.get("planted_bug", "none")
    fp32 = params.get("dtype", "float32") == "float32"
    if LONG in item.name:
        return fp32 and bug in ("none", "last_state_wrong")
    return bug == "none" or fp32


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep = [item for item in items if _kept(item)]
    if len(keep) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if not _kept(item)])
        items[:] = keep
