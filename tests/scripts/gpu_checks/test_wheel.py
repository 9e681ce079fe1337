"""ssm-conda gpu-wheel: prepare writes the patched tree whole; run refuses bad input before writing;
its reports are read right; with a ready wheel it installs, tests and summarises.

The build itself (pip wheel against a CUDA torch, minutes) is not run here; see docs/testing.md.
A stand-in torch (version and CUDA build only) stands for the GPU machine's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from ssm_conda.gpu_checks import wheel as gpu_check
from ssm_conda.machine import detect_compute_capabilities

REPO_ROOT = Path(__file__).resolve().parents[2]
no_gpu_here = pytest.mark.skipif(bool(detect_compute_capabilities()), reason="this machine has a GPU")


def torch_stub(root: Path, cuda: str | None) -> Path:
    (root / "torch").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text(
        f'__version__ = "2.11.0"\nclass version:\n    cuda = {cuda!r}\n'
        "class cuda:\n    @staticmethod\n    def is_available():\n        return False\n"
    )
    return root


def run(*args: str, stub: Path | None = None, cwd: Path = REPO_ROOT,
        cuda_home: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "CUDA_HOME")}
    if stub is not None:
        env["PYTHONPATH"] = str(stub)
    if cuda_home is not None:
        env["CUDA_HOME"] = cuda_home
    return subprocess.run([sys.executable, "-m", "ssm_conda", "gpu-wheel", *args],
                          capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


def one_line_error(result: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    assert result.returncode == code, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and text in lines[0], result.stderr


@pytest.fixture(scope="module")
def source(tmp_path_factory, sdist) -> Path:
    del sdist  # downloaded by its fixture; prepare reads it from the cache
    return gpu_check.prepare(tmp_path_factory.mktemp("device"))


def test_prepare_writes_the_patched_tree(source):
    assert source.name == gpu_check.SOURCE_NAME
    assert 'os.getenv("CAUSAL_CONV1D_FORCE_BUILD", "TRUE") != "FALSE"' in (source / "setup.py").read_text()
    assert (source / "tests" / "test_causal_conv1d.py").is_file()
    assert sorted(p.name for p in source.parent.iterdir()) == [gpu_check.SOURCE_NAME]  # no temporary left
    again = gpu_check.prepare(source.parent)
    assert again == source and (source / "setup.py").is_file()


def test_missing_source_is_bad_input(tmp_path):
    result = run("run", "--source", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out"))
    one_line_error(result, 2, "run `ssm-conda gpu-wheel prepare` first")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, text", [
    (["--jobs", "0"], "--jobs must be at least 1, not 0"),
    (["--out", "a-file"], "--out a-file is a file; name a folder"),
    (["--allow-no-gpu", "--arch", "7.7"], "unknown architecture '7.7' for CUDA 13.0"),
    (["--allow-no-gpu"], "--arch native found no GPU"),
    (["--allow-no-gpu", "--arch", "9.0", "--wheel", "missing.whl"], "no such wheel"),
])
@no_gpu_here
def test_bad_arguments_exit_2_and_write_nothing(source, tmp_path, args, text):
    stub = torch_stub(tmp_path / "stub", "13.0")
    (tmp_path / "a-file").write_text("")
    result = run("run", "--source", str(source), "--out", str(tmp_path / "out"), *args, stub=stub, cwd=tmp_path)
    one_line_error(result, 2, text)
    assert not (tmp_path / "out").exists()
    assert (tmp_path / "a-file").read_text() == ""


@no_gpu_here
def test_no_gpu_refused_before_anything_is_written(source, tmp_path):
    stub = torch_stub(tmp_path / "stub", "13.0")
    one_line_error(run("run", "--source", str(source), "--out", str(tmp_path / "out"), stub=stub), 1,
                   "no GPU on this machine")
    assert not (tmp_path / "out").exists()


@no_gpu_here
def test_cpu_torch_refused(source, tmp_path):
    stub = torch_stub(tmp_path / "stub", None)
    result = run("run", "--source", str(source), "--out", str(tmp_path / "out"), "--allow-no-gpu", "--arch", "9.0",
                 stub=stub)
    one_line_error(result, 1, "torch 2.11.0 is not a CUDA build")
    assert not (tmp_path / "out").exists()


def test_junit_counts(tmp_path):
    report = tmp_path / "r.xml"
    report.write_text('<testsuites><testsuite tests="10" failures="2" errors="1" skipped="3"/>'
                      '<testsuite tests="5" failures="0" errors="0" skipped="0"/></testsuites>')
    assert gpu_check.junit_counts(report) == {"passed": 9, "failed": 2, "errors": 1, "skipped": 3}


def test_bench_figures_use_cases_past_l2(tmp_path):
    def row(op, moved, fraction, speedup, bandwidth=1000.0):
        return {"op": op, "bytes": moved, "fraction_of_copy": fraction, "speedup_vs_ref": speedup,
                "bandwidth_gbs": bandwidth}

    big = gpu_check.LARGE_BYTES
    report = tmp_path / "bench.json"
    report.write_text(json.dumps({"results": [
        row("fwd", 10**6, 3.0, 2.0, 9000.0), row("fwd", big, 0.8, 4.0), row("fwd", 2 * big, 0.9, 6.0),
        row("update", 10**5, 0.1, None),
    ]}))
    figures = gpu_check.bench_figures(report)
    assert figures["fwd"] == {"cases": 3, "median_fraction_of_copy": pytest.approx(0.85),
                              "median_speedup_vs_ref": 4.0, "peak_bandwidth_gbs": 9000.0}
    # No case past L2: the median of them all; no reference timed: no speed-up.
    assert figures["update"]["median_fraction_of_copy"] == 0.1
    assert figures["update"]["median_speedup_vs_ref"] is None


def fake_wheel(directory: Path, extension: bool) -> Path:
    """A wheel with upstream's name and package; its causal_conv1d_cuda (if any) is Python, not GPU code."""
    path = directory / "causal_conv1d-1.7.0-cp311-cp311-linux_x86_64.whl"
    dist = "causal_conv1d-1.7.0.dist-info"
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr("causal_conv1d/__init__.py", '__version__ = "1.7.0"\n')
        if extension:
            whl.writestr("causal_conv1d_cuda.py", "")
        whl.writestr(f"{dist}/METADATA", "Metadata-Version: 2.1\nName: causal_conv1d\nVersion: 1.7.0\n")
        whl.writestr(f"{dist}/WHEEL",
                     "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n")
        whl.writestr(f"{dist}/RECORD", "")
    return path


