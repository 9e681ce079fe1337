"""Which build conda (26.7.1, its classic solver and conda-rattler-solver's) installs for each GPU, with the
`__cuda_arch` plugin and without, over the same channel of rendered records as tests/recipe/test_generations.py;
and where pixi's solver (py-rattler) and conda agree, case by case.

The one difference: conda's classic solver ignores `constrains` on virtual packages (conda/conda#10803),
so cuda-arch's `__cuda_arch X.*` does not hold there, and a GPU older than every package's lowest
architecture (a V100, 7.0) gets the all-architecture package from conda where py-rattler refuses. The
recipes' direct `__cuda_arch` dependency of the generation packages is what gates in conda. With
conda-rattler-solver (resolvo, pixi's solver) conda enforces those constrains and refuses as pixi does.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from rattler.exceptions import SolverError
from ssm_conda.matrix import plan
from ssm_conda.selection import Selection

from tests.conda_client import Conda, linked
from tests.recipe.generation_channel import picked, write_channel

VARIANTS = plan(Selection(cuda="13.0", python="3.12", torch="2.13"), target_platform="linux-64")
OURS = ("causal-conv1d", "mamba-ssm")


@pytest.fixture(params=["classic", "rattler"])
def either_solver(conda, request) -> Conda:
    """conda with its classic solver, and with conda-rattler-solver's."""
    return replace(conda, solver=request.param)


@pytest.fixture(scope="module")
def channel(tmp_path_factory) -> str:
    return write_channel(tmp_path_factory.mktemp("generations"), VARIANTS)


def generation_of(builds: dict[str, str]) -> set[str]:
    return {build.split("_")[3] for build in builds.values()}


def conda_picks(conda: Conda, channel: str, cuda_arch: str | None, plugins: bool) -> set[str] | str:
    """The generation conda would install mamba-ssm (and causal-conv1d with it) of, or its refusal."""
    answer = conda.json("create", "--dry-run", "-p", str(conda.root / "env"), "-c", channel, "mamba-ssm",
                        plugins=plugins, cuda_arch=cuda_arch)
    got = linked(answer, *OURS)
    if not got:
        return f"{answer.get('exception_name')}: {answer.get('message', '')}"
    assert set(got) == set(OURS), got  # causal-conv1d comes along, of the same generation
    return generation_of(got)


def rattler_picks(channel: str, cuda_arch: str | None) -> set[str] | str:
    """The generation pixi's solver installs mamba-ssm (and causal-conv1d with it) of, or its refusal."""
    try:
        return set(picked(channel, "mamba-ssm", cuda_arch).values())
    except SolverError as exc:
        return f"SolverError: {exc}"


@pytest.mark.parametrize(("cuda_arch", "generation"), [
    pytest.param("7.5", "all", id="T4"),
    pytest.param("8.6", "sm8x", id="A6000"),
    pytest.param("9.0", "sm90", id="H100"),
    pytest.param("10.0", "sm10x", id="B200"),
    pytest.param("12.0", "sm12x", id="RTX-PRO-6000"),
    pytest.param(None, "all", id="no __cuda_arch"),
])
def test_conda_with_the_plugin_takes_the_generation_of_the_gpu_as_pixi_does(either_solver, channel, cuda_arch, generation):
    assert conda_picks(either_solver, channel, cuda_arch, plugins=True) == {generation}
    assert rattler_picks(channel, cuda_arch) == {generation}


@pytest.mark.parametrize("cuda_arch", ["7.5", "8.6", "9.0", "10.0", "12.0", None])
def test_conda_without_the_plugin_sees_no_gpu_and_takes_the_all_architecture_package(conda, channel, cuda_arch):
    """conda 26.7.1 has no __cuda_arch of its own: CONDA_OVERRIDE_CUDA_ARCH means nothing to it, and it
    solves as py-rattler does for a machine without __cuda_arch."""
    assert conda_picks(conda, channel, cuda_arch, plugins=False) == {"all"} == rattler_picks(channel, None)


def test_where_conda_and_pixi_differ_an_unsupported_gpu(conda, channel):
    """A V100 (7.0): py-rattler refuses (cuda-arch's constrains), conda's classic solver installs the
    all-architecture package, which has no sm_70 code (the kernels then fail at run time; the doctor warns)."""
    refusal = rattler_picks(channel, "7.0")
    assert isinstance(refusal, str) and "__cuda_arch 7.0" in refusal
    assert conda_picks(conda, channel, "7.0", plugins=True) == {"all"}


def test_with_the_rattler_solver_conda_refuses_an_unsupported_gpu_as_pixi_does(conda, channel):
    """conda-rattler-solver holds cuda-arch's `constrains: __cuda_arch X.*`: no package for a V100 (7.0), as in pixi."""
    refusal = conda_picks(replace(conda, solver="rattler"), channel, "7.0", plugins=True)
    assert isinstance(refusal, str) and refusal.startswith("RattlerUnsatisfiableError") and "__cuda_arch" in refusal, refusal


def test_conda_refuses_a_generation_package_for_another_gpu(either_solver, channel):
    """What a user sees asking for sm90 on an A6000 (8.6) or without __cuda_arch: a missing package,
    naming the __cuda_arch range (docs/troubleshooting.md translates it)."""
    conda = either_solver
    for cuda_arch in ("8.6", None):
        answer = conda.json("create", "--dry-run", "-p", str(conda.root / "env"), "-c", channel,
                            "mamba-ssm=*=*sm90*", cuda_arch=cuda_arch)
        assert not linked(answer, *OURS)
        assert "__cuda_arch" in answer.get("message", ""), answer.get("message")
