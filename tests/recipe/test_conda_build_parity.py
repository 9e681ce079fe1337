"""recipe/meta.yaml, rendered as conda-build would, builds what recipe/recipe.yaml builds.

conda-build cannot run here; scripts/condabuild_render.py evaluates meta.yaml with conda-build's
rules (selectors, compiler()/stdlib(), variant pins, pin_run_as_build) for every variant of
variants/*.yaml, and the result is compared with rattler-build's own rendering of recipe.yaml.
"""

import os
import shutil
from pathlib import Path

import pytest

from scripts import condabuild_render as cbr
from scripts.common import RECIPE, RECIPE_DIR
from scripts.metayaml import generate
from scripts.variants import load_variant_files, plan

META = RECIPE_DIR / "meta.yaml"
PLANNED = plan()


@pytest.fixture(scope="module")
def meta_text() -> str:
    return META.read_text()


@pytest.mark.parametrize("pv", PLANNED, ids=lambda pv: pv.label)
def test_variant_renders_the_same_under_both_tools(pv, meta_text):
    variant = {k: str(v) for k, v in pv.rendered.variant.items()}
    meta = cbr.render_text(meta_text, variant)
    rattler = cbr.from_rattler_build(pv.rendered.recipe.to_dict(), variant)
    conda = cbr.from_conda_build(meta, variant)
    assert cbr.differences(rattler, conda, pv.label) == []
    # The fields the issue names, spelled out (differences() compares them all).
    assert conda.build_string.startswith(f"cuda{pv.cuda.replace('.', '')}_py{pv.python.replace('.', '')}_")
    assert conda.build_string.endswith("_h<hash>_0")
    assert conda.script_env == {
        "TORCH_CUDA_ARCH_LIST": pv.archs,
        **{k: os.environ[k] for k in ("MAX_JOBS", "NVCC_THREADS") if os.environ.get(k)},
        "CAUSAL_CONV1D_CCACHE_DIR": "<inherited $CAUSAL_CONV1D_CCACHE_DIR>",
    }
    assert conda.overlinking_error and conda.missing_dso
    assert conda.test_pip_check and conda.test_imports


def test_whole_parity_check_passes_for_every_variant_file_and_platform():
    assert cbr.parity_differences() == []


@pytest.mark.parametrize("vfile", load_variant_files(), ids=lambda f: f.path.name)
def test_conda_build_makes_the_same_variants_from_the_file(vfile):
    ours = {(v["python"], v["pytorch"]) for v in cbr.expand_variants(vfile.data)}
    theirs = {(pv.python, pv.torch) for pv in PLANNED if pv.variant_file.path == vfile.path}
    assert ours == theirs


@pytest.mark.parametrize("platform, skipped", [("linux-64", False), ("linux-aarch64", False),
                                               ("osx-arm64", True), ("win-64", True)])
def test_linux_only_under_both_tools(platform, skipped, meta_text):
    variant = dict(cbr.expand_variants(load_variant_files()[0].data)[0], target_platform=platform)
    assert cbr.conda_build_skips(meta_text, variant) is skipped
    assert cbr.rattler_skips(RECIPE, variant) is skipped


# --- the check notices a change to one recipe only ------------------------------------------------


@pytest.fixture
def recipe_copy(tmp_path: Path) -> Path:
    """A copy of recipe/ (recipe.yaml, meta.yaml, build.sh, patches) to mutate."""
    dest = tmp_path / "recipe"
    shutil.copytree(RECIPE_DIR, dest, ignore=shutil.ignore_patterns("tests", "__pycache__"))
    return dest


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def test_a_host_dependency_added_to_recipe_yaml_only_is_reported(recipe_copy):
    _edit(recipe_copy / "recipe.yaml", "    - cuda-cudart-dev\n", "    - cuda-cudart-dev\n    - numpy\n")
    problems = cbr.parity_differences(recipe_copy / "recipe.yaml", recipe_copy / "meta.yaml")
    assert len(problems) == len(PLANNED)
    assert all("requirements.host: recipe.yaml only ['numpy'], meta.yaml only []" in p for p in problems)
    # Regenerating meta.yaml from the changed recipe.yaml brings them back in line.
    (recipe_copy / "meta.yaml").write_text(generate((recipe_copy / "recipe.yaml").read_text()))
    assert cbr.parity_differences(recipe_copy / "recipe.yaml", recipe_copy / "meta.yaml") == []


