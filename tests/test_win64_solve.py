"""causal-conv1d's win-64 environments solve (issue 42 item 2): for every win-64 variant plan() renders, the build, host
and run environments solve with py-rattler against a metadata-only win-64 stand-in of conda-forge
(tests/win64_records.yaml: conda-forge's names and dependencies, no binaries), as rattler-build solves them:

- build: the rendered build requirements;
- host: the rendered host requirements, a bare name that is a variant key taking the variant's value (python =3.12),
  plus the strong run_exports of the build environment's direct requirements;
- run: the rendered run requirements plus the build environment's strong and the host environment's weak and strong
  run_exports (of direct requirements): vc, vc14_runtime, ucrt (vs2022_win-64), cuda-version (cuda-nvcc_win-64,
  cuda-crt-dev_win-64), cpython and _python_abi3_support (python-abi3; python's python_abi is dropped, as rattler-build
  drops it for a version-independent package), pytorch and libtorch x.x (pytorch), cuda-arch (cuda-arch).

The machine: __win, __cuda 13.0 (conda-forge's CONDA_OVERRIDE_CUDA: pytorch's CUDA builds depend on __cuda) and, for a
GPU-generation variant, __cuda_arch at the generation's lowest architecture. A conflict planted in the stand-in (a
record removed, __cuda or the right __cuda_arch missing) fails the solve with rattler's SolverError."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from rattler import (
    BuildString,
    Channel,
    GenericVirtualPackage,
    MatchSpec,
    PackageName,
    SparseRepoData,
    Version,
    solve_with_sparse_repodata,
)
from rattler.exceptions import SolverError
from ssm_conda.matrix import load_variant_files, plan
from ssm_conda.selection import Selection

from tests import win64_standin

VARIANTS = plan(Selection(packages=("causal-conv1d",)), load_variant_files(target_platform="win-64"), target_platform="win-64")
RECORDS = win64_standin.entries()
CUDA = "13.0"


def arch_min(variant) -> str:
    return variant.archs.split(";")[0].removesuffix("+PTX")


def machine(variant, cuda: str | None = CUDA, cuda_arch: str | None = "lowest") -> list[GenericVirtualPackage]:
    """The virtual packages: __win, __cuda and, for a generation variant, __cuda_arch at its lowest architecture."""
    if cuda_arch == "lowest":
        cuda_arch = None if variant.generation == "all" else arch_min(variant)
    given = {"__win": "0", "__cuda": cuda, "__cuda_arch": cuda_arch}
    return [GenericVirtualPackage(PackageName(n), Version(v), BuildString("0")) for n, v in given.items() if v is not None]


class Channel64:
    """A channel of stand-in records (win-64 and noarch), read once."""

    def __init__(self, folder: Path, records: list[dict[str, Any]]) -> None:
        uri = win64_standin.write(folder, records)
        self.sparse = [SparseRepoData(Channel(uri), s, folder / s / "repodata.json") for s in win64_standin.SUBDIRS]
        self.run_exports = win64_standin.run_exports(records)

    def solve(self, specs: list[str], virtual: list[GenericVirtualPackage]) -> list:
        return asyncio.run(solve_with_sparse_repodata(specs, self.sparse, virtual_packages=virtual))

    def exported(self, solved: list, direct: list[str], *kinds: str) -> list[str]:
        """The run_exports of `kinds` of the solved packages that `direct` requires by name."""
        names = {MatchSpec(s).name.normalized for s in direct}
        return [spec for r in solved if r.name.normalized in names
                for kind in kinds for spec in self.run_exports[(r.name.normalized, str(r.version), str(r.build))].get(kind, [])]


def with_variant(specs: list[str], variant) -> list[str]:
    """rattler-build's variant on a bare requirement that is a variant key: `python` -> `python =3.12`."""
    keys = variant.rendered.variant
    out = []
    for spec in specs:
        value = keys.get(spec) if " " not in spec else None
        out.append(spec if value is None else f"{spec} ={value}" if re.fullmatch(r"[\w.]+", value) else f"{spec} {value}")
    return out


def requirements(variant) -> dict[str, list[str]]:
    return variant.rendered.recipe.to_dict()["requirements"]


