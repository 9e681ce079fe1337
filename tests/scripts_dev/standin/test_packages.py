"""The stand-ins and their recipes: every template renders with rattler-build, lists filled in."""

from __future__ import annotations

import shutil

import pytest
import yaml
from ssm_conda_dev.standin import catalog, packages
from ssm_conda_dev.standin.packages import COMPUTE_CAPABILITIES
from ssm_conda_dev.standin.wheels import Wheel


def by_key(fake_machine) -> dict[str, packages.StandIn]:
    return {s.key: s for s in packages.standins(fake_machine)}


@pytest.fixture
def every_standin(fake_machine, fake_cross_standins, fake_aarch64_machine) -> list[packages.StandIn]:
    """linux-64's and what cross-compiling for linux-aarch64 adds."""
    return [*packages.standins(fake_machine), *fake_cross_standins, *packages.aarch64_standins(fake_aarch64_machine)]


def test_every_catalog_name_is_a_standin_and_back(fake_machine, every_standin):
    """--rebuild accepts exactly the stand-ins' names."""
    standins = packages.standins(fake_machine)
    assert {s.conda_name for s in every_standin} == catalog.all_names()
    assert len(catalog.all_names()) == 124
    assert len(standins) == len({s.key for s in standins}) == 108 + len(COMPUTE_CAPABILITIES)


def test_cuda_arch_as_conda_forge_publishes_it(fake_machine, tmp_path):
    """One version per compute capability, each constrained by __cuda_arch and exporting cuda-arch >=X."""
    arch = [s for s in packages.standins(fake_machine) if s.conda_name == "cuda-arch"]
    assert [s.context["capability"] for s in arch] == list(COMPUTE_CAPABILITIES)
    assert {"7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1"} <= set(COMPUTE_CAPABILITIES)
    recipe = yaml.safe_load(packages.write_recipe(arch[0], tmp_path).read_text())
    assert recipe["build"]["noarch"] == "generic"
    assert recipe["requirements"]["run_exports"] == ["cuda-arch >=${{ capability }}"]
    assert recipe["requirements"]["run_constraints"] == ["__cuda_arch ${{ capability }}.*"]


def test_build_order_puts_python_first_and_pytorch_last(fake_machine):
    keys = [s.key for s in packages.standins(fake_machine)]
    assert keys[:2] == ["python", "python_abi"] and keys[-1] == "pytorch"
    assert keys.index("libnvjitlink") < keys.index("libcusparse") < keys.index("libcusolver")


def test_run_requirements_come_from_the_wheels(fake_machine):
    standins = by_key(fake_machine)
    assert standins["pytest"].run == ["python >=3.9", "iniconfig >=1", "pluggy >=1.5,<2"]
    assert standins["pytest"].entry_points == ["pytest = pytest:console_main"]
    assert standins["numpy"].run == ["python"]  # binary: python_abi ties it to its Python, not Requires-Python
    assert standins["pip"].host == ["python"]
    assert standins["libcusolver"].run == ["cuda-version >=13,<14", "libcublas", "libcusparse", "libnvjitlink"]
    torch, libtorch = standins["pytorch"], standins["libtorch"]
    # the fake torch asks for triton ~=3.8.0 (as 2.14's wheel does); conda-forge pins the triton it built with
    assert torch.run[-1] == "triton ==3.8.0" and torch.run[0] == "libtorch ==${{ version }}"
    assert "setuptools <82" in torch.run  # conda-forge's pytorch's, and torch 2.11's (its pip check failed without)
    assert "nccl" in libtorch.run and "cuda-cudart" in libtorch.run and "nccl" not in torch.run
    assert torch.context["version_xy_next"] == "2.15.0a0" and torch.context["cuda_mm"] == "13.0"
    assert libtorch.undigested and "py_ver" not in libtorch.context


def test_transformers_runs_on_its_requirements_under_conda_names(fake_machine):
    """transformers (mamba-ssm's run requirement) is noarch, its run list its Requires-Dist for
    linux-64 without extras: huggingface-hub as huggingface_hub, typing-extensions as typing_extensions."""
    standins = by_key(fake_machine)
    transformers = standins["transformers"]
    assert transformers.template == "noarch_wheel.yaml"
    assert transformers.run == ["python >=3.10.0", "huggingface_hub >=1.31.0,<3.0", "numpy >=1.17", "pyyaml >=5.1",
                                "tokenizers >=0.23.1,<0.24.0", "typer", "typing_extensions >=4.1.0"]
    assert transformers.entry_points == ["transformers = transformers.cli.transformers:main"]
    assert standins["tokenizers"].template == "binary_wheel.yaml"
    assert standins["tokenizers"].run == ["python", "huggingface_hub >=0.16.4,<3.0"]
    assert {"huggingface_hub", "hf-xet", "pyyaml", "regex", "safetensors", "markdown-it-py"} <= catalog.all_names()


