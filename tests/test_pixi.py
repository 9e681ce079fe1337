"""pixi.toml, as pixi's first command needs it: every environment solves on each platform it gets (what `pixi lock`
does, short of the network: tests/pixi_manifest.py), and a second client, conda-workspaces, reads the manifest as
pixi does and runs its tasks."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from rattler.exceptions import SolverError

from tests.conda_client import Conda
from tests.conda_forge_records import records as conda_forge_records
from tests.conda_forge_records import write_channel
from tests.pixi_manifest import Manifest
from tests.repo import REPO_ROOT

PIXI = tomllib.loads((REPO_ROOT / "pixi.toml").read_text())
MANIFEST = Manifest(PIXI)
SOLVES = [(env, platform) for env in MANIFEST.environments() for platform in MANIFEST.environment_platforms(env)]
# What each environment is for, and so where it must solve (docs/building.md's table).
PLATFORMS = {
    "default": ["linux-64", "linux-aarch64", "linux-64-cuda", "linux-aarch64-cuda"],
    "test": ["linux-64", "linux-aarch64"],
    "quetz": ["linux-64", "linux-aarch64", "linux-64-cuda", "linux-aarch64-cuda"],
    "conda-build": ["linux-64", "linux-aarch64", "linux-64-cuda", "linux-aarch64-cuda"],
    "gpu": ["linux-64-cuda", "linux-aarch64-cuda"],
}


@pytest.fixture(scope="module")
def conda_forge(tmp_path_factory) -> str:
    """conda-forge's records of what pixi.toml asks for (tests/conda_forge_records.yaml), as a local channel."""
    return write_channel(tmp_path_factory.mktemp("conda-forge"))


def unsolvable(manifest: Manifest, channels: list[str]) -> dict[str, str]:
    """'environment x platform' -> why it cannot be solved, for every environment on each platform it gets."""
    failed = {}
    for env in manifest.environments():
        for platform in manifest.environment_platforms(env):
            try:
                manifest.solve(env, platform, channels)
            except SolverError as exc:
                failed[f"{env} x {platform.name}"] = " ".join(str(exc).split())
    return failed


def test_each_environment_gets_the_platforms_it_is_for():
    assert {env: [p.name for p in MANIFEST.environment_platforms(env)] for env in MANIFEST.environments()} == PLATFORMS


def test_a_platform_entry_declares_its_driver_on_top_of_the_subdirs_defaults():
    cuda = next(p for p in MANIFEST.platforms if p.name == "linux-aarch64-cuda")
    assert {n: v for n, (v, _) in cuda.virtual.items()} == {"__unix": "0", "__linux": "4.18", "__glibc": "2.28",
                                                            "__archspec": "0", "__cuda": "12.9"}
    assert cuda.virtual["__archspec"][1] == "aarch64" and cuda.subdir == "linux-aarch64"
    assert "__cuda" not in next(p for p in MANIFEST.platforms if p.name == "linux-64").virtual


def test_every_environment_solves_on_each_platform_it_gets(conda_forge):
    """What pixi does before the first task runs: one unsolvable environment stops `pixi run build` for everyone."""
    assert unsolvable(MANIFEST, [conda_forge]) == {}


def test_the_test_feature_on_every_platform_does_not_solve_on_the_cuda_ones(conda_forge):
    """The manifest before: `test` named no platforms, so it got the CUDA 12.9 entries, where cuda-nvcc 13 needs
    cuda-version 13, which constrains __cuda >=13."""
    before = copy.deepcopy(PIXI)
    del before["feature"]["test"]["platforms"]
    failed = unsolvable(Manifest(before), [conda_forge])
    assert set(failed) == {"test x linux-64-cuda", "test x linux-aarch64-cuda"}
    assert all("__cuda >=13" in why and "cuda-version" in why for why in failed.values()), failed


@pytest.mark.parametrize("feature", ["default", *PIXI["feature"]])
def test_a_conflict_planted_in_a_feature_fails_every_environment_that_has_it(conda_forge, feature):
    """A dependency no platform satisfies (glibc 2.99), planted in one feature, fails exactly the environments that
    have the feature, on each of their platforms: each feature's dependencies reach the solve."""
    planted = copy.deepcopy(PIXI)
    (planted if feature == "default" else planted["feature"][feature]).setdefault("dependencies", {})["__glibc"] = ">=2.99"
    manifest = Manifest(planted)
    expected = {f"{env} x {p.name}" for env, features in manifest.environments().items() if feature in features
                for p in manifest.environment_platforms(env)}
    failed = unsolvable(manifest, [conda_forge])
    assert expected and set(failed) == expected
    assert all("__glibc" in why for why in failed.values()), failed


