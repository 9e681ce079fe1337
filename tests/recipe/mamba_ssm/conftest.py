"""mamba-ssm's recipe (recipe/mamba-ssm) and its pinned sdist, for the tests in this folder."""

from pathlib import Path

import pytest
from ssm_conda.paths import recipe_of

MAMBA_RECIPE = recipe_of("mamba-ssm")


@pytest.fixture(scope="session")
def mamba_recipe() -> Path:
    return MAMBA_RECIPE


@pytest.fixture(scope="session")
def mamba_sdist(mamba_recipe) -> Path:
    """The pinned mamba-ssm sdist, downloaded once into the cache and sha-checked."""
    from ssm_conda.sources import fetch_sdist

    return fetch_sdist(mamba_recipe)
