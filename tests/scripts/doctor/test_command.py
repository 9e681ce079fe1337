"""`ssm-conda doctor`: the real machine (whatever driver and GPUs it has, a Python without torch) in a subprocess,
then injected facts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ssm_conda import cli
from ssm_conda.doctor import command
from ssm_conda.doctor.facts import InstalledDist, InterpreterInfo, Probes, gather_facts
from ssm_conda.doctor.report import SCHEMA
from ssm_conda.machine import DriverInfo, GpuInfo
from ssm_conda.matrix import load_variant_files
from ssm_conda_dev import subcommand

from tests.repo import REPO_ROOT
from tests.scripts.doctor.builders import FAKE_TORCH, driver, fake_env

ADVICE_KEYS = {"cuda", "variant_file", "python", "torch", "reason", "build_string", "generation", "install", "build", "warnings",
               "missing", "notes"}


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    """A Python with no torch: the probed interpreter, whatever torch the tests' own environment has."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "bin" / "python"


def doctor(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv, env = subcommand("doctor", "--interpreter", str(python), *args)
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT, env=env)


def test_real_machine_exits_0_and_says_what_is_missing(bare_python) -> None:
    result = doctor(bare_python)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "NVIDIA driver" in out and "Python" in out and "torch" in out
    assert "ssm-conda build --cuda " in out
    assert "torch: not installed" in out
    facts = gather_facts(str(bare_python), import_torch=False)
    if facts.driver.version is None and facts.driver.cuda is None:
        assert "NVIDIA driver  not found" in out
        assert "NVIDIA driver: nvidia-smi not found" in out
        assert "CONDA_OVERRIDE_CUDA=" in out  # no __cuda without a driver


