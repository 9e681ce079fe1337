"""ssm-conda-dev gpu-test: bad input is one line and exit 2; how test output is judged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from rattler_build import Package
from ssm_conda.cli import parse_args
from ssm_conda.machine import detect_compute_capabilities
from ssm_conda.project import NAMES
from ssm_conda.selection import Selection
from ssm_conda_dev import cli, gpu_check

from tests.bad_input.gpu_check import BUILD, PASSED, tiny_package
from tests.damaged_archives import garbage_pkg_member
from tests.recipe.causal_conv1d.recipe_modules import SHARED_TESTS, load_recipe_module

gpu_gate = load_recipe_module("gpu_gate", SHARED_TESTS)

REPO_ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ssm_conda_dev", "gpu-test", *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


def one_line_error(result: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    assert result.returncode == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and text in lines[0], result.stderr


def test_missing_file(tmp_path):
    one_line_error(run(str(tmp_path / "causal-conv1d-1.7.0-x_0.conda")), 2, "no such file or directory")


def test_not_a_conda_package(tmp_path):
    wheel = tmp_path / "causal_conv1d-1.7.0-cp312-cp312-linux_x86_64.whl"
    wheel.write_bytes(b"")
    one_line_error(run(str(wheel)), 2, "not a conda package")


def test_directory_without_packages(tmp_path):
    (tmp_path / "linux-64").mkdir()
    one_line_error(run(str(tmp_path)), 2, "no causal-conv1d or mamba-ssm package in")


def test_missing_channel_directory(tmp_path):
    pkg = tmp_path / "causal-conv1d-1.7.0-x_0.conda"
    pkg.write_bytes(b"")
    one_line_error(run(str(pkg), "--channel", str(tmp_path / "nowhere")), 2, "no such channel directory")


@pytest.mark.skipif(bool(detect_compute_capabilities()), reason="this machine has a GPU")
def test_refuses_to_start_without_a_gpu(tmp_path):
    pkg = tmp_path / "linux-64" / "causal-conv1d-1.7.0-x_0.conda"
    pkg.parent.mkdir()
    pkg.write_bytes(b"")
    one_line_error(run(str(tmp_path)), 1, "no GPU on this machine")


def test_damaged_package_is_bad_input(tmp_path):
    pkg = tmp_path / "causal-conv1d-1.7.0-x_0.conda"
    pkg.write_bytes(b"not a zip")
    one_line_error(run(str(pkg), "--allow-no-gpu"), 2, "cannot read package")


PYTEST_TAIL = [
    "causal-conv1d GPU tests skipped: no NVIDIA driver on this machine",
    "=========== 12 passed, 893 skipped, 12843 deselected in 3.39s ===========",
]


def test_judge():
    assert gpu_check.summarize_output(PYTEST_TAIL) == "12 passed, 893 skipped, 12843 deselected"
    assert gpu_check.judge(True, PYTEST_TAIL, require_gpu=False) == (True, "12 passed, 893 skipped, 12843 deselected")
    ok, detail = gpu_check.judge(True, PYTEST_TAIL, require_gpu=True)
    assert not ok and detail.startswith("causal-conv1d GPU tests skipped:")
    assert gpu_check.judge(False, ["==== 1 failed, 3 passed in 2.00s ===="], require_gpu=True) == (False, "1 failed, 3 passed")
    assert gpu_check.judge(True, ["==== 400 passed in 20.00s ===="], require_gpu=True) == (True, "400 passed")
    assert gpu_check.judge(True, ["==== no tests ran in 0.01s ===="], require_gpu=False) == (False, "no test ran: no tests ran")
    assert gpu_check.judge(True, ["==== 12 deselected in 0.01s ===="], False) == (False, "no test ran: 12 deselected")
    assert gpu_check.judge(True, ["==== 2 xpassed in 0.01s ===="], False) == (False, "no test ran: 2 xpassed")


@pytest.mark.parametrize("package", NAMES)
@pytest.mark.parametrize("marker", ["skip_marker", "required_marker"])
def test_a_gpu_run_that_did_not_run_is_seen_for_every_package(package, marker):
    """The markers the packages' test sections print (their shared gate's): mamba-ssm's skipped GPU
    tests passed for a GPU run before, as only causal-conv1d's marker was known."""
    line = f"{getattr(gpu_gate.Gate(package), marker)} no NVIDIA driver on this machine"
    ok, detail = gpu_check.judge(True, [line, PYTEST_TAIL[1]], require_gpu=True)
    assert (ok, detail) == (False, line)
    assert gpu_check.judge(True, [line, PYTEST_TAIL[1]], require_gpu=False)[0]


def test_lower_bounds_stand_in_for_the_driver_and_the_gpu():
    depends = ["python >=3.12", "cuda-version >=13.0,<14", "__cuda_arch >=9.0,<10", "cuda-arch >=9.0"]
    assert gpu_check.lower_bound(depends, "cuda-version") == "13.0"
    assert gpu_check.lower_bound(depends, "cuda-arch") == "9.0"
    assert gpu_check.lower_bound(["python"], "cuda-version") is None


