"""The upstream sdist a recipe pins, as rattler-build renders it (ssm_conda.dev.sdist downloads and patches it)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ssm_conda.matrix import rendered_recipe
from ssm_conda.paths import PACKAGES


def recipe_source(package: str = PACKAGES[0]) -> dict:
    """The sdist source of a package's recipe as rattler-build renders it: url (the mirrors, in order),
    sha256, patches."""
    (source,) = [s for s in rendered_recipe(package)["source"] if "url" in s]
    return source


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


