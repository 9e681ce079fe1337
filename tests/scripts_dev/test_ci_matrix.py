"""ssm-conda-dev ci-matrix: the workflow's jobs come from variants/ and nowhere else, and each fits a runner."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter

import pytest
import yaml
from ssm_conda.project import NAMES
from ssm_conda.project import package as record
from ssm_conda_dev import ci_matrix, cli

from tests.bad_input.ci_matrix import VALID
from tests.rendered import whole_matrix
from tests.repo import VARIANTS_DIR


@pytest.mark.parametrize(("platform", "prefix"), [("linux-64", ""), ("linux-aarch64", "aarch64-"), ("win-64", "win-")])
def test_one_job_per_cuda_torch_and_generation(platform, prefix):
    """Each job is one (CUDA, torch, generation) that rattler-build renders for its platform, with the packages the plan
    gives there: both on Linux (linux-aarch64's, 8.7 in its lists, cross-compiled on linux-64), causal-conv1d alone on
    win-64; one Python per variant (abi3), so no job is split per Python."""
    matrix = whole_matrix(platform)
    rendered = Counter((v.cuda, v.torch, v.generation) for v in matrix)
    jobs = [j for j in ci_matrix.jobs() if j.platform == platform]
    assert list(dict.fromkeys((j.cuda, j.torch, j.generation) for j in jobs)) == list(rendered)
    names = {v.package for v in matrix}
    assert names == ({"causal-conv1d"} if platform == "win-64" else set(NAMES))  # mamba-ssm's recipe skips Windows
    for job in jobs:
        same = [v for v in matrix if (v.cuda, v.torch, v.generation) == (job.cuda, job.torch, job.generation)
                and job.python in ("", v.python)]
        assert job.packages == len(same) == len({v.python for v in same}) * len(names)
        assert job.name == (f"{prefix}cuda{job.cuda.replace('.', '')}-torch{job.torch}-{job.generation}"
                            + (f"-py{job.python}" if job.python else ""))
        assert job.archs == next(v.archs for v in matrix if v.generation == job.generation and v.cuda == job.cuda)
        assert job.runner == ("windows-2022" if platform == "win-64" else "ubuntu-24.04")
    assert sum(j.packages for j in jobs) == len(matrix)
    assert all(j.python == "" and j.packages == len(names) for j in jobs)
    if platform == "linux-aarch64":
        assert "8.7" in next(j.archs for j in jobs if j.generation == "all" and j.cuda == "13.0")
    if platform == "win-64":  # CUDA 13.0 alone: causal-conv1d skips 12.9 there
        assert {j.cuda for j in jobs} == {"13.0"} and len(matrix) == 20
        assert [j.name for j in jobs if j.torch == "2.13"] == [
            "win-cuda130-torch2.13-all", "win-cuda130-torch2.13-sm8x", "win-cuda130-torch2.13-sm90",
            "win-cuda130-torch2.13-sm10x", "win-cuda130-torch2.13-sm12x"]


def test_the_longest_job_fits_the_runner_with_the_margin():
    every = ci_matrix.jobs()
    assert max((j for j in every if j.runner == "ubuntu-24.04"), key=lambda j: j.cold_minutes).generation == "all"
    for job in every:
        assert job.cold_minutes * 60 * ci_matrix.MARGIN <= ci_matrix.RUNNER_LIMIT_S, job.name


def test_cold_time_grows_with_the_architectures_and_the_cache_saves_it():
    for package in NAMES:
        assert ci_matrix.cold_seconds(package, 1) == record(package).cold_s
        assert ci_matrix.cold_seconds(package, 8) / ci_matrix.cold_seconds(package, 1) == pytest.approx(45.3 / 6.6, rel=0.02)
    jobs = {j.generation: j for j in ci_matrix.jobs() if j.cuda == "13.0" and j.torch == "2.13" and j.platform == "linux-64"}
    assert jobs["all"].cold_minutes > jobs["sm8x"].cold_minutes > jobs["sm90"].cold_minutes
    assert {j.cached_minutes for j in jobs.values()} == {jobs["sm90"].cached_minutes}  # the cache makes them alike
    assert jobs["sm90"].cached_minutes < jobs["sm90"].cold_minutes


def test_windows_times_are_linux_figures_times_the_stated_factor_each_python_cold():
    """No compiler cache on Windows: each of a job's Pythons is a first build, scaled by the (unmeasured) factor."""
    assert ci_matrix.WINDOWS_FACTOR >= 2.0 and ci_matrix.SLOWDOWN == {"win-64": ci_matrix.WINDOWS_FACTOR}
    windows = [j for j in ci_matrix.jobs() if j.platform == "win-64"]
    for job in windows:
        archs = len(job.archs.split(";"))
        expected = ci_matrix.SETUP_S + ci_matrix.WINDOWS_FACTOR * job.packages * ci_matrix.cold_seconds("causal-conv1d", archs)
        assert job.cold_minutes == job.cached_minutes == round(expected / 60), job.name
    # a job of 5 Pythons of all architectures would not fit the runner MARGIN times (what the split per Python is for);
    # one Python per variant fits
    (sm90,) = [j for j in windows if j.name == "win-cuda130-torch2.13-sm90"]
    assert sm90.packages == 1 and sm90.python == ""
    whole, _ = ci_matrix.job_seconds("win-64", {"causal-conv1d": 5}, 7)
    assert whole * ci_matrix.MARGIN > ci_matrix.RUNNER_LIMIT_S
    linux = ci_matrix.job_seconds("linux-64", {"causal-conv1d": 5}, 1)
    assert ci_matrix.job_seconds("win-64", {"causal-conv1d": 5}, 1)[1] > linux[1]  # nothing cached there


def test_durations_table(capsys):
    assert cli.main(["ci-matrix", "--durations"]) == 0
    out = capsys.readouterr().out
    assert "cuda130-torch2.13-sm90" in out and "from the cache" in out
    assert re.search(r"^win-cuda130-torch2\.13-sm90 +windows-2022 +1 +9\.0\+PTX ", out, re.M)
    packages = sum(len(whole_matrix(p)) for p in ("linux-64", "linux-aarch64", "win-64"))
    every = ci_matrix.jobs()
    longest = max(every, key=lambda j: j.cold_minutes)
    assert f"{len(every)} jobs, {packages} packages; longest: {longest.name}, {longest.cold_minutes} min cold" in out
    assert "within the 6 h job limit (required: 2.0x)" in out
    windows = len([j for j in every if j.platform == "win-64"])
    assert (f"{windows} of them on windows-2022: Linux's figures x 2.0, an estimate not yet measured, each Python "
            "compiled cold (no compiler cache there)") in out


def test_verbose_names_the_variant_files_on_stderr(capsys):
    """stdout stays the one line of JSON the workflow reads."""
    assert cli.main(["ci-matrix", "-v"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["include"] and out.count("\n") == 1
    assert err == f"jobs of variants/cuda129.yaml, variants/cuda130.yaml in {VARIANTS_DIR}\n"


def test_script_prints_json_for_fromjson():
    result = subprocess.run([sys.executable, "-m", "ssm_conda_dev", "ci-matrix"], capture_output=True, text=True, check=True,
                            env={"PATH": "/usr/bin:/bin"})
    printed = json.loads(result.stdout)
    assert [job["name"] for job in printed["include"]] == [j.name for j in ci_matrix.jobs()]
    assert set(printed["include"][0]) == {"name", "platform", "runner", "file", "cuda", "torch", "generation", "python",
                                          "archs", "packages", "cold_minutes", "cached_minutes"}
    assert result.stdout.count("\n") == 1  # one line: the workflow writes it to $GITHUB_OUTPUT as matrix=...


def test_new_variant_file_is_picked_up(tmp_path):
    for f in VARIANTS_DIR.glob("*.yaml"):
        (tmp_path / f.name).write_text(f.read_text())
    data = yaml.safe_load((VARIANTS_DIR / "cuda129.yaml").read_text())
    data["cuda_compiler_version"] = ["13.1"]
    data["pytorch"] = ["2.13"]
    (tmp_path / "cuda131.yaml").write_text(yaml.safe_dump(data))
    names = [j.name for j in ci_matrix.jobs(tmp_path)]
    assert "cuda131-torch2.13-all" in names and "aarch64-cuda131-torch2.13-all" in names
    assert len(names) == len(ci_matrix.jobs()) + 2  # one per Linux platform: causal-conv1d skips 13.1 on win-64


def test_a_new_minor_is_picked_up_on_every_platform_that_renders_it(tmp_path):
    for f in VARIANTS_DIR.glob("*.yaml"):
        (tmp_path / f.name).write_text(f.read_text())
    text = (tmp_path / "cuda130.yaml").read_text()
    (tmp_path / "cuda130.yaml").write_text(text.replace('  - "2.13"\n', '  - "2.13"\n  - "2.14"\n', 1))
    new = [j for j in ci_matrix.jobs(tmp_path) if j.torch == "2.14"]
    assert {j.platform for j in new} == {"linux-64", "linux-aarch64", "win-64"}
    assert [(j.name, j.packages) for j in new if j.platform == "win-64" and j.generation != "all"] == [
        ("win-cuda130-torch2.14-sm8x", 1), ("win-cuda130-torch2.14-sm90", 1), ("win-cuda130-torch2.14-sm10x", 1),
        ("win-cuda130-torch2.14-sm12x", 1)]
    assert {j.packages for j in new if j.platform == "linux-64"} == {2}


def test_the_broken_files_of_the_bad_input_table_break_one_thing_each(tmp_path):
    """Their common base is a variant file ci-matrix reads: each case fails for its own reason alone."""
    (tmp_path / "cuda999.yaml").write_text(yaml.safe_dump(VALID))
    assert [j.name for j in ci_matrix.jobs(tmp_path)] == ["cuda130-torch2.13-all", "cuda130-torch2.13-sm90",
                                                          "aarch64-cuda130-torch2.13-all", "aarch64-cuda130-torch2.13-sm90",
                                                          "win-cuda130-torch2.13-all", "win-cuda130-torch2.13-sm90"]


def test_missing_empty_or_broken_variants_dir_is_bad_input(tmp_path, capsys):
    """Exit 2, as the same bad input is everywhere else (tests/bad_input/ci_matrix.py has every broken file)."""
    assert cli.main(["ci-matrix", "--variants-dir", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err == f"error: variant files: no such directory: {tmp_path / 'none'}\n"
    assert cli.main(["ci-matrix", "--variants-dir", str(tmp_path)]) == 2
    assert "no variant files" in capsys.readouterr().err
    (tmp_path / "bad.yaml").write_text("python: ['3.12']\n")
    assert cli.main(["ci-matrix", "--variants-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'bad.yaml'}: not a valid variant file: no cuda_compiler_version\n"