def test_each_package_is_tested_once(tmp_path):
    """A file named on the command line, or found in a channel, is one package (it was tested twice)."""
    (tmp_path / "linux-64").mkdir()
    names = ["causal-conv1d-1.7.0-cuda130_py311_torch214_h0_0.conda",
             "mamba-ssm-2.3.2.post1-cuda130_py311_torch214_h0_0.conda", "pytorch-2.14.1-cuda130_0.conda"]
    for name in names:
        (tmp_path / "linux-64" / name).write_bytes(b"")
    one = str(tmp_path / "linux-64" / names[0])
    assert [p.name for p in gpu_check.package_files([one])] == [names[0]]
    assert sorted(p.name for p in gpu_check.package_files([str(tmp_path), one])) == sorted(names[:2])


def gpu_test_in_process(channel: Path, capsys, *args: str) -> tuple[int, str, str]:
    status = cli.main(["gpu-test", str(channel), "--channel", str(channel), "--allow-no-gpu", *args])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize(("commands", "detail"), [
    ((), "its test section holds no test"),
    (('echo "============ 12 deselected in 0.01s ============"',), "no test ran: 12 deselected"),
    (('echo "============ no tests ran in 0.01s ============"',), "no test ran: no tests ran"),
    (('echo "============ 3 skipped in 0.01s ============"',), "no test ran: 3 skipped"),
])
def test_a_package_whose_tests_ran_no_test_fails(tmp_path, capsys, commands, detail):
    """Before, "0 passed, 0 failed" (or "1 passed") and exit 0."""
    tiny_package(tmp_path / "channel", commands=commands)
    status, out, _err = gpu_test_in_process(tmp_path / "channel", capsys)
    assert status == 1 and "0 passed, 1 failed" in out and detail in out, out


def test_options_are_resolved_once(tmp_path):
    args = parse_args(["gpu-test", "out", "-c", str(tmp_path), "-c", "conda-forge", "--cuda", "13.0", "--variants-dir",
                       str(tmp_path), "--log-dir", str(tmp_path / "logs"), "--allow-no-gpu", "-v"], cli.SSM_CONDA_DEV)
    assert gpu_check.GpuTestOptions.from_args(args) == gpu_check.GpuTestOptions(
        ("out",), Selection(cuda="13.0"), tmp_path, (tmp_path.as_uri(), "conda-forge"), tmp_path / "logs", False, True)


def test_the_variants_dir_is_read_only_where_a_selector_names_a_variant(tmp_path, capsys):
    """Without a selector gpu-test needs no checkout; with one, the variant files of --variants-dir say what it chooses."""
    tiny_package(tmp_path / "channel")
    status, out, err = gpu_test_in_process(tmp_path / "channel", capsys, "--variants-dir", str(tmp_path / "none"))
    assert status == 0 and "1 passed, 0 failed" in out, out + err
    status, out, err = gpu_test_in_process(tmp_path / "channel", capsys, "--variants-dir", str(tmp_path / "none"),
                                           "--cuda", "13.0")
    assert (status, err) == (2, f"error: variant files: no such directory: {tmp_path / 'none'}\n")


def test_a_package_whose_tests_passed_passes(tmp_path, capsys):
    tiny_package(tmp_path / "channel")
    status, out, _err = gpu_test_in_process(tmp_path / "channel", capsys, "--log-dir", str(tmp_path / "logs"))
    assert status == 0 and "1 passed, 0 failed" in out, out
    assert [p.name for p in (tmp_path / "logs").iterdir()] == [f"causal-conv1d-1.7.0-{BUILD}.test0.log"]


def test_every_archive_is_read_before_the_first_test(tmp_path, capsys):
    """Before, causal-conv1d's tests ran, then the damaged mamba-ssm stopped the run and its results were not printed."""
    tiny_package(tmp_path / "channel", commands=(f"touch {tmp_path}/tested", PASSED))
    garbage_pkg_member(tiny_package(tmp_path / "channel", "mamba-ssm"))
    status, out, err = gpu_test_in_process(tmp_path / "channel", capsys)
    assert status == 2 and err.startswith(f"error: cannot read package {tmp_path}/channel/noarch/mamba-ssm-1.7.0-"), err
    assert "Unknown frame descriptor" in err and len(err.splitlines()) == 1
    assert "test 0" not in out and not (tmp_path / "tested").exists()


def test_the_results_so_far_are_printed_however_the_run_ends(tmp_path, capsys, monkeypatch):
    """Ctrl-C during mamba-ssm's test: causal-conv1d's result is in the table, and the count under it."""
    for name in NAMES:
        tiny_package(tmp_path / "channel", name)
    real = Package.run_test

    def interrupted_second(package, index, **kwargs):  # noqa: ANN001, ANN003
        if package.name == "mamba-ssm":
            raise KeyboardInterrupt
        return real(package, index, **kwargs)

    monkeypatch.setattr(Package, "run_test", interrupted_second)
    status, out, err = gpu_test_in_process(tmp_path / "channel", capsys)
    assert (status, err) == (130, "interrupted\n")
    rows = [line.split()[:5] for line in out.splitlines() if line.startswith("causal-conv1d-1.7.0-") and "passed" in line]
    assert rows == [[f"causal-conv1d-1.7.0-{BUILD}.conda", "test", "0:", "CommandsTest", "passed"]], out
    assert out.rstrip().endswith("1 passed, 0 failed"), out
