"""The CPU stand-ins of mamba-ssm for the kernel benchmark's tests: tests/recipe/mamba_ssm/conftest.py's fixtures.

Fixtures of a conftest reach only the tests beneath it; this loads that one by path and re-exports
its cpu_mamba_ssm (and the fixtures it uses), rather than repeating them.
"""

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "recipe" / "mamba_ssm" / "conftest.py"
_spec = importlib.util.spec_from_file_location("_mamba_ssm_recipe_conftest", _PATH)
_recipe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_recipe)

mamba_recipe = _recipe.mamba_recipe
mamba_sdist = _recipe.mamba_sdist
cpu_mamba_ssm = _recipe.cpu_mamba_ssm
