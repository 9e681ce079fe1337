"""The matrix in variants/ renders with rattler-build, every variant has the right pins, and a selection chooses
the built packages rattler-build renders for it."""

import fnmatch
import re

import pytest
from ssm_conda.archs import parse_arch_list
from ssm_conda.channels import name_and_build_of
from ssm_conda.console import UsageError
from ssm_conda.matrix import (
    STANDIN_OVERRIDES,
    TARGET_PLATFORM,
    build_glob,
    choose_built,
    load_variant_files,
    plan,
    select,
    standin_overrides,
)
from ssm_conda.project import NAMES
from ssm_conda.selection import Selection

from tests.rendered import variants, whole_matrix

FILES = load_variant_files()
ALL = whole_matrix()
PLATFORMS = ("linux-64", "linux-aarch64")


def test_one_file_per_cuda_version_with_at_least_12_9_and_13_0():
    cudas = [f.cuda for f in FILES]
    assert len(cudas) == len(set(cudas))
    assert {"12.9", "13.0"} <= set(cudas)


@pytest.mark.parametrize("vfile", FILES, ids=lambda f: f.path.name)
def test_variant_file_is_self_contained(vfile):
    for key in ("cuda_compiler", "cuda_compiler_version", "c_compiler", "c_compiler_version",
                "cxx_compiler", "cxx_compiler_version", "c_stdlib", "c_stdlib_version",
                "python", "pytorch", "gpu_generation", "cuda_arch_list", "cuda_arch_supported", "zip_keys"):
        assert key in vfile.data, key
    assert vfile.pythons == ["3.10"]  # conda-forge's python_min: each package serves it and every later CPython
    assert ["gpu_generation", "cuda_arch_list"] in vfile.data["zip_keys"]


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("name", [f.path.name for f in FILES])
def test_generation_lists(name, platform):
    """"all" first; every list ascending (the recipes read the lowest entry from the front), PTX on
    its newest entry only, nvcc can build it, nothing below 7.5; a generation is one major of the
    all-architecture list."""
    vfile = next(f for f in load_variant_files(target_platform=platform) if f.path.name == name)
    assert list(vfile.generations)[0] == "all"
    everything = parse_arch_list(vfile.arch_list)
    for generation, arch_list in vfile.generations.items():
        entries = parse_arch_list(arch_list)
        assert [e.key for e in entries] == sorted(e.key for e in entries), arch_list
        assert [e.ptx for e in entries] == [False] * (len(entries) - 1) + [True], arch_list
        assert {e.cap for e in entries} <= set(vfile.arch_supported)
        assert all(e.key >= (7, 5) for e in entries), "upstream supports 7.5 and newer"
        if generation != "all":
            assert len({e.key[0] for e in entries}) == 1, f"{generation} spans majors: {arch_list}"
            assert {e.cap for e in entries} <= {e.cap for e in everything}


def test_cuda13_lists_follow_conda_forge_pytorch():
    """pytorch-cpu-feedstock recipe/build.sh, CUDA 13.0: linux-64 and linux-aarch64 (which adds 8.7)."""
    lists = {p: next(f for f in load_variant_files(target_platform=p) if f.cuda == "13.0").arch_list for p in PLATFORMS}
    assert lists == {"linux-64": "7.5;8.0;8.6;9.0;10.0;11.0;12.0+PTX",
                     "linux-aarch64": "7.5;8.0;8.6;8.7;9.0;10.0;11.0;12.0+PTX"}


def test_conda_forge_compiler_pairing():
    by_cuda = {f.cuda: f.data for f in FILES}
    assert by_cuda["12.9"]["c_compiler_version"] == ["14"] and by_cuda["12.9"]["c_stdlib_version"] == ["2.17"]
    assert by_cuda["13.0"]["c_compiler_version"] == ["15"] and by_cuda["13.0"]["c_stdlib_version"] == ["2.28"]


def test_sm103_never_in_cuda13_defaults():
    for vfile in FILES:
        if int(vfile.cuda.split(".")[0]) >= 13:
            assert all("10.3" not in lst.split(";") for lst in vfile.generations.values())
            assert "10.3" not in vfile.arch_supported


def test_full_matrix_size():
    """Every (CUDA, Python, torch, generation) once per package, causal-conv1d's first (mamba-ssm needs them)."""
    per_package = sum(len(f.pythons) * len(f.torches) * len(f.generations) for f in FILES)
    assert [v.package for v in ALL] == [p for p in NAMES for _ in range(per_package)]
    assert len({(v.package, v.build_string) for v in ALL}) == len(ALL)