def run_with_wheel(source: Path, tmp_path: Path, extension: bool) -> tuple[subprocess.CompletedProcess[str], dict]:
    stub = torch_stub(tmp_path / "stub", "13.0")
    out = tmp_path / "out"
    out.mkdir()
    (out / "bench.json").write_text("{}")  # left by an earlier run: must not survive into this one
    result = run("run", "--source", str(source), "--out", str(out), "--allow-no-gpu", "--arch", "9.0",
                 "--wheel", str(fake_wheel(tmp_path, extension)), stub=stub, cuda_home=str(tmp_path / "cuda"))
    assert not (out / "bench.json").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["archs"] == "9.0" and summary["torch"] == "2.11.0" and summary["cuda"] == "13.0"
    return result, {s["name"]: s for s in summary["steps"]}


@no_gpu_here
def test_a_wheel_without_gpu_code_fails_the_tests_and_is_summarised(source, tmp_path):
    result, steps = run_with_wheel(source, tmp_path, extension=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert list(steps) == ["install", "tests", "bench"]
    assert steps["install"]["ok"] and "imports" in steps["install"]["detail"]
    assert not steps["tests"]["ok"] and re.search(r"\d+ (failed|errors?)", steps["tests"]["detail"])
    assert "tests    FAIL" in result.stdout and "install  PASS" in result.stdout


@no_gpu_here
def test_an_unusable_prebuilt_wheel_falls_back_to_building(source, tmp_path):
    result, steps = run_with_wheel(source, tmp_path, extension=False)
    assert result.returncode == 1, result.stdout + result.stderr  # the stand-in torch cannot build
    assert list(steps) == ["prebuilt", "build"]
    assert steps["prebuilt"]["ok"] and "unusable here, building instead" in steps["prebuilt"]["detail"]
    assert "does not import" in steps["prebuilt"]["detail"]
    assert not steps["build"]["ok"] and (tmp_path / "out" / "build.log").is_file()


def test_run_logged_keeps_everything_and_echoes_progress(tmp_path, capsys):
    script = "print('noise'); print('[1/4] nvcc a.cu'); print('[2/4] nvcc b.cu'); raise SystemExit(3)"
    ok, seconds = gpu_check.run_logged([sys.executable, "-c", script], tmp_path / "log", dict(os.environ), tmp_path,
                                       echo=gpu_check.PROGRESS_LINE)
    assert not ok and seconds >= 0
    assert (tmp_path / "log").read_text().splitlines()[1:] == ["noise", "[1/4] nvcc a.cu", "[2/4] nvcc b.cu"]
    assert capsys.readouterr().out.splitlines() == ["  [1/4] nvcc a.cu", "  [2/4] nvcc b.cu"]


def fake_nvcc(bin_dir: Path, here: Path) -> None:
    bin_dir.mkdir(parents=True)
    nvcc = bin_dir / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho '#$ _HERE_={here}' >&2\n")
    nvcc.chmod(0o755)


def test_cuda_home_follows_a_wrapper_nvcc_to_its_toolkit(tmp_path, monkeypatch):
    toolkit = tmp_path / "cuda-13.0"
    (toolkit / "include").mkdir(parents=True)
    (toolkit / "include" / "cuda_runtime_api.h").write_text("")
    fake_nvcc(tmp_path / "wrapper" / "bin", here=toolkit / "bin")  # like /usr/local/bin/nvcc here
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("PATH", f"{tmp_path / 'wrapper' / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert gpu_check.cuda_home() == str(toolkit)
    monkeypatch.setenv("CUDA_HOME", "/opt/explicit")
    assert gpu_check.cuda_home() == "/opt/explicit"


def test_cuda_home_without_headers_is_one_clear_error(tmp_path, monkeypatch):
    fake_nvcc(tmp_path / "bin", here=tmp_path / "nowhere" / "bin")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(gpu_check.PipelineError, match="cannot find the CUDA headers of .*; set CUDA_HOME"):
        gpu_check.cuda_home()


def test_the_test_step_is_the_recipes_test_section():
    section = gpu_check.recipe_test_section("8.0;9.0+PTX")
    assert section.commands == ["python -m pytest -p no:cacheprovider -rfEs tests/"]
    assert any(c.startswith("python -m pytest") and c.endswith("tests/") for c in section.commands)
    assert section.env == {"CAUSAL_CONV1D_EXPECTED_ARCHS": "8.0;9.0+PTX", "SSM_CONDA_EXPECTED_LINEINFO": "0"}
    assert section.recipe_files == ["tests/"] and section.source_files == ["tests/test_causal_conv1d.py"]


@pytest.mark.parametrize("cuda, arch, code, text", [
    (None, "9.0", 1, "torch 2.11.0 is not a CUDA build"),
    ("13.0", "7.7", 2, "unknown architecture '7.7' for CUDA 13.0"),
])
def test_prepare_wheel_checks_torch_and_arch_before_writing(tmp_path, cuda, arch, code, text):
    stub = torch_stub(tmp_path / "stub", cuda)
    result = run("prepare", "--dir", str(tmp_path / "device"), "--wheel", "--arch", arch, stub=stub)
    one_line_error(result, code, text)
    assert not (tmp_path / "device").exists()


def test_defaults_name_no_machine_of_ours(monkeypatch):
    """Results go to gpu-wheel/results whatever the environment (no $OUT from a development setup)."""
    from ssm_conda import cli
    from ssm_conda.paths import REPO_ROOT

    monkeypatch.setenv("OUT", "/somewhere/else")
    args = cli.parse_args(["gpu-wheel", "run"])
    assert args.out == REPO_ROOT / "gpu-wheel" / "results"
    assert args.source == REPO_ROOT / "gpu-wheel" / "causal-conv1d-src"


def test_runs_without_rattler():
    """A GPU machine runs gpu-wheel from a checkout, where neither py-rattler nor py-rattler-build is."""
    code = ("import sys; sys.modules['rattler'] = sys.modules['rattler_build'] = None\n"
            "from ssm_conda import cli, machine\n"
            "assert cli.parse_args(['gpu-wheel', 'run', '--no-bench']).no_bench\n"
            "assert machine.detect_cuda_virtual_packages().cuda is None\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
