"""mamba-ssm's sdist and patches: the pinned file, and what patch 0004 relies on (the packages it
drops are imported only where mamba_ssm can do without them). tests/recipe/test_patches.py applies them."""

import ast
import re
import shutil
from pathlib import Path

import pytest
from ssm_conda.channels import sha256_of
from ssm_conda.paths import recipe_of
from ssm_conda_dev.sdist import recipe_source, unpack_patched

MAMBA_RECIPE = recipe_of("mamba-ssm")
MAMBA_DIR = MAMBA_RECIPE.parent
SOURCE = recipe_source("mamba-ssm")
PATCHES = SOURCE["patches"]
SHA256 = "104cc47e9101e5401a675fa2b784f2952b9b037f3b1dd83b5ac544394e95d028"

# Packages mamba-ssm lists but conda-forge lacks (patch 0004), as imported (tvm-ffi only through
# cutlass's --enable-tvm-ffi; cutlass comes with quack-kernels), and mamba_ssm's subpackages that
# import them.
OPTIONAL_PACKAGES = {"tilelang", "tvm_ffi", "quack", "cutlass"}
OPTIONAL_SUBPACKAGES = ("mamba_ssm.ops.tilelang", "mamba_ssm.ops.cute")


def test_recipe_source_tries_the_version_address_then_the_file_address():
    assert SOURCE["sha256"] == SHA256
    first, second = SOURCE["url"]
    assert first == "https://files.pythonhosted.org/packages/source/m/mamba-ssm/mamba_ssm-2.3.2.post1.tar.gz"
    assert re.fullmatch(r"https://files\.pythonhosted\.org/packages/[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{60}/"
                        r"mamba_ssm-2\.3\.2\.post1\.tar\.gz", second)


def test_sdist_matches_the_pinned_sha256(mamba_sdist):
    assert sha256_of(mamba_sdist) == SHA256


@pytest.fixture(scope="module")
def patched(tmp_path_factory) -> Path:
    return unpack_patched(tmp_path_factory.mktemp("patched"), package="mamba-ssm")


def test_requirements_patch_names_files_that_exist(patched):
    """Patch 0004's header names the modules that import the dropped packages: they must exist."""
    (patch,) = [p for p in PATCHES if "requirements" in p]
    header = (MAMBA_DIR / patch).read_text().split("diff --git", 1)[0]
    named = set(re.findall(r"mamba_ssm/[\w/]+\.py", header))
    assert {"mamba_ssm/modules/mamba3.py", "mamba_ssm/ops/tilelang/mamba3/mamba3_mimo.py",
            "mamba_ssm/ops/cute/mamba3/mamba3_step_fn.py"} <= named
    assert all((patched / path).is_file() for path in named), named


def _module_name(root: Path, path: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module]
    return []


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return handler.type is None or any(
        isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError", "Exception") for n in names
    )


def optional_imports(root: Path) -> tuple[list[str], list[str]]:
    """(guarded, unguarded): the imports, outside mamba_ssm's optional subpackages, of an optional
    package or subpackage, as "module:line"; guarded ones sit in a try that catches ImportError."""
    guarded, unguarded = [], []
    for path in sorted((root / "mamba_ssm").rglob("*.py")):
        module = _module_name(root, path)
        if module.startswith(OPTIONAL_SUBPACKAGES):
            continue
        tree = ast.parse(path.read_text(), str(path))
        protected = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers)
            for stmt in node.body
            for inner in ast.walk(stmt)
        }
        for node in ast.walk(tree):
            for name in _imported(node):
                if name.split(".")[0] in OPTIONAL_PACKAGES or name.startswith(OPTIONAL_SUBPACKAGES):
                    (guarded if id(node) in protected else unguarded).append(f"{module}:{node.lineno}")
    return guarded, unguarded


def test_dropped_packages_are_imported_only_under_try_except(patched):
    """What justifies patch 0004: mamba_ssm imports without tilelang, tvm-ffi and quack."""
    guarded, unguarded = optional_imports(patched)
    assert unguarded == []
    assert {g.split(":")[0] for g in guarded} == {"mamba_ssm.modules.mamba3"}


def test_import_check_catches_an_unguarded_import(patched, tmp_path):
    """The control: the check above does flag a bare import of a dropped package."""
    copy = tmp_path / "copy"
    shutil.copytree(patched / "mamba_ssm", copy / "mamba_ssm")
    mamba2 = copy / "mamba_ssm" / "modules" / "mamba2.py"
    mamba2.write_text("import quack.cute_dsl_utils\n" + mamba2.read_text())
    assert optional_imports(copy)[1] == ["mamba_ssm.modules.mamba2:1"]
