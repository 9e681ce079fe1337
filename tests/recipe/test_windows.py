"""causal-conv1d for win-64 (issue 42), checked without Windows: every variant renders with exactly the requirements
conda-forge's feedstock builds it with, the variant file gives what conda-forge's win_64 .ci_support gives, mamba-ssm
and CUDA 12.9 are left out as the recipes say, and recipe/shared/build-extension.bat is linted for cmd's pitfalls
(tests/test_win64_solve.py solves the environments). Not run here: a build on Windows (docs/building.md)."""

from __future__ import annotations

import re

import pytest
from ssm_conda.matrix import load_variant_files, plan, skipped
from ssm_conda.selection import Selection

from tests.repo import RECIPES_DIR

WIN = load_variant_files(target_platform="win-64")
VARIANTS = plan(Selection(), WIN, target_platform="win-64")
BAT = RECIPES_DIR / "shared" / "build-extension.bat"
# conda-forge/causal-conv1d-feedstock@4d25ef1 .ci_support/win_64_cuda_compiler_version13.0python3.1X.*.yaml (five
# files: Python 3.10 to 3.14), rendered by conda-smithy from conda-forge-pinning@f875045 with its cuda130 migration
CONDA_FORGE_WIN_64 = {"c_stdlib": ["vs"], "cxx_compiler": ["vs2022"], "cuda_compiler": ["cuda-nvcc"],
                      "cuda_compiler_version": ["13.0"], "pytorch": ["2.13"]}
CONDA_FORGE_PYTHON_MIN = "3.10"  # the oldest of them: the abi3 package built with it serves them all
# pytorch-cpu-feedstock recipe/bld.bat, CUDA 13.0, on main (2.13) and the v2.10.x-v2.12.x branches
PYTORCH_WIN_ARCHS = "7.5;8.0;8.6;9.0;10.0;11.0;12.0+PTX"


def test_only_causal_conv1d_and_only_cuda_13_0_build_for_windows():
    """mamba-ssm needs triton, which conda-forge builds for Linux only; pytorch's Windows CUDA 12 build is 12.8."""
    assert {v.package for v in VARIANTS} == {"causal-conv1d"} and {v.cuda for v in VARIANTS} == {"13.0"}
    (vfile,) = [f for f in WIN if f.cuda == "13.0"]
    assert len(VARIANTS) == len(vfile.pythons) * len(vfile.torches) * len(vfile.generations) == 20


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.label)
def test_each_windows_variant_renders_with_exactly_these_requirements(variant):
    recipe = variant.rendered.recipe.to_dict()
    arch_min = variant.archs.split(";")[0].removesuffix("+PTX")
    gate = [f"__cuda_arch >={arch_min},<{int(arch_min.split('.')[0]) + 1}"] if variant.generation != "all" else []
    assert recipe["requirements"] == {
        "build": ["vs2022_win-64", "vs2022_win-64", "cuda-nvcc_win-64 13.0.*", "vs_win-64", "ninja"],
        "host": ["python", "python-abi3", "pip", "setuptools", "wheel", "packaging", "cuda-version ==13.0",
                 f"cuda-arch =={arch_min}", "cuda-cudart-dev", "cuda-crt-dev_win-64", f"pytorch {variant.torch}.* cuda*"],
        "run": [*gate, "python", "packaging", f"pytorch {variant.torch}.* cuda*", "cuda-cudart"]}
    assert recipe["build"]["script"]["file"] == "shared/build-extension.bat"
    assert recipe["build"]["script"]["env"]["TORCH_CUDA_ARCH_LIST"] == variant.archs
    assert recipe["build"]["python"]["version_independent"] is True
    assert recipe["tests"][1]["package_contents"]["files"] == [
        "site-packages/causal_conv1d/_C.pyd", "site-packages/causal_conv1d_cuda.py",
        "site-packages/causal_conv1d/__init__.py"]
    # rendered when the test runs, with the variant's python
    assert recipe["tests"][2]["script"] == "abi3audit %SP_DIR%\\causal_conv1d\\_C.pyd -s -v --assume-minimum-abi3 ${{ python }}"
    assert recipe["tests"][3]["requirements"]["run"] == ["pytest", "einops"]  # no triton, nor the C compiler it needs
    assert re.fullmatch(rf"cuda130_cp{variant.python.replace('.', '')}abi3_torch{variant.torch.replace('.', '')}_"
                        rf"{variant.generation}_h[0-9a-f]{{7}}_0", variant.build_string)


def test_the_windows_variants_are_conda_forge_s():
    """Compilers, stdlib, CUDA and the Pythons as conda-forge's feedstock renders them for win-64; pytorch 2.13 among
    the minors (conda-forge's pytorch has win-64 CUDA 13.0 builds of 2.10 to 2.13); the all-architecture list is
    conda-forge pytorch's on Windows. No compiler or glibc version: conda-forge pins none there."""
    (vfile,) = [f for f in WIN if f.cuda == "13.0"]
    for key, values in CONDA_FORGE_WIN_64.items():
        assert set(values) <= set(vfile.data[key]), key
    assert vfile.data["c_compiler"] == ["vs2022"] and vfile.pythons == [CONDA_FORGE_PYTHON_MIN]
    assert not {"c_compiler_version", "cxx_compiler_version", "c_stdlib_version"} & set(vfile.data)
    assert vfile.arch_list == PYTORCH_WIN_ARCHS
    linux = next(f for f in load_variant_files(target_platform="linux-64") if f.cuda == "13.0")
    assert (vfile.torches, vfile.generations) == (linux.torches, linux.generations)


