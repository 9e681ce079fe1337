"""Packages as `ssm-conda build` lays them out, for the GPU bundle's tests without a GPU: upstream's Python and the
CPU stand-in extensions (tests/recipe/*/cpu_kernel) in site-packages, each recipe's test files where rattler-build
puts them (etc/conda/test-files/NAME/N/), and its test section rendered for the variant as rattler-build stores it
(info/tests/tests.yaml; checked against a real package by the slow test of tests/test_end_to_end.py).
The variant is the variant file's Python (3.10, which this Python may run) and this torch's (the test requirements pin
torch to a minor the matrix has), sm90."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import io
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml
import zstandard
from rattler_build import assemble_package
from ssm_conda.matrix import PlannedVariant, load_variant_files, plan
from ssm_conda.paths import recipe_of
from ssm_conda.selection import Selection

from tests.repo import REPO_ROOT

_PATH = REPO_ROOT / "tests" / "recipe" / "mamba_ssm" / "conftest.py"  # its cpu_mamba_ssm, re-exported
_spec = importlib.util.spec_from_file_location("_mamba_ssm_recipe_conftest", _PATH)
_recipe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_recipe)
mamba_recipe, mamba_sdist, cpu_mamba_ssm = _recipe.mamba_recipe, _recipe.mamba_sdist, _recipe.cpu_mamba_ssm

PYTHON = next(f for f in load_variant_files() if f.cuda == "13.0").pythons[0]  # the packages' (this one or older)
TORCH = ".".join(importlib.metadata.version("torch").split(".")[:2])
UPSTREAM = {"causal-conv1d": ("causal_conv1d", "causal_conv1d_cuda.py", "causal_conv1d"),
            "mamba-ssm": ("mamba_ssm", "selective_scan_cuda.py", "mamba_ssm")}  # module, stand-in, cpu_kernel folder


def variants(torch: str = TORCH, python: str = PYTHON) -> list[PlannedVariant]:
    return plan(Selection(cuda="13.0", python=python, torch=torch, generations=("sm90",)))


def with_info_file(package: Path, name: str, text: str) -> None:
    """The .conda again with one more file in its info tarball (rattler-build's assembler writes no tests.yaml)."""
    with zipfile.ZipFile(package) as old:
        members = {info.filename: old.read(info) for info in old.infolist()}
    (info_member,) = [m for m in members if m.startswith("info-")]
    with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(members[info_member])) as raw:
        old_tar = tarfile.open(fileobj=io.BytesIO(raw.read()))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as new_tar:
        for member in old_tar.getmembers():
            new_tar.addfile(member, old_tar.extractfile(member) if member.isfile() else None)
        data = text.encode()
        entry = tarfile.TarInfo(name)
        entry.size = len(data)
        new_tar.addfile(entry, io.BytesIO(data))
    members[info_member] = zstandard.ZstdCompressor().compress(buffer.getvalue())
    with zipfile.ZipFile(package, "w") as new:
        for member, data in members.items():
            new.writestr(member, data)


def fake_package(channel: Path, variant: PlannedVariant, roots: list[Path]) -> Path:
    """`variant`'s package with upstream's Python (from `roots`) over the CPU stand-in of its extension."""
    module, stand_in, kernel_dir = UPSTREAM[variant.package]
    files = channel.parent / f"files-{variant.package}"
    site = files / "site-packages"  # version-independent
    sdist_root = next(r for r in roots if (r / module).is_dir())
    shutil.copytree(sdist_root / module, site / module, ignore=shutil.ignore_patterns("__pycache__"))
    kernel = REPO_ROOT / "tests" / "recipe" / kernel_dir / "cpu_kernel"
    shutil.copy(kernel / stand_in, site / stand_in)
    # as rattler-build stores them: package_contents is checked at build time and not kept, the rest numbered in order
    tests = [t for t in variant.rendered.recipe.to_dict()["tests"] if "package_contents" not in t]
    for index, test in enumerate(tests):
        if "files" not in test:  # the import and abi3audit steps
            continue
        cwd = f"etc/conda/test-files/{variant.package}/{index}"
        test["script"]["cwd"] = cwd
        for pattern in test["files"].get("recipe", []):
            shutil.copytree(recipe_of(variant.package).parent / pattern, files / cwd / pattern, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
        for pattern in test["files"].get("source", []):
            source = (REPO_ROOT / "recipe" if pattern.startswith("shared/") else sdist_root) / pattern
            copy = shutil.copytree if source.is_dir() else shutil.copy
            (files / cwd / pattern).parent.mkdir(parents=True, exist_ok=True)
            copy(source, files / cwd / pattern)
        shutil.copy(kernel / "planted_bugs.py", files / cwd / "planted_bugs.py")  # `-p planted_bugs` finds it in cwd
    package = Path(assemble_package(variant.package, str(variant.rendered.recipe.package.version), "linux-64",
                                    variant.build_string, channel / "linux-64", files_dir=files, noarch="python").path)
    with_info_file(package, "info/tests/tests.yaml", yaml.safe_dump(tests))
    return package


@pytest.fixture(scope="session")
def fake_channel(tmp_path_factory, cpu_mamba_ssm) -> Path:
    """An output channel holding both packages of this Python's and torch's sm90 variant."""
    channel = tmp_path_factory.mktemp("gpu-bundle") / "output"
    for variant in variants():
        fake_package(channel, variant, cpu_mamba_ssm)
    return channel
