"""Where things are: the workspace (found upwards from the current directory, or --workspace), and the cache."""

from __future__ import annotations

import os
from pathlib import Path

from ssm_conda.console import UsageError, user_path

_chosen: Path | None = None  # --workspace, or $SSM_CONDA_WORKSPACE: set once by the command line


def is_workspace(folder: Path) -> bool:
    return (folder / "variants").is_dir() and any((folder / "recipe").glob("*/recipe.yaml"))


def choose_workspace(folder: str | Path, what: str = "--workspace") -> None:
    """The workspace the command line (or its variable, `what`) names, instead of the one found from the current directory."""
    global _chosen
    if not is_workspace(resolved := user_path(folder, what).resolve()):
        raise UsageError(f"{what} {folder}: not a causal-conv1d-conda checkout (no recipe/*/recipe.yaml and variants/)")
    _chosen = resolved


def workspace() -> Path:
    if _chosen is not None:
        return _chosen
    here = Path.cwd().resolve()
    if (found := next((folder for folder in (here, *here.parents) if is_workspace(folder)), None)) is None:
        raise UsageError(f"no causal-conv1d-conda checkout in {here} or above it (a folder holding recipe/ and variants/): "
                         "run this inside one, or pass --workspace DIR")
    return found


def variants_dir() -> Path:
    return workspace() / "variants"


def recipe_of(package: str) -> Path:
    return workspace() / "recipe" / package / "recipe.yaml"


def cache_dir() -> Path:
    """Where downloads and other expensive results live, outside any clone."""
    return Path(os.environ.get("SSM_CONDA_CACHE") or Path.home() / ".cache" / "causal-conv1d-conda")
