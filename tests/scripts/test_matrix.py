"""The matrix in variants/ renders with rattler-build, and every variant has the right pins."""

import re

import pytest
from ssm_conda.console import UsageError
from ssm_conda.matrix import TARGET_PLATFORM, Selection, load_variant_files, plan, select
from ssm_conda.paths import PACKAGES

FILES = load_variant_files()
ALL = plan()


def test_one_file_per_cuda_version_with_at_least_12_9_and_13_0():
    cudas = [f.cuda for f in FILES]
    assert len(cudas) == len(set(cudas))
    assert {"12.9", "13.0"} <= set(cudas)


@pytest.mark.parametrize("vfile", FILES, ids=lambda f: f.path.name)
def test_variant_file_is_self_contained(vfile):
    for key in ("cuda_compiler", "cuda_compiler_version", "c_compiler", "c_compiler_version",
                "cxx_compiler", "cxx_compiler_version", "c_stdlib", "c_stdlib_version",
                "python", "pytorch", "cuda_arch_list", "cuda_arch_supported", "zip_keys"):
        assert key in vfile.data, key
    assert vfile.pythons == ["3.10", "3.11", "3.12", "3.13", "3.14"]
    assert vfile.arch_list.endswith("+PTX"), "PTX for the newest architecture"
    newest = vfile.arch_list.split(";")[-1].removesuffix("+PTX")
    assert all(float(a) <= float(newest) for a in vfile.arch_list.replace("+PTX", "").split(";"))
    assert set(vfile.arch_list.replace("+PTX", "").split(";")) <= set(vfile.arch_supported)


def test_conda_forge_compiler_pairing():
    by_cuda = {f.cuda: f.data for f in FILES}
    assert by_cuda["12.9"]["c_compiler_version"] == ["14"] and by_cuda["12.9"]["c_stdlib_version"] == ["2.17"]
    assert by_cuda["13.0"]["c_compiler_version"] == ["15"] and by_cuda["13.0"]["c_stdlib_version"] == ["2.28"]


def test_sm103_never_in_cuda13_defaults():
    for vfile in FILES:
        if int(vfile.cuda.split(".")[0]) >= 13:
            assert "10.3" not in vfile.arch_list.split(";") and "10.3" not in vfile.arch_supported


def test_full_matrix_size():
    """Every (CUDA, Python, torch) once per package, causal-conv1d's first (mamba-ssm needs them)."""
    per_package = sum(len(f.pythons) * len(f.torches) for f in FILES)
    assert [v.package for v in ALL] == [p for p in PACKAGES for _ in range(per_package)]
    assert len({(v.package, v.build_string) for v in ALL}) == len(ALL)


@pytest.mark.parametrize("variant", ALL, ids=lambda v: v.label)
def test_each_variant_renders_with_expected_pins(variant):
    recipe = variant.rendered.recipe.to_dict()
    req = recipe["requirements"]
    cuda_major, cuda_minor = variant.cuda.split(".")
    assert f"cuda-nvcc_{TARGET_PLATFORM} {variant.cuda}.*" in req["build"]
    compiler_version = variant.variant_file.data["c_compiler_version"][0]
    assert f"gcc_{TARGET_PLATFORM} {compiler_version}.*" in req["build"]
    assert f"gxx_{TARGET_PLATFORM} {compiler_version}.*" in req["build"]
    assert f"sysroot_{TARGET_PLATFORM} {variant.variant_file.data['c_stdlib_version'][0]}.*" in req["build"]
    assert f"cuda-version =={variant.cuda}" in req["host"]
    assert "cuda-cudart-dev" in req["host"]
    assert f"pytorch {variant.torch}.* cuda*" in req["host"]
    assert f"pytorch {variant.torch}.* cuda*" in req["run"]
    assert "python" in req["run"]
    assert recipe["build"]["script"]["env"]["TORCH_CUDA_ARCH_LIST"] == variant.archs
    assert recipe["build"]["dynamic_linking"]["overlinking_behavior"] == "error"
    assert "binary_relocation" not in recipe["build"]
    py = variant.python.replace(".", "")
    torch = variant.torch.replace(".", "")
    assert re.fullmatch(rf"cuda{cuda_major}{cuda_minor}_py{py}_torch{torch}_h[0-9a-f]{{7}}_0", variant.build_string)


def test_python_and_torch_outside_the_files_are_overrides():
    (v,) = plan(Selection(cuda="13.0", python="3.11", torch="2.14", arch="9.0", packages=("causal-conv1d",)))
    assert (v.python, v.torch, v.archs) == ("3.11", "2.14", "9.0")
    assert v.build_string.startswith("cuda130_py311_torch214_h")


def test_arch_is_part_of_the_hash():
    a = plan(Selection(cuda="13.0", python="3.12", torch="2.13", arch="9.0"))[0]
    b = plan(Selection(cuda="13.0", python="3.12", torch="2.13", arch="8.0"))[0]
    assert a.build_string != b.build_string


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        (Selection(cuda="11.8"), "unknown CUDA version '11.8'; accepted: 12.9, 13.0"),
        (Selection(python="3"), "unknown Python version '3'; accepted: 3.10, 3.11, 3.12, 3.13, 3.14"),
        (Selection(torch="latest"), "unknown pytorch version 'latest'; accepted: 2.12, 2.13"),
        (Selection(cuda="13.0", arch="10.3"), "unknown architecture '10.3' for CUDA 13.0"),
        (Selection(cuda="13.0", arch="sm_90"), "unknown architecture 'sm_90' for CUDA 13.0"),
    ],
)
def test_unknown_values_name_what_is_accepted(selection, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        select(selection)


def test_arch_keywords():
    vfile = next(f for f in FILES if f.cuda == "13.0")
    assert vfile.resolve_arch("all") == vfile.arch_list
    assert vfile.resolve_arch("native", detect=lambda: ["9.0", "12.0"]) == "9.0;12.0"
    assert vfile.resolve_arch("8.0, 9.0+PTX") == "8.0;9.0+PTX"
    with pytest.raises(UsageError, match="--arch native found no GPU"):
        vfile.resolve_arch("native", detect=lambda: [])
