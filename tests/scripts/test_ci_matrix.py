"""ssm-conda ci-matrix: the workflow's matrix comes from variants/ and nowhere else."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ssm_conda import ci_matrix, cli
from ssm_conda.paths import REPO_ROOT, VARIANTS_DIR

from tests.rendered import variants


def test_one_entry_per_variant_file():
    matrix = ci_matrix.build_matrix()
    files = sorted(VARIANTS_DIR.glob("*.yaml"))
    assert len(matrix["include"]) == len(files)
    for entry in matrix["include"]:
        data = yaml.safe_load((REPO_ROOT / entry["file"]).read_text())
        assert entry["cuda"] == str(data["cuda_compiler_version"][0])
        assert entry["cuda_major"] == entry["cuda"].split(".")[0]
        assert entry["name"] == Path(entry["file"]).stem
        # what rattler-build renders for the file, not the formula again (it counted 10 for 50)
        assert entry["variants"] == len(variants(cuda=entry["cuda"], package="causal-conv1d"))
        assert entry["packages"] == len(variants(cuda=entry["cuda"]))


def test_script_prints_json_for_fromjson(tmp_path):
    out = tmp_path / "github_output"
    result = subprocess.run(
        [sys.executable, "-m", "ssm_conda", "ci-matrix", "--github-output"],
        capture_output=True, text=True, check=True, env={"GITHUB_OUTPUT": str(out), "PATH": "/usr/bin:/bin"},
    )
    printed = json.loads(result.stdout)
    assert printed == ci_matrix.build_matrix()
    assert result.stdout.count("\n") == 1  # one line: `fromJSON` reads it from a step output
    assert out.read_text() == f"matrix={result.stdout}"


def test_new_variant_file_is_picked_up(tmp_path):
    for f in VARIANTS_DIR.glob("*.yaml"):
        (tmp_path / f.name).write_text(f.read_text())
    data = yaml.safe_load((VARIANTS_DIR / "cuda130.yaml").read_text())
    data["cuda_compiler_version"] = ["13.1"]
    (tmp_path / "cuda131.yaml").write_text(yaml.safe_dump(data))
    names = [e["name"] for e in ci_matrix.build_matrix(tmp_path)["include"]]
    assert names[-1] == "cuda131" and len(names) == len(list(VARIANTS_DIR.glob("*.yaml"))) + 1


def test_empty_or_broken_variants_dir(tmp_path, capsys):
    assert cli.main(["ci-matrix", "--variants-dir", str(tmp_path)]) == 1
    assert "no variant files" in capsys.readouterr().err
    (tmp_path / "bad.yaml").write_text("python: ['3.12']\n")
    assert cli.main(["ci-matrix", "--variants-dir", str(tmp_path)]) == 1
    assert "not a valid variant file" in capsys.readouterr().err


def test_workflow_uses_the_script_and_lists_no_variant():
    workflow = (REPO_ROOT / ".github" / "workflows" / "build.yml").read_text()
    parsed = yaml.safe_load(workflow)
    assert "ssm-conda ci-matrix --github-output" in workflow
    assert "fromJSON(needs.matrix.outputs.matrix)" in workflow
    for vfile in VARIANTS_DIR.glob("*.yaml"):
        cuda = str(yaml.safe_load(vfile.read_text())["cuda_compiler_version"][0])
        assert vfile.stem not in workflow and f'"{cuda}"' not in workflow
    jobs = parsed["jobs"]
    assert jobs["build"]["env"]["CONDA_OVERRIDE_CUDA"] == "${{ matrix.cuda }}"
    upload_job = jobs["upload"]
    assert upload_job["permissions"]["id-token"] == "write"
    assert "refs/heads/main" in upload_job["if"] and "refs/tags/" in upload_job["if"]
    assert "id-token" not in jobs["build"].get("permissions", {})
    steps = " ".join(str(s) for s in upload_job["steps"])
    assert "upload prefix" in steps and "--skip-existing" in steps


@pytest.mark.parametrize("job", ["matrix", "build", "upload"])
def test_workflow_jobs_run_on_cpu_runners(job):
    parsed = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "build.yml").read_text())
    assert parsed["jobs"][job]["runs-on"] == "ubuntu-latest"