@pytest.mark.parametrize(
    "old, new, expected",
    [
        ("sha256: 3202758494", "sha256: 3202758495", "source:"),
        ("    - patches/0005-clear-error-without-nvcc.patch\n", "", "source:"),
        ("_{{ PKG_HASH }}_", "_", "build_string:"),
        ("_{{ PKG_HASH }}_", "_h{{ PKG_HASH }}_", "build_string:"),  # PKG_HASH has its 'h' already
        ("TORCH_CUDA_ARCH_LIST={{ cuda_arch_list }}", "TORCH_CUDA_ARCH_LIST=8.0", "script_env:"),
        ("  error_overlinking: true\n", "", "overlinking_error:"),
        ('    - "*/libcuda.so*"\n', '    - "*/libcuda.so.1"\n', "missing_dso:"),
        ("    - {{ stdlib('c') }}\n", "", "requirements.build:"),
        ("    - python\n    - packaging\n    - pytorch", "    - python >=3.10\n    - packaging\n    - pytorch",
         "requirements.run:"),
        ("    - cuda-version =={{ cuda_compiler_version }}", "    - cuda-version {{ cuda_compiler_version }}",
         "requirements.host:"),
        ("    - pip check\n", "", "test_pip_check:"),
        ("    - causal_conv1d\n", "    - causal_conv1d_cuda\n", "test_imports:"),
        ("  skip: true  # [not linux]\n", "  skip: true  # [win]\n", "skip:"),
    ],
    ids=["sha256", "patch", "hash-dropped", "hash-h-doubled", "arch-env", "overlinking", "dso",
         "stdlib", "run-pin", "cuda-version-pin", "pip-check", "imports", "skip"],
)
def test_a_hand_edit_of_meta_yaml_is_reported(recipe_copy, old, new, expected):
    meta = recipe_copy / "meta.yaml"
    _edit(meta, old, new)
    problems = cbr.parity_differences(recipe_copy / "recipe.yaml", meta)
    assert any(expected in p for p in problems), problems[:3]


# --- conda-build's rules, as the renderer applies them --------------------------------------------

VARIANT = {"target_platform": "linux-64", "c_compiler": "gcc", "c_compiler_version": "15",
           "c_stdlib": "sysroot", "c_stdlib_version": "2.28", "cuda_compiler": "cuda-nvcc",
           "cuda_compiler_version": "13.0", "python": "3.12", "pytorch": "2.13"}


def _render(body: str, variant=VARIANT) -> dict:
    head = "package:\n  name: demo\n  version: 1.2.3\nbuild:\n  number: 4\n"
    return cbr.render_text(head + body, dict(variant))


def test_compiler_and_stdlib_follow_the_variant_keys():
    reqs = _render("requirements:\n  build:\n    - {{ compiler('c') }}\n    - {{ compiler('cuda') }}\n"
                   "    - {{ compiler('cxx') }}\n    - {{ stdlib('c') }}\n")["requirements"]["build"]
    # cxx has no variant key here: conda-build's default for linux is gxx, with no version.
    assert reqs == ["gcc_linux-64 15.*", "cuda-nvcc_linux-64 13.0.*", "gxx_linux-64", "sysroot_linux-64 2.28.*"]
    arm = _render("requirements:\n  build:\n    - {{ compiler('c') }}\n",
                  dict(VARIANT, target_platform="linux-aarch64"))
    assert arm["requirements"]["build"] == ["gcc_linux-aarch64 15.*"]


def test_selectors_keep_or_drop_lines():
    meta = _render("requirements:\n  host:\n    - a  # [linux]\n    - b  # [not linux]\n"
                   "    - c  # [py>=312]\n    - d  # [cuda_compiler_version == '12.9']\n")
    assert meta["requirements"]["host"] == ["a", "c"]


def test_pkg_variables_and_pins():
    meta = _render(
        "requirements:\n  run:\n    - {{ pin_compatible('pytorch', max_pin='x.x') }}\n"
        "    - {{ PKG_NAME }}-{{ PKG_VERSION }}-{{ PKG_BUILDNUM }}-{{ PKG_HASH }}-{{ CONDA_PY }}\n"
        "  run_constrained:\n    - {{ pin_subpackage('demo', max_pin='x.x') }}\n"
    )
    assert meta["requirements"]["run"] == ["pytorch >=2.13,<2.14.0a0", "demo-1.2.3-4-h0000000-312"]
    assert meta["requirements"]["run_constrained"] == ["demo >=1.2.3,<1.3.0a0"]


def test_spec_rules_before_solving():
    assert cbr.ensure_valid_spec("gcc_linux-64 15") == "gcc_linux-64 15.*"
    assert cbr.ensure_valid_spec("pytorch 2.13.* cuda*") == "pytorch 2.13.* cuda*"
    assert cbr.ensure_valid_spec("cuda-version ==13.0") == "cuda-version ==13.0"
    assert cbr.canonical_spec("python  >=3.12,<3.13.0a0") == "python 3.12.*"
    assert cbr.canonical_spec("numpy =2.1") == "numpy 2.1.*"
    meta = {"requirements": {"host": ["python", "cuda_compiler_version"], "run": ["python"]}}
    conda = cbr.from_conda_build(meta, VARIANT)
    assert conda.requirements["host"] == ["cuda_compiler_version 13.0.*", "python 3.12.*"]
    assert conda.requirements["run"] == ["python 3.12.*"]  # pin_run_as_build: >=3.12,<3.13.0a0


def test_variant_expansion_zips_and_multiplies():
    data = {"a": ["1", "2"], "b": ["x", "y"], "c": ["p", "q", "r"], "zip_keys": [["a", "b"]]}
    assert len(cbr.expand_variants(data)) == 6
    assert {(v["a"], v["b"]) for v in cbr.expand_variants(data)} == {("1", "x"), ("2", "y")}
    with pytest.raises(cbr.RenderError, match="different lengths"):
        cbr.expand_variants({"a": ["1"], "b": ["x", "y"], "zip_keys": [["a", "b"]]})


def test_undefined_jinja_names_fail_like_conda_build():
    with pytest.raises(cbr.RenderError, match="no_such_key"):
        _render("requirements:\n  host:\n    - foo {{ no_such_key }}\n")
