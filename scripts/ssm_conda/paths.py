"""Where things are: the repository's recipe and variant files, and the cache outside any clone."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
RECIPES_DIR = REPO_ROOT / "recipe"  # one folder per package, and shared/ for what they share
# Build order: a package comes after the packages it needs (mamba-ssm calls causal_conv1d).
PACKAGES = ("causal-conv1d", "mamba-ssm")
NEEDS = {"mamba-ssm": ("causal-conv1d",)}
VARIANTS_DIR = REPO_ROOT / "variants"


def recipe_of(package: str) -> Path:
    return RECIPES_DIR / package / "recipe.yaml"


def cache_dir() -> Path:
    """Where downloads and other expensive results live, outside any clone."""
    root = os.environ.get("SSM_CONDA_CACHE") or Path.home() / ".cache" / "causal-conv1d-conda"
    return Path(root)


