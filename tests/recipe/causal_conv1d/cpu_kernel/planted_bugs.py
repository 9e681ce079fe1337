"""pytest plugin (-p planted_bugs): run recipe/causal-conv1d/tests/test_kernels.py once per planted bug, in one process.

CAUSAL_CONV1D_CPU_KERNEL_BUGS=none,flipped_weight,... parametrizes every kernel test over those
bugs of the CPU stand-in (ids `bug=<name>`); "none" is the correct stand-in, run on every case.
Planted bugs run on the float32, width-4 cases only: every feature, in a ninth of the time.
"""

from __future__ import annotations

import os

import pytest

VARIABLE = "CAUSAL_CONV1D_CPU_KERNEL_BUG"


def _bugs() -> list[str]:
    return [b for b in os.environ.get("CAUSAL_CONV1D_CPU_KERNEL_BUGS", "").split(",") if b]


@pytest.fixture(autouse=True)
def planted_bug(request: pytest.FixtureRequest):
    bug = getattr(request, "param", "none")
    os.environ[VARIABLE] = "" if bug == "none" else bug
    yield bug
    os.environ.pop(VARIABLE, None)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if _bugs() and "planted_bug" in metafunc.fixturenames:
        metafunc.parametrize("planted_bug", _bugs(), indirect=True, ids=[f"bug={b}" for b in _bugs()])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, drop = [], []
    for item in items:
        params = item.callspec.params if hasattr(item, "callspec") else {}
        planted = params.get("planted_bug", "none") != "none"
        cheap = params.get("dtype") == "float32" and params.get("width") == 4
        (drop if planted and not cheap else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
