"""`ssm-conda-dev standin`: bad input is one line and writes nothing; the wheel folders; the summary."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from ssm_conda import cli
from ssm_conda_dev import cli as dev_cli
from ssm_conda_dev.standin import command, fidelity
from ssm_conda_dev.standin.packages import StandIn

HAS_PY_SHARED = bool(list(Path(sys.base_prefix, "lib").glob("libpython3*.so*")))
needs_shared_python = pytest.mark.skipif(not HAS_PY_SHARED, reason="the running Python has no shared libpython")
PY_TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    """Every test gets its own empty cache: no wheel, no channel from an earlier run."""
    monkeypatch.setenv("SSM_CONDA_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def run(argv: list[str], capsys) -> tuple[int, str]:
    code = dev_cli.main(["standin", *argv])
    return code, capsys.readouterr().err


@needs_shared_python
def test_missing_torch_wheel(tmp_path, capsys):
    out, empty = tmp_path / "channel", tmp_path / "empty"
    empty.mkdir()
    code, err = run(["--output-dir", str(out), "--wheel-dir", str(empty), "--offline"], capsys)
    assert code == 2
    assert err.count("\n") == 1 and "torch wheel" in err
    assert not out.exists()


@needs_shared_python
def test_wheels_are_looked_for_in_the_cache_and_the_wheel_dirs_only(tmp_path, cache, capsys):
    """Regression: the default list named a folder that only one machine had."""
    code, err = run(["--output-dir", str(tmp_path / "c"), "--offline"], capsys)
    assert code == 2 and err == f"error: no torch wheel (a CUDA build) for {PY_TAG} in {cache / 'wheels'}; " \
                                "pass --torch-wheel or --torch-installed\n"
    extra = tmp_path / "more"
    extra.mkdir()
    code, err = run(["--output-dir", str(tmp_path / "c"), "--offline",
                     "--wheel-dir", str(extra)], capsys)
    assert code == 2 and f"in {extra}, {cache / 'wheels'};" in err


@needs_shared_python
def test_named_torch_wheel_missing(tmp_path, capsys):
    out = tmp_path / "channel"
    missing = tmp_path / "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"
    code, err = run(["--output-dir", str(out), "--torch-wheel", str(missing)], capsys)
    assert code == 2 and err.startswith("error: torch wheel not found") and err.count("\n") == 1
    assert not out.exists()


@needs_shared_python
def test_missing_toolkit_wheels_offline(tmp_path, wheel_maker, capsys):
    """nvcc comes from NVIDIA's wheels, never from a system toolkit: offline and without them, one line."""
    wheels = tmp_path / "wheels"
    wheel_maker(wheels, f"torch-2.13.0-{PY_TAG}-{PY_TAG}-manylinux_2_28_x86_64.whl",
                ('cuda-toolkit[cudart]==13.0.3; platform_system == "Linux"',))
    out = tmp_path / "channel"
    code, err = run(["--output-dir", str(out), "--wheel-dir", str(wheels), "--offline"], capsys)
    assert code == 2 and err.startswith("error: no nvidia-cuda-nvcc==13.0.* wheel for ")
    assert err.count("\n") == 1
    assert "(and --offline)" in err and not out.exists()


@needs_shared_python
def test_cpu_build_of_torch_is_refused(tmp_path, wheel_maker, capsys):
    wheel = wheel_maker(tmp_path, f"torch-2.13.0+cpu-{PY_TAG}-{PY_TAG}-manylinux_2_28_x86_64.whl")
    code, err = run(["--output-dir", str(tmp_path / "c"), "--torch-wheel", str(wheel)], capsys)
    assert code == 2 and "is a CPU build of torch" in err and err.count("\n") == 1


