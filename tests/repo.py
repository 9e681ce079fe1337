"""This repository's own folders, for tests that read its files (the tooling finds its workspace itself)."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
RECIPES_DIR = REPO_ROOT / "recipe"
VARIANTS_DIR = REPO_ROOT / "variants"