def test_real_machine_json_is_all_of_stdout(bare_python) -> None:
    result = doctor(bare_python, "--json", "-v")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)  # nothing else on stdout, even with -v
    assert "driver facts from:" in result.stderr
    assert data["schema"] == SCHEMA and set(data) == {"schema", "facts", "advice"}
    assert set(data["facts"]) == {"driver", "interpreter", "env", "conda_override_cuda", "platform", "conda"}
    assert set(data["facts"]["driver"]) == {"version", "cuda", "gpus", "sources", "errors"}
    assert data["facts"]["interpreter"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert set(data["advice"]) == ADVICE_KEYS
    assert data["advice"]["cuda"] in {f.cuda for f in load_variant_files()}
    assert all(set(w) == {"code", "message"} for w in data["advice"]["warnings"])
    assert all(isinstance(m, str) for m in data["advice"]["missing"] + data["advice"]["notes"])


def test_no_gpu_no_driver_no_torch_injected(capsys: pytest.CaptureFixture[str]) -> None:
    probes = Probes(
        driver=lambda: DriverInfo(),
        interpreter=lambda exe, _imp: InterpreterInfo(executable=exe, version="3.12.1", prefix="/nowhere"),
        conda_records=lambda _prefix: {},
        environ={},
    )
    assert command.run(cli.parse_args(["doctor", "--json"]), probes=probes) == 0
    data = json.loads(capsys.readouterr().out)
    missing = " ".join(data["advice"]["missing"])
    assert "NVIDIA driver" in missing and "torch: not installed" in missing
    newest = max((f.cuda for f in load_variant_files()), key=lambda v: tuple(map(int, v.split("."))))
    assert data["advice"]["cuda"] == newest
    assert data["advice"]["install"][0].startswith(f"CONDA_OVERRIDE_CUDA={newest} conda create -n causal-conv1d")
    assert data["facts"]["interpreter"]["mamba_ssm"] is None
    assert command.run(cli.parse_args(["doctor", "--package", "mamba-ssm"]), probes=probes) == 0
    out = capsys.readouterr().out
    assert "mamba-ssm      not installed" in out and 'conda create -n mamba-ssm' in out
    assert '"mamba-ssm=2.3.2.post1=cuda' in out and "ssm-conda build --package mamba-ssm " in out


def test_stale_pip_wheel_in_a_probed_subprocess(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wrapper = fake_env(tmp_path, FAKE_TORCH)
    probes = Probes(driver=lambda: driver(), environ={})
    assert command.run(cli.parse_args(["doctor", "--interpreter", str(wrapper), "--json"]), probes=probes) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["facts"]["interpreter"]["causal_conv1d"]["version"] == "1.5.0.post8+cu12torch2.6cxx11abiTRUE"
    codes = [w["code"] for w in data["advice"]["warnings"]]
    assert "pip-wheel-mismatch" in codes and "extension-undefined-symbol" in codes
    assert data["advice"]["cuda"] == "13.0"


def test_bad_interpreter_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["doctor", "--interpreter", "/no/such/python"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "'/no/such/python': no such file" in captured.err


def test_bad_variants_dir_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["doctor", "--variants-dir", str(tmp_path / "none")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "no such directory" in captured.err


def test_help_names_the_options(bare_python) -> None:
    result = doctor(bare_python, "--help")
    assert result.returncode == 0 and "--json" in result.stdout and "--interpreter" in result.stdout
    assert "__cuda_arch" in result.stdout  # the module docstring is the description


NO_GPU_PROBES = Probes(driver=lambda: DriverInfo(), conda_records=lambda _prefix: {}, environ={},
                       interpreter=lambda exe, _imp: InterpreterInfo(executable=exe, version="3.12.1", prefix="/nowhere"))


def test_the_version_installed_is_what_the_recipe_renders_to(monkeypatch, capsys) -> None:
    """No second copy of the recipes' versions: each package's, as its recipe renders."""
    assert command.run(cli.parse_args(["doctor", "--package", "causal-conv1d", "--package", "mamba-ssm"]),
                       probes=NO_GPU_PROBES) == 0
    assert '"causal-conv1d=1.7.0=cuda' in (out := capsys.readouterr().out) and '"mamba-ssm=2.3.2.post1=cuda' in out
    monkeypatch.setattr(command, "rendered_recipe", lambda package, platform: {"package": {"version": "9.9.9"}})
    assert command.run(cli.parse_args(["doctor", "--package", "mamba-ssm"]), probes=NO_GPU_PROBES) == 0
    assert '"mamba-ssm=9.9.9=cuda' in capsys.readouterr().out


def test_outside_a_checkout_it_says_it_needs_one(tmp_path: Path) -> None:
    """The variant files and the recipes say what fits; an installed tool has neither of its own."""
    argv, env = subcommand("doctor", "--no-import")
    env.pop("SSM_CONDA_WORKSPACE", None)
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"error: no causal-conv1d-conda checkout in {tmp_path} or above it (a folder holding recipe/ and " \
                            "variants/): run this inside one, or pass --workspace DIR\n"


@pytest.mark.parametrize(
    ("platform", "gpu", "generation", "archs"),
    [
        # Jetson AGX Orin (8.7): only linux-aarch64's lists carry 8.7 itself
        ("linux-aarch64", GpuInfo(0, "Orin (nvgpu)", "8.7"), "sm8x", "8.0;8.6;8.7+PTX"),
        ("linux-64", GpuInfo(0, "NVIDIA A100-SXM4-80GB", "8.0"), "sm8x", "8.0;8.6+PTX"),
        ("linux-aarch64", GpuInfo(0, "NVIDIA GH200 480GB", "9.0"), "sm90", "9.0+PTX"),  # Grace Hopper
        ("linux-aarch64", GpuInfo(0, "NVIDIA Thor", "11.0"), "all", "7.5;8.0;8.6;8.7;9.0;10.0;11.0;12.0+PTX"),
    ],
)
def test_an_aarch64_machine_gets_the_aarch64_build(platform, gpu, generation, archs, capsys) -> None:
    """Faked machine facts: the platform decides which variant files' lists the advice reads."""
    probes = Probes(driver=lambda: driver("13.0", gpus=[gpu]), environ={},
                    interpreter=lambda exe, _imp: InterpreterInfo(executable=exe, version="3.12.1", prefix="/nowhere"),
                    conda_records=lambda _prefix: {}, platform=platform)
    args = cli.parse_args(["doctor", "--json", "--channel", "https://prefix.dev/mamba-kernels"])
    assert command.run(args, probes=probes) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["facts"]["platform"] == platform
    assert data["advice"]["generation"] == generation
    label = "all-architecture" if generation == "all" else generation
    assert f"the {label} build ({archs}) is this machine's" in " ".join(data["advice"]["notes"])
    assert not [w for w in data["advice"]["warnings"] if w["code"] == "arch-not-packaged"]


@pytest.mark.parametrize("installed", [("causal-conv1d",), ("causal-conv1d", "mamba-ssm")])
def test_on_windows_it_says_only_causal_conv1d_has_a_package(capsys, installed) -> None:
    """mamba-ssm's recipe skips win-64 (triton): the advice is causal-conv1d's CUDA 13.0 build, and a note says why
    mamba-ssm (installed, or asked for by --package) has none."""
    dists = {name.replace("-", "_"): InstalledDist("1.0", installer="pip") for name in installed}
    probes = Probes(driver=lambda: driver("13.0", gpus=[GpuInfo(0, "NVIDIA H100", "9.0")]), environ={},
                    interpreter=lambda exe, _imp: InterpreterInfo(executable=exe, version="3.12.1", prefix="/nowhere", **dists),
                    conda_records=lambda _prefix: {}, platform="win-64")
    assert command.run(cli.parse_args(["doctor", "--json"]), probes=probes) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["facts"]["platform"], data["advice"]["cuda"]) == ("win-64", "13.0")
    assert "mamba-ssm has no win-64 package (its recipe skips the platform): causal-conv1d only" in data["advice"]["notes"]
    install = data["advice"]["install"][-1]  # after a pip uninstall of what pip installed
    assert '"causal-conv1d=1.7.0=cuda130*py312*"' in install and "mamba-ssm" not in install
    assert command.run(cli.parse_args(["doctor", "--json", "--package", "mamba-ssm"]), probes=probes) == 0
    asked = json.loads(capsys.readouterr().out)["advice"]
    assert asked["install"] == data["advice"]["install"] and asked["notes"] == data["advice"]["notes"]


def test_a_local_channel_is_printed_absolute_and_quoted(tmp_path: Path, monkeypatch, capsys) -> None:
    """--channel '~/my out': the folder, resolved (a quoted ~ would not expand), one shell word in every command."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "my out").mkdir()
    probes = Probes(driver=lambda: driver("13.0", gpus=[GpuInfo(0, "NVIDIA H100", "9.0")]), environ={},
                    interpreter=lambda exe, _imp: InterpreterInfo(executable=exe, version="3.12.1", prefix="/nowhere"),
                    conda_records=lambda _prefix: {}, platform="linux-64")
    assert command.run(cli.parse_args(["doctor", "--json", "--channel", "~/my out"]), probes=probes) == 0
    install = json.loads(capsys.readouterr().out)["advice"]["install"]
    assert install and f"-c '{tmp_path}/my out' -c conda-forge" in install[-1]
