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
    from ssm_conda_dev.sdist import fetch_sdist

    del mamba_recipe
    return fetch_sdist("mamba-ssm")


@pytest.fixture(scope="session")
def cpu_mamba_ssm(tmp_path_factory, mamba_sdist, cpu_causal_conv1d) -> list[Path]:
    """sys.path entries giving upstream's mamba_ssm and causal_conv1d packages on the CPU stand-in extensions.

    mamba_ssm/*.py comes from the pinned, patched sdist, tests/recipe/mamba_ssm/cpu_kernel replaces
    selective_scan_cuda; causal_conv1d as in the cpu_causal_conv1d fixture (its stand-in for
    causal_conv1d_cuda), so mamba_inner_fn's calls into causal_conv1d.cpp_functions are real.
    """
    from ssm_conda_dev.sdist import unpack_patched

    del mamba_sdist  # downloaded by its fixture; unpack_patched reads it from the cache
    root = unpack_patched(tmp_path_factory.mktemp("mamba-sdist"), package="mamba-ssm")
    assert (root / "mamba_ssm" / "ops" / "selective_scan_interface.py").is_file()
    return [Path(__file__).resolve().parent / "cpu_kernel", root, *cpu_causal_conv1d]  # the stand-in before the sdist's
