"""The package's own test modules (recipe/causal-conv1d/tests/*.py), loaded by path for the tests here.

recipe/causal-conv1d/tests is what the package ships for its test section, not a Python package, so its
modules are loaded by file under a private name rather than imported.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

RECIPE_TESTS = Path(__file__).resolve().parents[3] / "recipe" / "causal-conv1d" / "tests"
SHARED_TESTS = RECIPE_TESTS.parents[1] / "shared" / "tests"


def load_recipe_module(stem: str, folder: Path = RECIPE_TESTS) -> ModuleType:
    """<folder>/<stem>.py (default recipe/causal-conv1d/tests) as a fresh module named recipe_tests_<stem>."""
    spec = importlib.util.spec_from_file_location(f"recipe_tests_{stem}", folder / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