def test_wheel_context_carries_library_list(tmp_path):
    wheel = Wheel(tmp_path, "nvidia-nvtx", "13.0.85", ("nvidia/cu13/lib/libnvtx3interop.so.1",))
    ctx = packages.wheel_context(wheel, "cuda-nvtx")
    assert ctx["lib_files"] == "nvidia/cu13/lib/libnvtx3interop.so.1" and ctx["version"] == "13.0.85"


def test_written_recipe_has_the_lists_and_helpers(fake_machine, tmp_path):
    standin = by_key(fake_machine)["gxx_linux-64"]
    path = packages.write_recipe(standin, tmp_path / "gxx")
    recipe = yaml.safe_load(path.read_text())
    assert recipe["requirements"]["run"] == ["gcc_linux-64 ==12.2.0"]
    assert recipe["requirements"]["run_exports"]["strong"] == ["libstdcxx >=12"]
    assert (tmp_path / "gxx" / "activate-gxx.sh").is_file() and (tmp_path / "gxx" / "rewrite_torch_metadata.py").is_file()
    assert "content: |" in path.read_text()  # the build script stays a readable block


def test_a_plain_installs_byte_compiled_helpers_are_not_copied(fake_machine, tmp_path, monkeypatch):
    """pip install (not editable) byte-compiles recipes/*.py into recipes/__pycache__/, which was copied as a file
    (IsADirectoryError)."""
    recipes = tmp_path / "recipes"
    shutil.copytree(packages.RECIPES_DIR, recipes, ignore=shutil.ignore_patterns("__pycache__"))
    (recipes / "__pycache__").mkdir()
    (recipes / "__pycache__" / "debian_python.cpython-311.pyc").write_bytes(b"")
    monkeypatch.setattr(packages, "RECIPES_DIR", recipes)
    packages.write_recipe(by_key(fake_machine)["gxx_linux-64"], tmp_path / "gxx")
    assert (tmp_path / "gxx" / "debian_python.py").is_file() and not (tmp_path / "gxx" / "__pycache__").exists()


def test_every_standin_renders(fake_machine, every_standin, tmp_path):
    """Each template, with its context, renders to the conda-forge name and a version (the build
    runs only in the end-to-end test)."""
    from rattler_build import PlatformConfig, RenderConfig, Stage0Recipe, VariantConfig

    variants = VariantConfig.from_yaml(yaml.safe_dump({"python": [fake_machine.target.py_ver]}))
    for standin in every_standin:
        recipe_path = packages.write_recipe(standin, tmp_path / standin.key)
        render = RenderConfig(PlatformConfig(target_platform=standin.platform),
                              extra_context={k: str(v) for k, v in standin.context.items()})
        rendered = Stage0Recipe.from_file(recipe_path).render(variants, render)[0].recipe
        assert rendered.package.name == standin.conda_name, standin.key
        assert str(rendered.package.version), standin.key
        python_tagged = standin.key in (*catalog.BINARY_WHEELS, "triton", "pytorch")
        assert ("py311" in rendered.build.string) is python_tagged, (standin.key, rendered.build.string)


@pytest.mark.parametrize("template", sorted(p.name for p in packages.RECIPES_DIR.glob("*.yaml")))
def test_every_template_is_used(every_standin, template):
    assert template in {s.template for s in every_standin}


def test_the_transformers_repacked_is_one_mamba_ssm_accepts():
    """mamba-ssm's recipe pins transformers' minimum; the stand-in downloads a wheel that meets it."""
    from packaging.specifiers import SpecifierSet

    from tests.repo import REPO_ROOT

    recipe = yaml.safe_load((REPO_ROOT / "recipe" / "mamba-ssm" / "recipe.yaml").read_text())
    (pin,) = [r for r in recipe["requirements"]["run"] if isinstance(r, str) and r.split()[0] == "transformers"]
    assert SpecifierSet(catalog.CONSTRAINTS["transformers"]) == SpecifierSet(pin.split(maxsplit=1)[1])