def solve_environments(channel: Channel64, variant, virtual: list[GenericVirtualPackage]) -> dict[str, Any]:
    """The build, host and run environments of a variant as rattler-build solves them, with the specs each got."""
    req = requirements(variant)
    build_specs = with_variant(req["build"], variant)
    build = channel.solve(build_specs, virtual)
    strong = channel.exported(build, build_specs, "strong")
    host_specs = [*with_variant(req["host"], variant), *strong]
    host = channel.solve(host_specs, virtual)
    exported = [s for s in channel.exported(host, with_variant(req["host"], variant), "weak", "strong")
                if not s.startswith("python_abi ")]  # version-independent: no Python X.Y pinned
    run_specs = list(dict.fromkeys([*req["run"], *strong, *exported]))  # vs2022_win-64 and vs_win-64 export alike
    run = channel.solve(run_specs, virtual)
    return {"build": build, "host": host, "run": run, "run_specs": run_specs}


def picked(solved: list) -> dict[str, tuple[str, str]]:
    return {r.name.normalized: (str(r.version), str(r.build)) for r in solved}


@pytest.fixture(scope="module")
def conda_forge(tmp_path_factory) -> Channel64:
    return Channel64(tmp_path_factory.mktemp("win64"), RECORDS)


def test_the_stand_in_is_metadata_only_and_win_64():
    subdirs = {e["repodata"]["subdir"] for e in RECORDS}
    assert subdirs == {"win-64", "noarch"} and len(VARIANTS) == 20
    assert all(re.search(r"h[12]c0ffee", e["repodata"]["build"]) for e in RECORDS if e["repodata"]["name"] != "python_abi")
    stubs = {e["repodata"]["name"] for e in RECORDS if e["stub"]}
    assert all(not e["repodata"]["depends"] for e in RECORDS if e["stub"])
    assert {"filelock", "fsspec", "jinja2", "networkx", "optree", "pybind11", "sympy", "typing_extensions", "llvm-openmp",
            "libblas", "mkl", "cuda-cupti"} <= stubs


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.label)
def test_build_host_and_run_environments_solve(conda_forge, variant):
    envs = solve_environments(conda_forge, variant, machine(variant))
    build, host, run = (picked(envs[k]) for k in ("build", "host", "run"))
    py, torch, lowest = variant.python, variant.torch, arch_min(variant)
    py_nodot = py.replace(".", "")

    # build: VS 2022 (vs_win-64 resolves to 2022.14 through vs2022_win-64's constraint) and nvcc 13.0 with its chain
    assert build["vs2022_win-64"][0] == "19.44.35207" and build["vs_win-64"][0] == "2022.14"
    assert build["cuda-nvcc_win-64"][0].startswith("13.0.") and build["cuda-version"][0] == "13.0"
    assert {"cuda-nvcc-impl", "cuda-nvcc-tools", "cuda-crt-tools", "cuda-crt-dev_win-64", "cuda-nvvm-impl",
            "libnvptxcompiler-dev_win-64", "cuda-cudart-dev_win-64", "cuda-cccl_win-64", "ninja", "vc", "vc14_runtime",
            "vcomp14", "ucrt"} <= set(build)

    # host: the variant's Python and its python-abi3, a CUDA 13.0 build of the variant's pytorch minor, its libtorch,
    # cuda-arch at the lowest
    assert host["python"][0].startswith(f"{py}.") and host["python_abi"] == (py, f"8_cp{py_nodot}")
    assert host["python-abi3"][0] == py
    assert host["pytorch"][0].startswith(f"{torch}.") and host["pytorch"][1].startswith(f"cuda130_mkl_py{py_nodot}_")
    assert host["libtorch"][0] == host["pytorch"][0] and host["libtorch"][1].startswith("cuda130_mkl_")
    assert host["cuda-version"][0] == "13.0" and host["cuda-arch"][0] == lowest
    assert {"cuda-cudart-dev", "cuda-crt-dev_win-64", "pip", "wheel", "packaging"} <= set(host)
    assert host["setuptools"][0] == "80.9.0"  # pytorch's setuptools <82

    # run: the run_exports reached the run requirements, and the run environment is the variant's
    major, minor = map(int, host["pytorch"][0].split(".")[:2])
    version = host["pytorch"][0]
    assert {"vc >=14.3,<15", "vc14_runtime >=14.44.35208", "ucrt >=10.0.20348.0", "cuda-version >=13.0,<14",
            f"cpython >={py}", "_python_abi3_support 1.*", f"pytorch >={version},<{major}.{minor + 1}.0a0",
            f"libtorch >={version},<{major}.{minor + 1}.0a0", f"cuda-arch >={lowest}"} <= set(envs["run_specs"])
    assert not [s for s in envs["run_specs"] if s.startswith("python_abi")], envs["run_specs"]
    # any CPython from the variant's on (the solver takes the newest), a GIL one, with the host's pytorch minor
    assert run["cpython"][0] >= py and "python-gil" in run and run["python"][0] == run["cpython"][0]
    assert run["pytorch"][0].startswith(f"{torch}.") and run["libtorch"][0] == run["pytorch"][0]
    assert run["cuda-cudart"][0].startswith("13.0.") and run["cuda-version"][0] == "13.0"
    assert {"vc", "vc14_runtime", "ucrt", "packaging"} <= set(run)
    if variant.generation != "all":  # the machine's GPU has the generation's lowest architecture
        assert run["cuda-arch"][0] == lowest


