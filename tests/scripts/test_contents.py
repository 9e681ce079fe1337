"""ssm_conda.contents: what a package of this project may hold, on small packages shaped as ours
(tests/damaged_archives.py) and on the depends of real builds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rattler_build import assemble_package
from ssm_conda.channels import check_archive
from ssm_conda.contents import check_contents
from ssm_conda.matrix import PlannedVariant

from tests.damaged_archives import our_files, rendered_variant, run_exports, windows_package

VARIANT = ("13.0", "3.10", "2.13", "sm90")
# index.json's depends of real builds (CUDA 13.0, sm90, built with gcc 12 before variants/ moved to 15), as
# rattler-build wrote them: the recipe's run requirements and the run exports of its build and host requirements
REAL_DEPENDS = {
    "causal-conv1d": ["__cuda_arch >=9.0,<10", "__glibc >=2.36,<3.0.a0", "cuda-arch >=9.0", "cuda-cudart >=13.0.96,<14.0a0",
                      "cuda-cudart_linux-64", "cuda-version >=13.0,<14", "libgcc >=12", "libstdcxx >=12",
                      "libtorch >=2.13.0,<2.14.0a0", "packaging", "python", "cpython >=3.10", "_python_abi3_support 1.*",
                      "pytorch 2.13.* cuda*", "pytorch >=2.13.0,<2.14.0a0"],
    "mamba-ssm": ["__cuda_arch >=9.0,<10", "__glibc >=2.36,<3.0.a0", "causal-conv1d >=1.7,<2", "cuda-arch >=9.0",
                  "cuda-cudart >=13.0.96,<14.0a0", "cuda-cudart_linux-64", "cuda-version >=13.0,<14", "einops", "libgcc >=12",
                  "libstdcxx >=12", "libtorch >=2.13.0,<2.14.0a0", "packaging", "python >=3.11", "cpython >=3.10",
                  "_python_abi3_support 1.*", "pytorch 2.13.* cuda*", "pytorch >=2.13.0,<2.14.0a0", "setuptools >=61",
                  "transformers >=5.25", "triton >=3.5"],
}


def depends_of(variant: PlannedVariant) -> list[str]:
    return [*variant.rendered.recipe.requirements.run, *run_exports(variant)]


def checked(tmp_path: Path, variant: PlannedVariant, depends: list[str] | None = None, extra: str = "",
            version: str = "", build: str = "", subdir: str = "linux-64", noarch: str | None = "python") -> None:
    """check_contents of a package of `variant` assembled with these changes (a file `extra`, another depends, ...)."""
    files = our_files(tmp_path / "files", variant)
    if extra:
        (files / extra).parent.mkdir(parents=True, exist_ok=True)
        (files / extra).write_text("not ours\n")
    out = assemble_package(variant.package, version or str(variant.rendered.recipe.package.version), subdir,
                           build or variant.build_string, tmp_path / "out", files_dir=files,
                           depends=depends_of(variant) if depends is None else depends, noarch=noarch)
    index = check_archive(Path(out.path), tmp_path / "unpacked")
    check_contents(tmp_path / "unpacked", index, variant)


@pytest.mark.parametrize("package", ["causal-conv1d", "mamba-ssm"])
@pytest.mark.parametrize("platform", ["linux-64", "linux-aarch64"])
def test_a_package_shaped_as_ours_passes(package, platform, tmp_path):
    variant = rendered_variant(*VARIANT, package, platform=platform)
    checked(tmp_path, variant, subdir=platform)  # linux-aarch64: gcc_linux-aarch64 exports libgcc as gcc_linux-64 does


@pytest.mark.parametrize("package", sorted(REAL_DEPENDS))
def test_the_depends_of_real_builds_pass(package, tmp_path):
    checked(tmp_path, rendered_variant(*VARIANT, package), depends=REAL_DEPENDS[package])


@pytest.mark.parametrize("path", [
    "bin/python3.11", "lib/libstdc++.so.6", "site-packages/torch/__init__.py",
    "lib/python3.10/site-packages/causal_conv1d/__init__.py",  # one Python's site-packages: the layout per Python
    "site-packages/mamba_ssm/__init__.py",  # the other package's module
    "site-packages/causal_conv1d.pth", "etc/conda/test-files/mamba-ssm/test_x.py", "share/x/id.txt",
    "site-packages/causal_conv1d_cuda.cpython-312-x86_64-linux-gnu.so",  # the pybind11 module it replaced
    "site-packages/causal_conv1d_cuda.pyc", "site-packages/__pycache__/torch.cpython-312.pyc",
])
def test_a_file_that_is_not_the_packages_is_refused(path, tmp_path):
    with pytest.raises(ValueError, match=rf"^{re.escape(path)} is not causal-conv1d's \(only site-packages/"):
        checked(tmp_path, rendered_variant(*VARIANT), extra=path)


def test_its_own_module_files_pass(tmp_path):
    checked(tmp_path, rendered_variant(*VARIANT), extra="site-packages/causal_conv1d/ops/x.abi3.so")


@pytest.mark.parametrize("noarch", [None, "generic"])
def test_a_package_that_is_not_version_independent_is_refused(noarch, tmp_path):
    """A build of the layout per Python (no noarch) or a noarch: generic one is not what the recipes make now."""
    with pytest.raises(ValueError, match=r"^not a version-independent package for linux-64 \(noarch: python"):
        checked(tmp_path, rendered_variant(*VARIANT), noarch=noarch)


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: [*d, "evil-package"], "depends on evil-package: neither a run requirement of the recipe nor a run export"),
    (lambda d: [*d, "libcublas >=13"], "depends on libcublas >=13: neither"),  # no build or host requirement exports it
    (lambda d: [s for s in d if s != "pytorch 2.13.* cuda*"], "depends lacks pytorch 2.13.* cuda*, a run requirement"),
    (lambda d: [s.replace(" cuda*", "") for s in d], "depends lacks pytorch 2.13.* cuda*"),  # a CPU pytorch would do
    (lambda d: [s for s in d if s != "python"], "depends lacks python, a run requirement"),
])
def test_depends_are_exactly_what_the_recipe_renders(change, message, tmp_path):
    variant = rendered_variant(*VARIANT)
    with pytest.raises(ValueError, match=re.escape(message)):
        checked(tmp_path, variant, depends=change(depends_of(variant)))


@pytest.mark.parametrize(("field", "value"), [("version", "1.6.0"), ("build", "cuda130_cp310abi3_torch213_sm90_hdeadbee_0"),
                                               ("build", "cuda130_py310_torch213_sm90_hdeadbee_0")])
def test_name_version_and_build_string_are_the_variants(field, value, tmp_path):
    variant = rendered_variant(*VARIANT)
    rendered = f"causal-conv1d-{variant.rendered.recipe.package.version}-{variant.build_string}"
    with pytest.raises(ValueError, match=rf"^index.json says causal-conv1d-.*, variants/ renders {re.escape(rendered)}$"):
        checked(tmp_path, variant, **{field: value})


def test_another_packages_variant_is_refused(tmp_path):
    ours = rendered_variant(*VARIANT)
    files = our_files(tmp_path / "files", ours)
    out = assemble_package(ours.package, str(ours.rendered.recipe.package.version), "linux-64", ours.build_string,
                           tmp_path / "out", files_dir=files, depends=depends_of(ours), noarch="python")
    index = check_archive(Path(out.path), tmp_path / "unpacked")
    with pytest.raises(ValueError, match="is not mamba-ssm's"):  # its files are the first thing checked
        check_contents(tmp_path / "unpacked", index, rendered_variant(*VARIANT, "mamba-ssm"))


@pytest.mark.parametrize(("extension", "refused"), [
    ("causal_conv1d/_C.pyd", None),
    ("causal_conv1d_cuda.cp312-win_amd64.pyd", "site-packages/causal_conv1d_cuda.cp312-win_amd64.pyd is not"),
])
def test_a_windows_package_holds_site_packages_and_a_pyd(tmp_path, extension, refused):
    """win-64's layout: site-packages (as on Linux: version-independent) and .pyd extensions; its run exports are the
    vs2022 runtime's (vc, vc14_runtime, ucrt) besides CUDA's, python-abi3's and pytorch's."""
    variant = rendered_variant("13.0", "3.10", "2.13", "sm90", platform="win-64")
    index = check_archive(windows_package(tmp_path, variant, extension), tmp_path / "unpacked")
    if refused is None:
        check_contents(tmp_path / "unpacked", index, variant)
    else:
        with pytest.raises(ValueError, match=re.escape(refused)):
            check_contents(tmp_path / "unpacked", index, variant)
