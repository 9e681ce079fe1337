"""scripts/doctor.py: the real machine (whatever it has), then injected fakes for the GPU cases."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from ssm_conda import cli, doctor
from ssm_conda.doctor import EnvInfo, Facts, InstalledDist, InterpreterInfo, NvccInfo, Probes, TorchInfo, advise
from ssm_conda.machine import DriverInfo, GpuInfo
from ssm_conda.matrix import VariantFile, load_variant_files
from ssm_conda.paths import REPO_ROOT

DOCTOR = REPO_ROOT / "scripts" / "doctor.py"

CUDA129 = VariantFile(
    Path("variants/cuda129.yaml"),
    {
        "cuda_compiler_version": ["12.9"],
        "python": ["3.10", "3.11", "3.12", "3.13", "3.14"],
        "pytorch": ["2.12", "2.13"],
        "cuda_arch_list": ["7.5;8.0;8.7;9.0;10.0;12.0+PTX"],
        "cuda_arch_supported": ["7.5;8.0;8.6;8.7;8.9;9.0;10.0;10.1;10.3;12.0;12.1"],
    },
)
CUDA130 = VariantFile(
    Path("variants/cuda130.yaml"),
    {
        "cuda_compiler_version": ["13.0"],
        "python": ["3.10", "3.11", "3.12", "3.13", "3.14"],
        "pytorch": ["2.12", "2.13"],
        "cuda_arch_list": ["7.5;8.0;8.7;9.0;10.0;11.0;12.0;12.1+PTX"],
        "cuda_arch_supported": ["7.5;8.0;8.6;8.7;8.8;8.9;9.0;10.0;11.0;12.0;12.1"],
    },
)
FILES = [CUDA129, CUDA130]

H100 = GpuInfo(0, "NVIDIA H100 80GB HBM3", "9.0")
B300 = GpuInfo(0, "NVIDIA B300", "10.3")
GB10 = GpuInfo(0, "NVIDIA GB10", "12.1")


def driver(cuda: str | None = "13.0", version: str | None = "580.65.06", gpus=(H100,)) -> DriverInfo:
    return DriverInfo(version=version, cuda=cuda, gpus=list(gpus), sources=["fake"])


def conda_torch(version: str = "2.13.0", cuda: str | None = "13.0", abi: bool = True) -> TorchInfo:
    build = f"cuda{cuda.replace('.', '')}_generic_py312_h0_200" if cuda else "cpu_generic_py312_h0_0"
    return TorchInfo(version=version, cuda=cuda, cxx11_abi=abi, dist=InstalledDist(version, "conda", conda_build=build))


def make_facts(
    *,
    drv: DriverInfo | None = None,
    torch: TorchInfo | None = None,
    python: str = "3.12.8",
    nvcc: NvccInfo | None = None,
    env: EnvInfo | None = None,
    wheel: InstalledDist | None = None,
    extension_error: str | None = None,
) -> Facts:
    interp = InterpreterInfo(
        executable="/opt/env/bin/python",
        version=python,
        prefix="/opt/env",
        torch=torch,
        causal_conv1d=wheel,
        extension_error=extension_error,
        extension_ok=None if extension_error is None else False,
    )
    return Facts(
        driver=drv if drv is not None else driver(),
        interpreter=interp,
        env=env or EnvInfo("conda", "env", "/opt/env"),
        nvcc=nvcc,
    )


# --- the machine the tests run on -------------------------------------------------------------


def test_real_machine_exits_0_and_says_what_is_missing() -> None:
    result = subprocess.run([sys.executable, str(DOCTOR)], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "NVIDIA driver" in out and "Python" in out and "torch" in out
    assert "python scripts/build.py --cuda " in out
    facts = doctor.gather_facts(sys.executable, import_torch=False)
    if facts.driver.version is None and facts.driver.cuda is None:
        assert "NVIDIA driver  not found" in out
        assert "NVIDIA driver: nvidia-smi not found" in out
        assert "CONDA_OVERRIDE_CUDA=" in out  # no __cuda without a driver
    if facts.interpreter.torch is None:
        assert "torch: not installed" in out


def test_real_machine_json() -> None:
    result = subprocess.run(
        [sys.executable, str(DOCTOR), "--json"], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["schema"] == doctor.SCHEMA
    assert set(data) == {"schema", "facts", "advice"}
    assert set(data["facts"]) == {"driver", "interpreter", "env", "nvcc", "conda_override_cuda"}
    assert set(data["facts"]["driver"]) == {"version", "cuda", "gpus", "sources", "errors"}
    assert data["facts"]["interpreter"]["version"] == ".".join(map(str, sys.version_info[:3]))
    advice = data["advice"]
    for key in (
        "cuda",
        "variant_file",
        "python",
        "torch",
        "build_string",
        "install",
        "build",
        "warnings",
        "missing",
        "notes",
    ):
        assert key in advice
    assert advice["cuda"] in {f.cuda for f in load_variant_files()}
    assert all(set(w) == {"code", "message"} for w in advice["warnings"])


def test_no_gpu_no_driver_no_torch_injected(capsys: pytest.CaptureFixture[str]) -> None:
    probes = Probes(
        driver=lambda: DriverInfo(),
        interpreter=lambda exe, _imp: InterpreterInfo(executable=exe, version="3.12.1", prefix="/nowhere"),
        nvcc=lambda _env: None,
        conda_records=lambda _prefix: {},
        environ={},
    )
    assert doctor.run(cli.parse_args(["doctor", "--json"]), probes=probes) == 0
    data = json.loads(capsys.readouterr().out)
    missing = " ".join(data["advice"]["missing"])
    assert "NVIDIA driver" in missing and "torch: not installed" in missing and "nvcc" in missing
    assert data["advice"]["cuda"] == max(
        (f.cuda for f in load_variant_files()), key=lambda v: tuple(map(int, v.split(".")))
    )
    assert data["advice"]["install"][0].startswith("CONDA_OVERRIDE_CUDA=")
    assert "conda create" in data["advice"]["install"][0]


def test_bad_interpreter_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["doctor", "--interpreter", "/no/such/python"]) == 2
    assert "no such file" in capsys.readouterr().err


# --- recommendations --------------------------------------------------------------------------


def test_h100_driver_580_torch_213_cu130_recommends_cuda130() -> None:
    facts = make_facts(torch=conda_torch("2.13.0", "13.0"), nvcc=NvccInfo("/opt/env/bin/nvcc", "13.0"))
    advice = advise(facts, FILES, channel="my-channel", version="1.7.0")
    assert advice.cuda == "13.0" and advice.variant_file == "variants/cuda130.yaml"
    assert advice.build_string == "cuda130_py312_torch213_*"
    assert advice.install == [
        'conda install -c my-channel -c conda-forge "causal-conv1d=1.7.0=cuda130_py312_torch213_*"'
    ]
    assert advice.build == ["python scripts/build.py --cuda 13.0 --python 3.12 --torch 2.13 --arch native"]
    assert advice.warnings == []
    text = doctor.render_text(facts, advice)
    assert "Install:" in text and "NVIDIA H100 80GB HBM3, compute capability 9.0 (sm_90)" in text


def test_h100_with_the_real_variant_files() -> None:
    files = load_variant_files()
    if "13.0" not in [f.cuda for f in files]:
        pytest.skip("no CUDA 13.0 variant file")
    advice = advise(make_facts(torch=conda_torch("2.13.0", "13.0")), files)
    assert advice.cuda == "13.0"


def test_pixi_environment_gets_pixi_add() -> None:
    facts = make_facts(torch=conda_torch(), env=EnvInfo("pixi", "default", "/p/.pixi/envs/default", "/p/pixi.toml"))
    advice = advise(facts, FILES, channel="conda-forge", version="1.7.0")
    assert advice.install == ['pixi add "causal-conv1d=1.7.0=cuda130*py312*"']  # conda-forge's naming
    other = advise(facts, FILES, channel="https://prefix.dev/my-channel", version="1.7.0")
    assert other.install[0] == "pixi workspace channel add https://prefix.dev/my-channel"


def test_torch_cu129_picks_cuda129_even_with_a_newer_driver() -> None:
    advice = advise(make_facts(torch=conda_torch("2.12.1", "12.9")), FILES, "my-channel", "1.7.0")
    assert advice.cuda == "12.9" and advice.build_string == "cuda129_py312_torch212_*"


def test_no_torch_follows_the_driver() -> None:
    advice = advise(make_facts(drv=driver(cuda="12.9", version="575.57.08")), FILES)
    assert advice.cuda == "12.9"
    assert advice.torch == "2.13"  # newest packaged torch
    advice = advise(make_facts(drv=driver(cuda="13.1", version="590.44.01")), FILES)
    assert advice.cuda == "13.0"


def test_driver_too_old_for_torch_cuda() -> None:
    advice = advise(make_facts(drv=driver(cuda="12.4", version="550.54.14"), torch=conda_torch()), FILES)
    assert advice.cuda == "13.0"
    assert "driver-too-old" in advice.codes


def test_unpackaged_torch_minor_means_build() -> None:
    advice = advise(make_facts(torch=conda_torch("2.11.0", "13.0")), FILES)
    assert advice.install == []
    assert advice.build == ["python scripts/build.py --cuda 13.0 --python 3.12 --torch 2.11 --arch native"]
    assert "No package fits; build it:" in doctor.render_text(make_facts(torch=conda_torch("2.11.0")), advice)


def test_cpu_only_torch_is_a_warning() -> None:
    advice = advise(make_facts(torch=conda_torch("2.13.0", None)), FILES)
    assert "torch-cpu-only" in advice.codes


# --- traps ------------------------------------------------------------------------------------


def test_sm103_with_nvcc13_warns_and_builds_sm100() -> None:
    facts = make_facts(drv=driver(gpus=[B300]), torch=conda_torch(), nvcc=NvccInfo("/usr/local/cuda/bin/nvcc", "13.0"))
    advice = advise(facts, FILES)
    assert "sm103-nvcc13" in advice.codes
    assert "#105" in next(w.message for w in advice.warnings if w.code == "sm103-nvcc13")
    assert advice.install  # the packaged sm_100 code runs on sm_103
    assert advice.build[0].endswith("--arch 10.0")  # never native (10.3) with nvcc 13


def test_sm103_with_cuda129_is_fine() -> None:
    facts = make_facts(drv=driver(gpus=[B300]), torch=conda_torch("2.13.0", "12.9"), nvcc=NvccInfo("/x/nvcc", "12.9"))
    advice = advise(facts, FILES)
    assert advice.cuda == "12.9"
    assert "sm103-nvcc13" not in advice.codes
    assert advice.build[0].endswith("--arch native")


def test_gpu_newer_than_every_packaged_arch_warns() -> None:
    lacking = VariantFile(
        Path("variants/cuda130.yaml"),
        dict(CUDA130.data, cuda_arch_list=["7.5;8.0;9.0;10.0"]),  # no 12.x, no PTX
    )
    facts = make_facts(drv=driver(gpus=[GB10]), torch=conda_torch())
    advice = advise(facts, [lacking])
    assert "arch-not-packaged" in advice.codes
    message = next(w.message for w in advice.warnings if w.code == "arch-not-packaged")
    assert "newer than every" in message and "sm_121" in message
    assert advice.install == []  # the package would not run: build instead
    assert advice.build[0].endswith("--arch native")


def test_ptx_covers_a_newer_gpu() -> None:
    with_ptx = VariantFile(Path("variants/cuda130.yaml"), dict(CUDA130.data, cuda_arch_list=["8.0;9.0+PTX"]))
    advice = advise(make_facts(drv=driver(gpus=[GB10]), torch=conda_torch()), [with_ptx])
    assert "arch-not-packaged" not in advice.codes
    assert any("PTX" in n for n in advice.notes)


def test_torch_cuda12_vs_nvcc13_mismatch() -> None:
    torch = TorchInfo("2.13.0+cu128", "12.8", True, InstalledDist("2.13.0+cu128", "pip"))
    facts = make_facts(drv=driver(), torch=torch, nvcc=NvccInfo("/usr/local/cuda/bin/nvcc", "13.0"), env=EnvInfo(None))
    advice = advise(facts, FILES)
    assert "torch-nvcc-cuda-mismatch" in advice.codes
    assert advice.cuda == "12.9"  # torch's CUDA major decides
    assert "pip-torch-in-conda-env" not in advice.codes  # no conda env active


def test_pip_torch_in_conda_env_warns() -> None:
    torch = TorchInfo("2.13.0+cu130", "13.0", True, InstalledDist("2.13.0+cu130", "pip"))
    advice = advise(make_facts(torch=torch), FILES)
    assert "pip-torch-in-conda-env" in advice.codes


def test_pip_wheel_built_for_another_torch() -> None:
    wheel = InstalledDist(
        "1.5.0.post8",
        "pip",
        url="https://github.com/Dao-AILab/causal-conv1d/releases/download/v1.5.0.post8/"
        "causal_conv1d-1.5.0.post8+cu12torch2.6cxx11abiFALSE-cp312-cp312-linux_x86_64.whl",
    )
    facts = make_facts(torch=conda_torch("2.13.0", "13.0"), wheel=wheel)
    advice = advise(facts, FILES)
    assert "pip-wheel-mismatch" in advice.codes
    message = next(w.message for w in advice.warnings if w.code == "pip-wheel-mismatch")
    assert "torch 2.6 (here 2.13)" in message and "CUDA 12 (here 13)" in message and "cxx11abi" in message
    assert advice.install[0].endswith("-m pip uninstall -y causal-conv1d")


def test_undefined_symbol_on_import() -> None:
    facts = make_facts(
        torch=conda_torch(),
        wheel=InstalledDist("1.7.0", "pip"),
        extension_error="ImportError: causal_conv1d_cuda.so: undefined symbol: _ZN3c104cuda9SetDeviceEi",
    )
    advice = advise(facts, FILES)
    assert "extension-undefined-symbol" in advice.codes


def test_matching_conda_package_is_only_a_note() -> None:
    wheel = InstalledDist("1.7.0", "conda", conda_build="cuda130_py312_torch213_h1234567_0")
    advice = advise(make_facts(torch=conda_torch(), wheel=wheel), FILES)
    assert advice.warnings == []
    assert any("cuda130_py312_torch213_h1234567_0" in n for n in advice.notes)


def test_no_variant_files() -> None:
    advice = advise(make_facts(torch=conda_torch()), [])
    assert advice.cuda is None and advice.install == [] and advice.build == []


# --- fact gathering ---------------------------------------------------------------------------


def test_env_detection() -> None:
    pixi = doctor.detect_env(
        {"PIXI_PROJECT_ROOT": "/p", "PIXI_ENVIRONMENT_NAME": "cuda", "CONDA_PREFIX": "/p/.pixi/envs/cuda"}, None
    )
    assert (pixi.kind, pixi.name, pixi.prefix) == ("pixi", "cuda", "/p/.pixi/envs/cuda")
    conda = doctor.detect_env({"CONDA_PREFIX": "/opt/conda/envs/ml", "CONDA_DEFAULT_ENV": "ml"}, None)
    assert (conda.kind, conda.name) == ("conda", "ml")
    assert doctor.detect_env({}, None).kind is None
    assert doctor.detect_env({"VIRTUAL_ENV": "/v/.venv"}, None).kind == "venv"


def test_conda_meta_marks_conda_installs(tmp_path: Path) -> None:
    meta = tmp_path / "conda-meta"
    meta.mkdir()
    (meta / "pytorch-2.13.0-cuda130_generic_py312_h5a1b2c3_200.json").write_text("{}")
    (meta / "causal-conv1d-1.7.0-cuda130_py312_torch213_h0123abc_0.json").write_text("{}")
    assert doctor.conda_records(str(tmp_path))["causal-conv1d"] == ("1.7.0", "cuda130_py312_torch213_h0123abc_0")
    probes = Probes(
        driver=lambda: driver(),
        interpreter=lambda exe, _imp: InterpreterInfo(
            exe, "3.12.8", str(tmp_path), torch=TorchInfo("2.13.0", "13.0", True, InstalledDist("2.13.0", "conda"))
        ),
        nvcc=lambda _env: None,
        environ={"CONDA_PREFIX": str(tmp_path)},
    )
    facts = doctor.gather_facts("/x/python", probes)
    assert facts.interpreter.torch.dist.from_conda
    assert facts.interpreter.causal_conv1d.conda_build == "cuda130_py312_torch213_h0123abc_0"
    assert facts.env.kind == "conda"


def test_probe_output_survives_a_crashing_torch() -> None:
    stdout = (
        '@@doctor {"stage": "python", "version": "3.12.8", "executable": "/e/bin/python", "prefix": "/e"}\n'
        '@@doctor {"stage": "dists", "torch": {"version": "2.13.0", "installer": "conda\\n", "direct_url": null},'
        ' "causal_conv1d": null}\n'
    )
    info = doctor.parse_probe_output("/e/bin/python", stdout, -11)
    assert info.version == "3.12.8" and info.torch is not None
    assert "signal 11" in info.torch.import_error
    assert info.torch.dist.installer == "conda"
    advice = advise(make_facts(torch=info.torch), FILES)
    assert "torch-import-failed" in advice.codes


def _fake_env(tmp_path: Path, torch_body: str) -> Path:
    """A wrapper interpreter whose sys.path holds a fake torch and a pip wheel of causal-conv1d."""
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(torch_body)
    (site / "causal_conv1d_cuda.py").write_text(
        'raise ImportError("/site/causal_conv1d_cuda.cpython-312-x86_64-linux-gnu.so: '
        'undefined symbol: _ZN3c1017RegisterOperatorsD1Ev")\n'
    )
    dist_info = site / "causal_conv1d-1.5.0.post8+cu12torch2.6cxx11abiTRUE.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: causal_conv1d\nVersion: 1.5.0.post8+cu12torch2.6cxx11abiTRUE\n"
    )
    (dist_info / "INSTALLER").write_text("pip\n")
    torch_info = site / "torch-2.13.0.dist-info"
    torch_info.mkdir()
    (torch_info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0+cu130\n")
    (torch_info / "INSTALLER").write_text("pip\n")
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


FAKE_TORCH = (
    "__version__ = \"2.13.0+cu130\"\nclass version:\n    cuda = '13.0'\nclass _C:\n    _GLIBCXX_USE_CXX11_ABI = True\n"
)


def test_probe_in_a_subprocess_with_a_stale_pip_wheel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wrapper = _fake_env(tmp_path, FAKE_TORCH)
    probes = Probes(driver=lambda: driver(), nvcc=lambda _env: None, environ={})
    assert doctor.run(cli.parse_args(["doctor", "--interpreter", str(wrapper), "--json"]), probes=probes) == 0
    data = json.loads(capsys.readouterr().out)
    interp = data["facts"]["interpreter"]
    assert interp["torch"]["version"] == "2.13.0+cu130"
    assert interp["torch"]["cuda"] == "13.0" and interp["torch"]["cxx11_abi"] is True
    assert interp["causal_conv1d"]["version"] == "1.5.0.post8+cu12torch2.6cxx11abiTRUE"
    assert interp["extension_ok"] is False
    codes = [w["code"] for w in data["advice"]["warnings"]]
    assert "pip-wheel-mismatch" in codes and "extension-undefined-symbol" in codes
    assert data["advice"]["cuda"] == "13.0"


def test_probe_survives_a_segfaulting_torch(tmp_path: Path) -> None:
    wrapper = _fake_env(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    info = doctor.probe_interpreter(str(wrapper))
    assert info.version == ".".join(map(str, sys.version_info[:3]))
    assert info.torch is not None and "crashed" in (info.torch.import_error or "")


def test_no_import_reads_metadata_only(tmp_path: Path) -> None:
    wrapper = _fake_env(tmp_path, "raise SystemExit('torch must not be imported')\n")
    info = doctor.probe_interpreter(str(wrapper), import_torch=False)
    assert info.torch is not None and info.torch.version == "2.13.0+cu130" and info.torch.import_error is None


def test_find_nvcc_prefers_cuda_home(tmp_path: Path) -> None:
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.9, V12.9.86'\n")
    nvcc.chmod(0o755)
    found = doctor.find_nvcc({"CUDA_HOME": str(tmp_path / "cuda")}, which=lambda _n: None)
    assert found is not None and found.version == "12.9" and found.path == str(nvcc)


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs /bin/sh")
def test_script_runs_without_package_context() -> None:
    result = subprocess.run(
        [sys.executable, str(DOCTOR), "--help"], capture_output=True, text=True, timeout=60, cwd="/"
    )
    assert result.returncode == 0 and "--json" in result.stdout


def test_this_projects_pixi_env_gets_conda_create_and_a_note() -> None:
    env = doctor.detect_env({"PIXI_PROJECT_ROOT": str(REPO_ROOT), "PIXI_ENVIRONMENT_NAME": "default"}, None)
    assert env.kind == "pixi" and env.this_project
    advice = advise(make_facts(torch=conda_torch(), env=env), FILES, "my-channel", "1.7.0")
    assert advice.install[0].startswith("conda create -n causal-conv1d -c my-channel -c conda-forge python=3.12 ")
    assert any("--interpreter" in n for n in advice.notes)


def test_active_conda_env_that_is_not_the_interpreters(tmp_path: Path) -> None:
    env = doctor.detect_env({"CONDA_PREFIX": "/opt/conda"}, str(tmp_path))
    assert env.kind is None  # tmp_path is neither a conda env nor a venv
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert doctor.detect_env({"CONDA_PREFIX": "/opt/conda"}, str(tmp_path)).kind == "venv"


def test_local_channel_without_the_package_says_build_first(tmp_path: Path) -> None:
    (tmp_path / "linux-64").mkdir()
    (tmp_path / "linux-64" / "repodata.json").write_text("{}")
    advice = advise(make_facts(torch=conda_torch()), FILES, str(tmp_path), "1.7.0")
    assert (
        advice.install[0]
        == f'conda install -c {tmp_path} -c conda-forge "causal-conv1d=1.7.0=cuda130_py312_torch213_*"'
    )
    assert any("build it first" in n for n in advice.notes)
    (tmp_path / "linux-64" / "causal-conv1d-1.7.0-cuda130_py312_torch213_habc1234_0.conda").write_bytes(b"")
    advice = advise(make_facts(torch=conda_torch()), FILES, str(tmp_path), "1.7.0")
    assert not any("build it first" in n for n in advice.notes)


def test_sm103_pip_build_only_when_it_may_come_from_nvcc13() -> None:
    def codes(version: str) -> list[str]:
        facts = make_facts(drv=driver(gpus=[B300]), torch=conda_torch(), wheel=InstalledDist(version, "pip"))
        return advise(facts, FILES).codes

    assert "sm103-pip-build" in codes("1.7.0")  # built here from source: maybe with nvcc 13
    assert "sm103-pip-build" not in codes("1.5.0.post8+cu12torch2.13cxx11abiTRUE")