# --------------------------------------------------------------------------- planted conflicts fail the solve

TORCH_213 = next(v for v in VARIANTS if (v.python, v.torch, v.generation) == ("3.10", "2.13", "all"))
TORCH_212 = next(v for v in VARIANTS if (v.python, v.torch, v.generation) == ("3.10", "2.12", "all"))
SM8X = next(v for v in VARIANTS if (v.python, v.torch, v.generation) == ("3.10", "2.13", "sm8x"))


def without(*names: str, version: str | None = None) -> list[dict[str, Any]]:
    """The stand-in's records less those of `names` (of `version` only, if given)."""
    return [e for e in RECORDS if not (e["repodata"]["name"] in names and version in (None, e["repodata"]["version"]))]


def test_without_a_driver_pytorch_s_cuda_build_does_not_install(conda_forge):
    """pytorch's win CUDA builds depend on __cuda: a CI runner without a GPU needs CONDA_OVERRIDE_CUDA."""
    req = requirements(TORCH_213)
    conda_forge.solve(with_variant(req["build"], TORCH_213), machine(TORCH_213, cuda=None))  # nvcc needs no driver
    with pytest.raises(SolverError, match="__cuda"):
        conda_forge.solve(with_variant(req["host"], TORCH_213), machine(TORCH_213, cuda=None))


def test_without_cuda_crt_dev_neither_nvcc_nor_the_host_solves(tmp_path):
    channel = Channel64(tmp_path, without("cuda-crt-dev_win-64"))
    req = requirements(TORCH_213)
    for specs in (req["build"], req["host"]):
        with pytest.raises(SolverError, match="cuda-crt-dev_win-64"):
            channel.solve(with_variant(specs, TORCH_213), machine(TORCH_213))


def test_without_pytorch_2_13_only_the_2_13_variants_fail(tmp_path):
    channel = Channel64(tmp_path, without("pytorch", version="2.13.0"))
    solve_environments(channel, TORCH_212, machine(TORCH_212))
    with pytest.raises(SolverError, match="pytorch"):
        solve_environments(channel, TORCH_213, machine(TORCH_213))


def test_without_an_older_setuptools_pytorch_does_not_install(tmp_path):
    """pytorch's run pins setuptools <82; conda-forge's newest is 82.0.1."""
    channel = Channel64(tmp_path, without("setuptools", version="80.9.0"))
    with pytest.raises(SolverError, match="setuptools"):
        solve_environments(channel, TORCH_213, machine(TORCH_213))


@pytest.mark.parametrize("gpu", ["7.5", "9.0"])
def test_a_generation_build_does_not_solve_for_another_generation_s_gpu(conda_forge, gpu):
    """sm8x's host has cuda-arch ==8.0 (constrains __cuda_arch 8.0.*) and its run needs __cuda_arch >=8.0,<9."""
    with pytest.raises(SolverError, match="__cuda_arch"):
        solve_environments(conda_forge, SM8X, machine(SM8X, cuda_arch=gpu))
    run = requirements(SM8X)["run"]
    with pytest.raises(SolverError, match="__cuda_arch"):
        conda_forge.solve(run, machine(SM8X, cuda_arch=gpu))
