"""Which build a machine gets: pixi's solver (py-rattler) over the records of every GPU generation of
both recipes (CUDA 13.0, Python 3.12, torch 2.13), with the machine's virtual packages supplied.

The records come from rattler-build's rendering of the real recipes (tests/recipe/generation_channel.py);
tests/test_end_to_end.py solves against packages it really built.
"""

from __future__ import annotations

import pytest
from rattler.exceptions import SolverError
from ssm_conda.matrix import plan
from ssm_conda.selection import Selection
from ssm_conda_dev.solving import solve_for_machine

from tests.recipe.generation_channel import package_record, picked, write_channel

VARIANTS = plan(Selection(cuda="13.0", python="3.12", torch="2.13"), target_platform="linux-64")


@pytest.fixture(scope="module")
def channel(tmp_path_factory) -> str:
    return write_channel(tmp_path_factory.mktemp("generations"), VARIANTS)


@pytest.mark.parametrize(("cuda_arch", "generation"), [
    pytest.param("9.0", "sm90", id="H100"),
    pytest.param("8.0", "sm8x", id="A100"),
    pytest.param("8.6", "sm8x", id="A6000"),
    pytest.param("8.9", "sm8x", id="L4: sm_86 code runs there"),
    pytest.param("10.0", "sm10x", id="B200"),
    pytest.param("10.3", "sm10x", id="B300: sm_100 code runs there"),
    pytest.param("12.0", "sm12x", id="RTX-PRO-6000"),
    pytest.param("12.1", "sm12x", id="GB10"),
    pytest.param("7.5", "all", id="T4: no generation package, the all-architecture one has sm_75"),
    pytest.param("11.0", "all", id="Thor: the all-architecture package has sm_110"),
    pytest.param(None, "all", id="no __cuda_arch: login node, CONDA_OVERRIDE_CUDA alone, conda without the plugin"),
])
@pytest.mark.parametrize("package", ["causal-conv1d", "mamba-ssm"])
def test_a_machine_gets_the_build_of_its_gpus(channel, package, cuda_arch, generation):
    got = picked(channel, package, cuda_arch)
    # mamba-ssm brings causal-conv1d of the same generation along
    assert got == {name: generation for name in got} and package in got
    assert len(got) == (2 if package == "mamba-ssm" else 1)


@pytest.mark.parametrize("package", ["causal-conv1d", "mamba-ssm"])
def test_an_older_gpu_gets_nothing_and_an_error_naming_its_architecture(channel, package):
    """A V100 (7.0): nothing carries code for it, so nothing installs, and the solver says why."""
    with pytest.raises(SolverError) as error:
        solve_for_machine([channel], [package], cuda="13.0", cuda_arch="7.0", platform="linux-64")
    message = str(error.value)
    assert "__cuda_arch 7.0" in message and "cuda-arch >=7.5" in message


def test_the_gates_are_what_the_solver_sees():
    """The records carry the recipes' gates: cuda-arch >=lowest for all, __cuda_arch within the
    generation's major for the others, and the all-architecture package is the one pushed back."""
    records = {(v.package, v.generation): package_record(v) for v in VARIANTS}
    for (package, generation), record in records.items():
        gates = [d for d in record["depends"] if d.startswith(("cuda-arch", "__cuda_arch"))]
        expected = {"all": ["cuda-arch >=7.5"], "sm8x": ["__cuda_arch >=8.0,<9", "cuda-arch >=8.0"],
                    "sm90": ["__cuda_arch >=9.0,<10", "cuda-arch >=9.0"],
                    "sm10x": ["__cuda_arch >=10.0,<11", "cuda-arch >=10.0"],
                    "sm12x": ["__cuda_arch >=12.0,<13", "cuda-arch >=12.0"]}[generation]
        assert gates == expected, (package, generation)
        assert ("track_features" in record) == (generation == "all")