class FakeStage0:
    def __init__(self, *skip: str) -> None:
        self.skip = list(skip)

    def to_dict(self) -> dict:
        return {"build": {"skip": self.skip}}


@pytest.mark.parametrize(("skip", "variant", "left_out"), [
    (["not (linux or win)"], {"target_platform": "osx-arm64"}, True),
    (["not (linux or win)"], {"target_platform": "win-64"}, False),
    (['win and cuda_compiler_version != "13.0"'], {"target_platform": "win-64", "cuda_compiler_version": "12.9"}, True),
    (['win and cuda_compiler_version != "13.0"'], {"target_platform": "linux-64", "cuda_compiler_version": "12.9"}, False),
    (["not linux"], {"target_platform": "linux-aarch64"}, False),
    (["unix", "false"], {"target_platform": "win-64"}, False),
])
def test_a_recipe_s_skip_is_evaluated_as_rattler_build_does(skip, variant, left_out):
    assert skipped(FakeStage0(*skip), variant) is left_out


def test_a_name_a_skip_does_not_know_is_an_error_not_a_silent_false():
    with pytest.raises(Exception, match="undefined"):
        skipped(FakeStage0("cuda_compiler_verison == '12.9'"), {"target_platform": "win-64"})


# ---- cmd.exe's pitfalls, for a build script rattler-build runs with `cmd /d /c`
QUIET = re.compile(r"(?i)^(::|rem\b|@?echo\b|set\b|if\b|exit\b|for\b|goto\b|:\w|\)|del\b)")


def cmd_problems(script: str) -> list[str]:
    """What goes wrong in cmd, line by line: a failing program that does not stop the script (cmd goes on), a wildcard
    in an argument (cmd expands none) or in a folder's name, an unquoted `set` (trailing blanks become the value), a
    for variable with one % (a batch file needs two), a :: comment inside a ( block ), a .bat run without call
    (it never returns), a single-quoted argument (not a quote to cmd), and no `exit /b 0` at the end."""
    problems, depth = [], 0
    lines = [line.strip() for line in script.splitlines()]
    for number, line in enumerate(lines, 1):
        runs = line and not QUIET.match(line) and depth == 0
        if runs and not lines[number:number + 1] == ["if errorlevel 1 exit /b 1"]:
            problems.append(f"{number}: a failure of `{line}` does not stop the script")
        if runs and "*" in line:
            problems.append(f"{number}: cmd does not expand the wildcard in `{line}`")
        if re.search(r"\*[^\\\s\"]*\\", line):
            problems.append(f"{number}: a wildcard in a folder's name in `{line}`")
        if re.match(r"(?i)(if not defined \w+ )?set (?!\")", line):
            problems.append(f"{number}: unquoted set in `{line}`")
        if re.search(r"(?i)\bfor\b.*(?<!%)%[a-z]\b", line):
            problems.append(f"{number}: a for variable needs %% in a batch file: `{line}`")
        if depth and line.startswith("::"):
            problems.append(f"{number}: a :: comment inside a block breaks it: `{line}`")
        if re.match(r"(?i)[^\s]+\.(bat|cmd)\b", line.strip('"')):
            problems.append(f"{number}: a batch file run without call never returns: `{line}`")
        if re.search(r" '[^']*' ", f" {line} ") and not line.startswith("::"):
            problems.append(f"{number}: single quotes do not quote in cmd: `{line}`")
        depth += line.count("(") - line.count(")") if not line.startswith("::") else 0
    if [line for line in lines if line][-1:] != ["exit /b 0"]:
        problems.append("the script does not end with exit /b 0 (its status would be the last command's)")
    return problems


def test_the_windows_build_script_has_none_of_cmd_s_pitfalls():
    assert cmd_problems(BAT.read_text()) == []


@pytest.mark.parametrize(("line", "problem"), [
    ('"%PYTHON%" -m pip install . -vv --no-deps', "does not stop the script"),
    ('for %%f in (dist\\*.whl) do "%PYTHON%" -m pip install %%f\nif errorlevel 1 exit /b 1\n'
     'pip install dist\\*.whl\nif errorlevel 1 exit /b 1', "does not expand the wildcard"),
    ('del /q "%SP_DIR%\\causal_conv1d-*.dist-info\\direct_url.json"', "a wildcard in a folder's name"),
    ("set MAX_JOBS=%CPU_COUNT% ", "unquoted set"),
    ("for /d %d in (x) do echo %d", "needs %%"),
    ('if not defined X (\n:: a comment here\n    exit /b 1\n)', "inside a block"),
    ("other-script.bat", "without call"),
    ("\"%PYTHON%\" -c 'print(1)'\nif errorlevel 1 exit /b 1", "single quotes"),
])
def test_each_pitfall_planted_in_the_script_is_found(line, problem):
    planted = BAT.read_text().replace("exit /b 0", f"{line}\nexit /b 0")
    assert any(problem in found for found in cmd_problems(planted)), cmd_problems(planted)


def test_a_script_that_does_not_end_with_exit_0_is_found():
    assert cmd_problems(BAT.read_text().replace("exit /b 0", ""))[-1].startswith("the script does not end with exit /b 0")