@pytest.mark.parametrize("variant", ALL, ids=lambda v: f"{v.package}-{v.label}")
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
    assert ("python" if variant.package == "causal-conv1d" else "python >=3.11") in req["run"]  # transformers: 3.11+
    assert recipe["build"]["script"]["env"]["TORCH_CUDA_ARCH_LIST"] == variant.archs
    assert variant.archs == variant.variant_file.generations[variant.generation]
    assert recipe["build"]["dynamic_linking"]["overlinking_behavior"] == "error"
    assert "binary_relocation" not in recipe["build"]
    py = variant.python.replace(".", "")
    torch = variant.torch.replace(".", "")
    assert re.fullmatch(rf"cuda{cuda_major}{cuda_minor}_cp{py}abi3_torch{torch}_{variant.generation}_h[0-9a-f]{{7}}_0",
                        variant.build_string)
    # conda-forge's abi3 convention: one package for every CPython from the variant's on
    assert recipe["build"]["python"]["version_independent"] is True and "python-abi3" in req["host"]


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("package", NAMES)
def test_generation_gates(package, platform):
    """Each package needs cuda-arch at its lowest architecture (cuda-arch's run_export); a generation
    package also needs __cuda_arch within its major, and the all-architecture one comes last for the
    solver. linux-aarch64 renders like linux-64 (it cannot be built here)."""
    variants = plan(Selection(cuda="13.0", python="3.12", torch="2.13", packages=(package,)), target_platform=platform)
    assert [v.generation for v in variants] == ["all", "sm8x", "sm90", "sm10x", "sm12x"]
    gates = {}
    for v in variants:
        recipe = v.rendered.recipe.to_dict()
        lowest = v.archs.split(";")[0].removesuffix("+PTX")
        assert f"cuda-arch =={lowest}" in recipe["requirements"]["host"]
        gates[v.generation] = [r for r in recipe["requirements"]["run"] if r.startswith("__cuda_arch")]
        assert recipe["build"].get("variant", {}).get("down_prioritize_variant", 0) == (1 if v.generation == "all" else 0)
    assert gates == {"all": [], "sm8x": ["__cuda_arch >=8.0,<9"], "sm90": ["__cuda_arch >=9.0,<10"],
                     "sm10x": ["__cuda_arch >=10.0,<11"], "sm12x": ["__cuda_arch >=12.0,<13"]}
    if platform == "linux-aarch64":
        assert variants[1].archs == "8.0;8.6;8.7+PTX"


def test_generation_selection():
    variants = plan(Selection(cuda="13.0", python="3.12", torch="2.13", generations=("sm90", "all"),
                              packages=("causal-conv1d",)))
    assert [(v.generation, v.archs) for v in variants] == [("all", "7.5;8.0;8.6;9.0;10.0;11.0;12.0+PTX"),
                                                          ("sm90", "9.0+PTX")]
    assert all(v.label.endswith(f"-{v.generation}") for v in variants)


def test_generation_selects_the_files_that_list_it():
    """Only cuda130.yaml splits by generation: sm90 alone leaves cuda129.yaml out, with "all" it keeps its one package."""
    chosen = select(Selection(generations=("sm90",)))
    assert [(f.cuda, c["gpu_generation"], c["cuda_arch_list"]) for f, c in chosen] == [("13.0", ["sm90"], ["9.0+PTX"])]
    chosen = select(Selection(generations=("sm90", "all")))
    assert [(f.cuda, c["gpu_generation"]) for f, c in chosen] == [("12.9", ["all"]), ("13.0", ["all", "sm90"])]
    aarch64 = plan(Selection(python="3.12", torch="2.13", generations=("sm90",), packages=("causal-conv1d",)),
                   target_platform="linux-aarch64")
    assert [(v.cuda, v.generation, v.archs) for v in aarch64] == [("13.0", "sm90", "9.0+PTX")]


def test_python_and_torch_outside_the_files_are_overrides():
    (v,) = plan(Selection(cuda="13.0", python="3.11", torch="2.14", arch="9.0", packages=("causal-conv1d",)))
    assert (v.python, v.torch, v.archs, v.generation) == ("3.11", "2.14", "9.0", "custom")
    assert v.build_string.startswith("cuda130_cp311abi3_torch214_custom_h")
    gate = [r for r in v.rendered.recipe.to_dict()["requirements"]["run"] if r.startswith("__cuda_arch")]
    assert gate == ["__cuda_arch >=9.0,<10"]


def test_native_and_lists_are_one_package_gated_on_their_lowest_architecture():
    (v,) = plan(Selection(cuda="13.0", python="3.12", torch="2.13", arch="native", packages=("mamba-ssm",)),
                detect=lambda: ["9.0", "8.6"])
    assert (v.generation, v.archs) == ("native", "8.6;9.0")
    assert "__cuda_arch >=8.6,<9" in v.rendered.recipe.to_dict()["requirements"]["run"]


