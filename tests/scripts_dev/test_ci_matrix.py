"""ssm-conda-dev ci-matrix: the workflow's jobs come from variants/ and nowhere else, and each fits a runner."""

from __future__ import annotations

import json
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


@pytest.mark.parametrize(("platform", "prefix"), [("linux-64", ""), ("linux-aarch64", "aarch64-")])
def test_one_job_per_cuda_torch_and_generation(platform, prefix):
    """Each job is one (CUDA, torch, generation) that rattler-build renders for its platform, with both
    packages for every Python; linux-aarch64's (8.7 in its lists) are cross-compiled on linux-64."""
    matrix = whole_matrix(platform)
    rendered = Counter((v.cuda, v.torch, v.generation) for v in matrix)
    jobs = [j for j in ci_matrix.jobs() if j.platform == platform]
    assert [(j.cuda, j.torch, j.generation) for j in jobs] == list(rendered)
    for job in jobs:
        assert job.packages == rendered[job.cuda, job.torch, job.generation]
        assert job.name == f"{prefix}cuda{job.cuda.replace('.', '')}-torch{job.torch}-{job.generation}"
        pythons = {v.python for v in matrix if (v.cuda, v.torch, v.generation) == (job.cuda, job.torch, job.generation)}
        assert job.packages == len(pythons) * len(NAMES)
        assert job.archs == next(v.archs for v in matrix if v.generation == job.generation and v.cuda == job.cuda)
    assert sum(j.packages for j in jobs) == len(matrix)
    if platform == "linux-aarch64":
        assert "8.7" in next(j.archs for j in jobs if j.generation == "all" and j.cuda == "13.0")


def test_the_longest_job_fits_the_runner_with_the_margin():
    longest = max(ci_matrix.jobs(), key=lambda j: j.cold_minutes)
    assert longest.generation == "all"  # the most architectures
    assert longest.cold_minutes * 60 * ci_matrix.MARGIN <= ci_matrix.RUNNER_LIMIT_S


def test_cold_time_grows_with_the_architectures_and_the_cache_saves_it():
    for package in NAMES:
        assert ci_matrix.cold_seconds(package, 1) == record(package).cold_s
        assert ci_matrix.cold_seconds(package, 8) / ci_matrix.cold_seconds(package, 1) == pytest.approx(45.3 / 6.6, rel=0.02)
    jobs = {j.generation: j for j in ci_matrix.jobs() if j.cuda == "13.0" and j.torch == "2.13" and j.platform == "linux-64"}
    assert jobs["all"].cold_minutes > jobs["sm8x"].cold_minutes > jobs["sm90"].cold_minutes
    assert {j.cached_minutes for j in jobs.values()} == {jobs["sm90"].cached_minutes}  # the cache makes them alike
    assert jobs["sm90"].cached_minutes < jobs["sm90"].cold_minutes


def test_durations_table(capsys):
    assert cli.main(["ci-matrix", "--durations"]) == 0
    out = capsys.readouterr().out
    assert "cuda130-torch2.13-sm90" in out and "from the cache" in out
    packages = len(whole_matrix("linux-64")) + len(whole_matrix("linux-aarch64"))
    assert f"{len(ci_matrix.jobs())} jobs, {packages} packages; longest: aarch64-cuda130-torch" in out
    assert "within the 6 h job limit (required: 2.0x)" in out


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
    assert set(printed["include"][0]) == {"name", "platform", "file", "cuda", "torch", "generation", "archs", "packages",
                                          "cold_minutes", "cached_minutes"}
    assert result.stdout.count("\n") == 1  # one line: the workflow writes it to $GITHUB_OUTPUT as matrix=...


def test_new_variant_file_is_picked_up(tmp_path):
    for f in VARIANTS_DIR.glob("*.yaml"):
        (tmp_path / f.name).write_text(f.read_text())
    data = yaml.safe_load((VARIANTS_DIR / "cuda129.yaml").read_text())
    data["cuda_compiler_version"] = ["13.1"]
    data["pytorch"] = ["2.13"]
    (tmp_path / "cuda131.yaml").write_text(yaml.safe_dump(data))
    names = [j.name for j in ci_matrix.jobs(tmp_path)]
    assert "cuda131-torch2.13-all" in names and names[-1] == "aarch64-cuda131-torch2.13-all"
    assert len(names) == len(ci_matrix.jobs()) + 2  # one per platform


def test_the_broken_files_of_the_bad_input_table_break_one_thing_each(tmp_path):
    """Their common base is a variant file ci-matrix reads: each case fails for its own reason alone."""
    (tmp_path / "cuda999.yaml").write_text(yaml.safe_dump(VALID))
    assert [j.name for j in ci_matrix.jobs(tmp_path)] == ["cuda130-torch2.13-all", "cuda130-torch2.13-sm90",
                                                          "aarch64-cuda130-torch2.13-all", "aarch64-cuda130-torch2.13-sm90"]


def test_missing_empty_or_broken_variants_dir_is_bad_input(tmp_path, capsys):
    """Exit 2, as the same bad input is everywhere else (tests/bad_input/ci_matrix.py has every broken file)."""
    assert cli.main(["ci-matrix", "--variants-dir", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err == f"error: variant files: no such directory: {tmp_path / 'none'}\n"
    assert cli.main(["ci-matrix", "--variants-dir", str(tmp_path)]) == 2
    assert "no variant files" in capsys.readouterr().err
    (tmp_path / "bad.yaml").write_text("python: ['3.12']\n")
    assert cli.main(["ci-matrix", "--variants-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'bad.yaml'}: not a valid variant file: no cuda_compiler_version\n"