# --------------------------------------------------------------------------- conda-workspaces, a second client


def conda_workspace(conda: Conda, *args: str) -> subprocess.CompletedProcess:
    """`python -m conda ARGS` in the repository, with this Python's scripts (ssm-conda) first on PATH: a task runs in
    the current environment when its own is not installed."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return conda.run(*args, cwd=REPO_ROOT, env={**os.environ, "PATH": path})


def test_conda_workspaces_reads_every_environment_as_pixi_does(conda):
    """Its environments, their platforms and conda dependencies are this model's of pixi (tests/pixi_manifest.py)."""
    info = json.loads(conda_workspace(conda, "workspace", "info", "--json").stdout)
    assert {e["name"]: e["platforms"] for e in info["environment_details"]} == PLATFORMS
    for env in info["environment_details"]:
        for resolution in env["resolutions"]:
            specs = sorted(" ".join(d["spec"].removesuffix(" *").split()) for d in resolution["conda_dependencies"].values())
            assert specs == sorted(MANIFEST.specs(env["name"])), (env["name"], resolution["platform"])


def test_conda_workspaces_lists_every_task_of_the_manifest(conda):
    listed = json.loads(conda_workspace(conda, "task", "list", "--json").stdout)["tasks"]
    assert set(listed) == {name for f in [PIXI, *PIXI["feature"].values()] for name in f.get("tasks", {})}
    assert all(listed[name]["description"] for name in listed)


def test_conda_workspaces_runs_the_plan_task_as_ssm_conda_plan(conda):
    """`conda task run plan` runs `ssm-conda plan` in this environment: the same 240-variant table."""
    assert Path(sys.executable).with_name("ssm-conda").exists(), "ssm-conda is not installed beside this Python"
    by_task = conda_workspace(conda, "task", "run", "plan").stdout
    direct = subprocess.run([str(Path(sys.executable).with_name("ssm-conda")), "plan"], cwd=REPO_ROOT, capture_output=True,
                            text=True, check=True).stdout
    assert by_task == direct and direct.splitlines()[-1].endswith("variant(s)")


# --------------------------------------------------------------------------- with the stand-in's records (slow)

# A record's build kind: pytorch's, libtorch's and triton's CPU or CUDA X.Y builds are different packages to a solve
KIND_RE = re.compile(r"^(cpu|cuda\d+)")


def kind(record: dict) -> tuple[str, str, str]:
    found = KIND_RE.match(record["build"])
    return record["name"], record["version"], found[1] if found else ""


@pytest.mark.slow
def test_every_environment_solves_with_the_standins_records(standin, tmp_path):
    """The solves above on the linux-64 platforms, with the stand-in channel's records (conda-forge names, checked
    against the feedstocks, every dependency the real package states) in place of the recorded ones wherever it has
    the package: the same name, version and build kind. conda-forge's other versions and builds (the CPU pytorch,
    CUDA 12.9's stack, setuptools <82) stay as recorded: the stand-in makes one of each."""
    merged, standin_files = conda_forge_records(), set()
    for subdir in ("linux-64", "noarch"):
        data = json.loads((standin / subdir / "repodata.json").read_text())
        ours = {**data.get("packages", {}), **data.get("packages.conda", {})}
        kinds, standin_files = {kind(r) for r in ours.values()}, standin_files | set(ours)
        merged[subdir] = {f: r for f, r in merged[subdir].items() if kind(r) not in kinds} | ours
    channel = write_channel(tmp_path / "channel", merged)
    failed, taken = {}, {}
    for env, platform in [(env, p) for env, p in SOLVES if p.subdir == "linux-64"]:
        try:
            solved = MANIFEST.solve(env, platform, [channel])
        except SolverError as exc:
            failed[f"{env} x {platform.name}"] = " ".join(str(exc).split())
        else:
            taken[f"{env} x {platform.name}"] = {r.name.normalized for r in solved if r.file_name in standin_files}
    assert failed == {}
    # the test environment's CUDA compiler and transformers are the stand-in's, with all they depend on
    assert {"cuda-nvcc-impl", "cuda-cudart-dev", "cuda-version", "transformers", "huggingface_hub", "pytest"} <= \
        taken["test x linux-64"], taken