def test_arch_is_part_of_the_hash():
    a = plan(Selection(cuda="13.0", python="3.12", torch="2.13", arch="9.0"))[0]
    b = plan(Selection(cuda="13.0", python="3.12", torch="2.13", arch="8.0"))[0]
    assert a.build_string != b.build_string


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        (Selection(cuda="11.8"), "unknown CUDA version '11.8'; accepted: 12.9, 13.0"),
        (Selection(python="3"), "unknown Python version '3'; accepted: 3.10"),
        (Selection(torch="latest"), "unknown pytorch version 'latest'; accepted: 2.10, 2.11, 2.12, 2.13"),
        (Selection(cuda="13.0", arch="10.3"), "unknown architecture '10.3' for CUDA 13.0"),
        (Selection(cuda="13.0", arch="sm_90"), "unknown architecture 'sm_90' for CUDA 13.0"),
        (Selection(cuda="13.0", generations=("sm100",)),
         "unknown GPU generation of variants/cuda130.yaml 'sm100'; accepted: all, sm8x, sm90, sm10x, sm12x"),
        (Selection(cuda="12.9", generations=("sm90",)), "unknown GPU generation of variants/cuda129.yaml 'sm90'; accepted: all"),
        (Selection(generations=("sm77",)), "unknown GPU generation 'sm77'; accepted: all, sm8x, sm90, sm10x, sm12x"),
        (Selection(generations=("sm90", "sm77")), "unknown GPU generation 'sm77'; accepted: all, sm8x, sm90, sm10x, sm12x"),
        (Selection(generations=("sm90",), arch="9.0"), "--generation and --arch exclude each other"),
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
    assert vfile.resolve_arch("12.0+PTX;8.0") == "8.0;12.0+PTX", "ascending: the recipes read the lowest first"
    with pytest.raises(UsageError, match="--arch native found no GPU"):
        vfile.resolve_arch("native", detect=lambda: [])


def file_names(*selections: Selection) -> list[str]:
    """Package file names exactly as the recipes name them (the hash is rattler-build's)."""
    return sorted(f"{v.package}-1.0-{v.build_string}.conda" for s in selections for v in plan(s))


def test_a_selection_chooses_what_rattler_build_renders_for_it():
    names = file_names(Selection(cuda="13.0", torch="2.13", generations=("all", "sm90")),
                       Selection(cuda="12.9", torch="2.12"))

    def chosen(**kw) -> list[str]:
        return sorted(choose_built(names, lambda n: name_and_build_of(n), Selection(**kw)))

    assert chosen() == names
    assert choose_built(["other-1.0-h0_0.conda"], name_and_build_of, Selection()) == ["other-1.0-h0_0.conda"]
    assert choose_built(["other-1.0-h0_0.conda"], name_and_build_of, Selection(packages=("mamba-ssm",))) == []
    assert chosen(cuda="13.0", generations=("sm90",)) == [n for n in names if "_sm90_" in n]
    assert chosen(cuda="12.9") == [n for n in names if "cuda129" in n]
    assert chosen(packages=("mamba-ssm",)) == [n for n in names if n.startswith("mamba-ssm-")]
    assert chosen(cuda="13.0", python="3.10", torch="2.13", generations=("all",), packages=("causal-conv1d",)) == \
        [n for n in names if n.startswith("causal-conv1d-") and "cuda130" in n and "_all_" in n]
    assert chosen(python="3.11") == []  # an override: a package for 3.11 and later, which none of these is
    # another hash (a build against a stand-in channel's compilers): the same variant
    other_hash = [n.replace("_h", "_hffff", 1) for n in names]
    assert len(choose_built(other_hash, name_and_build_of, Selection(cuda="12.9"))) == 2


def test_an_unknown_value_is_one_line_naming_what_is_accepted():
    with pytest.raises(UsageError, match=r"unknown CUDA version '11.8'"):
        choose_built(["x"], name_and_build_of, Selection(cuda="11.8"))


def test_the_build_glob_is_what_rattler_build_renders_less_the_hash():
    """doctor's install commands pin a variant by this glob: every rendered build of the variant
    matches it, no other variant's does."""
    cuda130 = next(f for f in load_variant_files() if f.cuda == "13.0")
    every = [v.build_string for v in variants(cuda="13.0", package="causal-conv1d")]
    for generation in (None, "sm90"):
        pattern = build_glob(cuda130, "2.13", generation)
        chosen = {b for b in every if fnmatch.fnmatchcase(b, pattern)}
        assert chosen == {v.build_string for v in plan(Selection(
            cuda="13.0", torch="2.13", generations=(generation,) if generation else None,
            packages=("causal-conv1d",)))}, pattern
    assert build_glob(cuda130, "2.13", "sm90") == "cuda130_cp310abi3_torch213_sm90_*"


def test_standin_overrides_are_read_from_file_channels(tmp_path):
    (tmp_path / STANDIN_OVERRIDES).write_text("c_compiler_version: ['12']\nc_stdlib_version: ['2.36']\n")
    overrides = standin_overrides(["conda-forge", tmp_path.as_uri()])
    assert overrides == {"c_compiler_version": ["12"], "c_stdlib_version": ["2.36"]}
    (v,) = plan(Selection(cuda="13.0", python="3.11", torch="2.14", generations=("sm90",), packages=("causal-conv1d",)),
                overrides=overrides)
    assert f"gcc_{TARGET_PLATFORM} 12.*" in v.rendered.recipe.to_dict()["requirements"]["build"]
