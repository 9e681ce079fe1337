"""The upstream sdist a recipe pins: downloaded once, checked against the recipe's sha256, unpacked
and patched as the build patches it (the tests read upstream's code through it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from ssm_conda.channels import sha256_of
from ssm_conda.console import PipelineError
from ssm_conda.matrix import rendered_recipe
from ssm_conda.paths import cache_dir, recipe_of
from ssm_conda.project import NAMES


def recipe_source(package: str = NAMES[0]) -> dict:
    """The sdist source of a package's recipe as rattler-build renders it: url (the mirrors, in order),
    sha256, patches."""
    (source,) = [s for s in rendered_recipe(package)["source"] if "url" in s]
    return source


def fetch_sdist(package: str = NAMES[0]) -> Path:
    """The pinned sdist in the cache; downloaded (atomically, from the first mirror that answers) and
    sha-checked when missing."""
    source = recipe_source(package)
    target = cache_dir() / "sources" / source["url"][0].rsplit("/", 1)[1]
    if target.is_file() and sha256_of(target) == source["sha256"]:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    errors = []
    for url in source["url"]:
        with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as tmp:
            try:
                with urllib.request.urlopen(url, timeout=120) as response:
                    shutil.copyfileobj(response, tmp)
            except OSError as exc:
                errors.append(f"{url}: {exc}")
                os.unlink(tmp.name)
                continue
        actual = sha256_of(Path(tmp.name))
        if actual != source["sha256"]:
            os.unlink(tmp.name)
            raise PipelineError(f"sha256 of {url} is {actual}, the recipe pins {source['sha256']}")
        os.replace(tmp.name, target)
        return target
    raise PipelineError("cannot download the sdist: " + "; ".join(errors))


def unpack_patched(destination: Path, patches: bool = True, package: str = NAMES[0]) -> Path:
    """Unpack the sdist into destination and apply the recipe's patches in order, like the build."""
    with tarfile.open(fetch_sdist(package)) as tar:
        tar.extractall(destination, filter="data")
    (root,) = destination.iterdir()
    if patches:
        for patch in recipe_source(package)["patches"]:
            subprocess.run(
                ["patch", "-p1", "--batch", "--forward", "-i", str(recipe_of(package).parent / patch)],
                cwd=root, check=True, capture_output=True, text=True,
            )
    return root