def test_python_without_shared_lib(tmp_path, capsys):
    prefix = tmp_path / "py"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "lib").mkdir()
    (prefix / "bin" / "python3.11").symlink_to(sys.executable)
    out = tmp_path / "channel"
    code, err = run(["--output-dir", str(out), "--python-prefix", str(prefix)], capsys)
    assert code == 2 and "libpython" in err and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["--torch-wheel", "a.whl", "--torch-installed", "x"], "error: --torch-wheel and --torch-installed exclude each other\n"),
    (["--rebuild", "pytorch,nmupy"], "error: --rebuild: unknown package nmupy; accepted: "),
    (["--wheel-dir", "/no/such/folder"], "error: --wheel-dir /no/such/folder: no such folder\n"),
    (["--threads", "0"], "error: --threads 0: must be at least 1\n"),
    (["--dir", "x"], "error: ssm-conda-dev: unrecognized arguments: --dir x\n"),  # --output-dir's old name
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, argv, message):
    code, err = run(["--output-dir", str(tmp_path / "c"), *argv], capsys)
    assert code == 2 and err.startswith(message) and err.count("\n") == 1
    assert not (tmp_path / "c").exists()


def test_default_dir_is_in_the_cache(cache):
    args = cli.parse_args(["standin"], dev_cli.SSM_CONDA_DEV)
    assert args.output_dir is None and command.default_dir() == cache / "standin" and args.wheel_dir == []


@needs_shared_python
def test_cli_runs_as_a_module(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-m", "ssm_conda_dev", "standin", "--output-dir", str(tmp_path / "c"), "--threads", "0"],
        capture_output=True, text=True, cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert result.stderr == "error: --threads 0: must be at least 1\n"
    assert not (tmp_path / "c").exists()


def test_run_builds_indexes_and_summarises(fake_machine, cache, monkeypatch, capsys, request):
    """The whole command on a made-up machine with one stand-in: default --output-dir, index, summary table, modes."""
    previous = os.umask(0o022)  # the usual umask, whatever the test runner's
    request.addfinalizer(lambda: os.umask(previous))
    seen = {}

    def discover(python_prefix, cc, torch, source):
        seen.update(dirs=list(source.dirs), download_dir=source.download_dir)
        return fake_machine

    monkeypatch.setattr(command, "discover", discover)
    monkeypatch.setattr(command, "standins", lambda m: [StandIn("python_abi", "python_abi.yaml", {"py_ver": "3.11"})])
    record = {"python_abi": fidelity.load_record()["python_abi"]}
    monkeypatch.setattr(command, "check_channel", lambda channel, packages: fidelity.check_channel(channel, record, packages))
    assert dev_cli.main(["standin", "--offline"]) == 0
    out = capsys.readouterr().out
    channel = cache / "standin"
    assert seen == {"dirs": [cache / "wheels"], "download_dir": cache / "wheels"}
    assert (channel / "linux-64" / "repodata.json").is_file() and (channel / "standin-variants.yaml").is_file()
    assert "[1/1] python_abi 3.11 8_cp311: building ..." in out
    table = out[out.index("stand-in packages for python 3.11"):]
    assert table.splitlines()[1].split() == ["package", "variant", "result", "time", "size", "path", "detail"]
    assert table.splitlines()[2].split()[:4] == ["python_abi", "3.11", "8_cp311", "built"]
    assert f"channel: {channel.as_uri()} (1 packages for python 3.11" in out
    assert "every recorded package matches conda-forge's" in out
    # servable as it is (a web server, another account): files 0644 and folders 0755, as conda-index writes them
    modes = {str(p.relative_to(channel)): p.stat().st_mode & 0o777 for p in channel.rglob("*")}
    assert {p: oct(m) for p, m in modes.items() if m != (0o755 if (channel / p).is_dir() else 0o644)} == {}
    assert modes["noarch/python_abi-3.11-8_cp311.conda"] == 0o644


def test_a_channel_that_drifts_from_conda_forge_fails(fake_machine, cache, monkeypatch, capsys):
    """The fidelity check runs after every build: a package conda-forge has and the channel lacks fails it."""
    monkeypatch.setattr(command, "discover", lambda *args: fake_machine)
    monkeypatch.setattr(command, "standins", lambda m: [StandIn("python_abi", "python_abi.yaml", {"py_ver": "3.11"})])
    record = {name: fidelity.load_record()[name] for name in ("python_abi", "cuda-version")}
    monkeypatch.setattr(command, "check_channel", lambda channel, packages: fidelity.check_channel(channel, record, packages))
    assert dev_cli.main(["standin", "--offline"]) == 1
    captured = capsys.readouterr()
    assert "cuda-version: the channel has no such package" in captured.out
    assert "differs from conda-forge's packages in 1 places" in captured.err
