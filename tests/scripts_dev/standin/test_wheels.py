"""Wheels: which fits the target (tags read by packaging), their metadata as conda requirements, downloads."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from ssm_conda.console import PipelineError, UsageError
from ssm_conda_dev.standin import wheels
from ssm_conda_dev.standin.wheels import TargetPython

PY311 = TargetPython("3.11", "2.36")
PY311_ARM = TargetPython("3.11", "2.36", platform="linux-aarch64")


def touch(directory: Path, *names: str) -> None:
    """Empty wheels: zips without members (find_wheel opens the one it picks)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        zipfile.ZipFile(directory / name, "w").close()


def test_wheel_selection_prefers_newest_fitting(tmp_path):
    touch(tmp_path, "mpmath-1.3.0-py3-none-any.whl", "mpmath-1.4.1-py3-none-any.whl",
          "numpy-2.4.1-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
          "numpy-2.5.0-cp312-cp312-manylinux_2_28_x86_64.whl", "numpy-2.6.0-cp311-cp311-musllinux_1_2_x86_64.whl",
          "typing_extensions-4.16.0-py3-none-any.whl", "not-a-wheel.whl")
    assert wheels.find_wheel([tmp_path], "mpmath", "<1.4", PY311).version == "1.3.0"
    assert wheels.find_wheel([tmp_path], "mpmath", "", PY311).version == "1.4.1"
    assert wheels.find_wheel([tmp_path], "numpy", "", PY311).version == "2.4.1"
    assert wheels.find_wheel([tmp_path], "Typing-Extensions", "", PY311).version == "4.16.0"
    assert wheels.find_wheel([tmp_path], "torch", "", PY311) is None
    assert wheels.find_wheel([tmp_path / "absent"], "mpmath", "", PY311) is None


def test_first_folder_wins_a_tie(tmp_path):
    touch(tmp_path / "a", "pip-26.3-py3-none-any.whl")
    touch(tmp_path / "b", "pip-26.3-py3-none-any.whl")
    found = wheels.find_wheel([tmp_path / "b", tmp_path / "a"], "pip", "", PY311)
    assert found.path == tmp_path / "b" / "pip-26.3-py3-none-any.whl"


def test_a_damaged_wheel_is_named_not_passed_over(tmp_path):
    """The newest fitting wheel cut short stops the run naming it (an older one is not silently taken instead);
    one in the cache, from an interrupted download, is ours to refetch: exit 1."""
    touch(tmp_path / "dir", "pip-26.2-py3-none-any.whl")
    (tmp_path / "dir" / "pip-26.3-py3-none-any.whl").write_bytes(b"PK\x03\x04 cut short")
    with pytest.raises(UsageError, match=r"pip-26.3-py3-none-any.whl: not a readable wheel \(File is not a zip file\); "
                       "delete it or replace it$"):
        wheels.find_wheel([tmp_path / "dir"], "pip", "", PY311)
    (tmp_path / "cache" / "wheels").mkdir(parents=True)
    (tmp_path / "dir" / "pip-26.3-py3-none-any.whl").rename(tmp_path / "cache" / "wheels" / "pip-26.3-py3-none-any.whl")
    with pytest.raises(PipelineError, match="pip-26.3-py3-none-any.whl: .*; delete it: the next run downloads it again"):
        wheels.find_wheel([tmp_path / "dir", tmp_path / "cache" / "wheels"], "pip", "", PY311,
                          ours=tmp_path / "cache" / "wheels")


@pytest.mark.parametrize(("filename", "target", "fits"), [
    ("torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl", PY311, True),
    ("torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl", TargetPython("3.12", "2.36"), False),
    ("bcrypt-5.0.0-cp39-abi3-manylinux_2_34_x86_64.whl", TargetPython("3.12", "2.36"), True),
    ("bcrypt-5.0.0-cp39-abi3-manylinux_2_34_x86_64.whl", PY311, True),
    ("clang_tidy-22.1.8-py2.py3-none-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl", PY311, True),
    ("nvidia_nvtx-13.0.85-py3-none-manylinux1_x86_64.manylinux_2_5_x86_64.whl", PY311, True),
    ("ninja-1.13.2-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", PY311, True),
    ("cmeel_qhull-8.0.2.1-1-py3-none-manylinux_2_28_x86_64.whl", PY311, True),  # a build tag
    ("local-1.0-cp311-cp311-linux_x86_64.whl", PY311, True),
    ("new-1.0-cp311-cp311-manylinux_2_39_x86_64.whl", PY311, False),  # newer than the machine's glibc
    ("new-1.0-cp311-cp311-manylinux_2_39_x86_64.whl", TargetPython("3.11", "2.39"), True),
    ("arm-1.0-cp311-cp311-manylinux_2_28_aarch64.whl", PY311, False),
    ("arm-1.0-cp311-cp311-manylinux_2_28_aarch64.whl", PY311_ARM, True),
    ("torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", PY311_ARM, False),
    ("nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_aarch64.manylinux_2_17_aarch64.whl", PY311_ARM, True),
    ("musl-1.0-py3-none-musllinux_1_1_x86_64.whl", PY311, False),
    ("win-1.0-cp311-cp311-win_amd64.whl", PY311, False),
    ("py2only-1.0-py2-none-any.whl", PY311, False),
    ("debug-1.0-cp311-cp311d-manylinux_2_28_x86_64.whl", PY311, False),
])
def test_wheel_fits_the_target(filename, target, fits):
    assert wheels.fits(Path(filename), target) is fits


def test_linux_platforms_follow_the_glibc():
    platforms = wheels.linux_platforms("2.28")
    assert platforms[0] == "manylinux_2_28_x86_64" and platforms[-1] == "linux_x86_64"
    assert {"manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "manylinux_2_5_x86_64"} <= set(platforms)
    assert "manylinux_2_29_x86_64" not in platforms and "manylinux_2_4_x86_64" not in platforms
    arm = wheels.linux_platforms("2.28", "linux-aarch64")
    assert arm[0] == "manylinux_2_28_aarch64" and "manylinux2014_aarch64" in arm and arm[-1] == "linux_aarch64"


def test_markers_follow_the_platform():
    """PyPI's torch asks for NVIDIA's wheels with `platform_machine == 'x86_64'` on some releases:
    an aarch64 target must read its own machine."""
    requires = [Requirement("nvidia-nccl==2.28; platform_machine == 'x86_64'"),
                Requirement("nvidia-nvshmem==3.4; platform_machine == 'aarch64'")]
    assert [r.name for r in wheels.applicable(requires, PY311)] == ["nvidia-nccl"]
    assert [r.name for r in wheels.applicable(requires, PY311_ARM)] == ["nvidia-nvshmem"]


@pytest.mark.parametrize(("pep440", "conda"), [
    ("", ""),
    (">=22", ">=22"),
    ("<2,>=1.5", ">=1.5,<2"),
    ("~=3.8.0", ">=3.8.0,<3.9.0a0"),
    ("~=4.10", ">=4.10,<5.0a0"),
    ("~=2.0.1.post1", ">=2.0.1.post1,<2.1.0a0"),
    ("===1.0", "==1.0"),
    ("==2.*", "==2.*"),
    ("!=1.2, >= 1.0", ">=1.0,!=1.2"),
])
def test_conda_specifier(pep440, conda):
    assert wheels.conda_specifier(pep440) == conda


def test_conda_run_requirements():
    requires = [Requirement(r) for r in (
        "packaging>=22", "pluggy<2,>=1.5", "colorama>=0.4; sys_platform == 'win32'", "typing-extensions~=4.10",
        "pytest; extra == 'test'", "triton~=3.8.0; platform_system == 'Linux' and python_version < '3.15'",
        "MarkupSafe>=2.0", "torch>=2", "tomli; python_full_version < '3.11.2'")]
    run = wheels.conda_run_requirements(requires, ">=3.10", TargetPython("3.11", "2.36", "3.11.7"))
    assert run == ["python >=3.10", "packaging >=22", "pluggy >=1.5,<2", "typing_extensions >=4.10,<5.0a0",
                   "triton >=3.8.0,<3.9.0a0", "markupsafe >=2.0", "pytorch >=2"]
    assert wheels.conda_run_requirements(requires[5:6], None, TargetPython("3.15", "2.36")) == ["python"]
    assert "tomli" in wheels.conda_run_requirements(requires, None, TargetPython("3.11", "2.36", "3.11.1"))


def test_read_metadata_of_a_wheel_and_of_an_installed_dist(tmp_path, wheel_maker):
    wheel = wheel_maker(tmp_path, "pytest-9.2.0-py3-none-any.whl", ("iniconfig>=1", "pluggy<2,>=1.5"), ">=3.10",
                        ("pytest = pytest:console_main", "py.test = pytest:console_main"))
    meta = wheels.read_metadata(wheel)
    assert [str(r) for r in meta.requires] == ["iniconfig>=1", "pluggy<2,>=1.5"]
    assert str(meta.requires_python) == ">=3.10"
    assert meta.console_scripts == ["pytest = pytest:console_main", "py.test = pytest:console_main"]
    dist_info = tmp_path / "site" / "torch-2.14.1.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.14.1\nRequires-Dist: filelock\n")
    installed = wheels.read_metadata(dist_info)
    assert [str(r) for r in installed.requires] == ["filelock"] and installed.console_scripts == []


def test_a_zip_without_metadata_is_an_error(tmp_path):
    import zipfile

    path = tmp_path / "broken-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("broken/__init__.py", "")
    with pytest.raises(UsageError, match="no .dist-info/METADATA"):
        wheels.read_metadata(path)


def test_installed_nvidia_library_from_record(tmp_path):
    dist = tmp_path / "nvidia_cublas-13.1.1.3.dist-info"
    dist.mkdir()
    (dist / "RECORD").write_text(
        "nvidia/cu13/lib/libcublas.so.13,sha256=x,1\nnvidia/cu13/lib/libcublasLt.so.13,sha256=y,2\n"
        "nvidia/cu13/include/cublas.h,sha256=z,3\nnvidia_cublas-13.1.1.3.dist-info/RECORD,,\n")
    wheel = wheels.installed_nvidia(tmp_path, "nvidia_cublas")
    assert wheel is not None and wheel.version == "13.1.1.3" and wheel.path == tmp_path
    assert wheel.lib_files == ("nvidia/cu13/lib/libcublas.so.13", "nvidia/cu13/lib/libcublasLt.so.13")
    assert wheels.installed_nvidia(tmp_path, "nvidia_cufft") is None


# --- pip download ---------------------------------------------------------------------------------


class FakePip:
    """subprocess.run for `pip download`: saves a wheel of a given size, or fails like pip."""

    def __init__(self, sizes: dict[str, int], fail: bool = False) -> None:
        self.sizes, self.fail, self.calls = sizes, fail, []

    def __call__(self, cmd, **kwargs):
        self.calls.append((cmd, kwargs))
        if self.fail:
            return subprocess.CompletedProcess(cmd, 1, "", "Looking in links\nERROR: No matching distribution found for x\n")
        dest = Path(cmd[cmd.index("-d") + 1])
        for name, size in self.sizes.items():
            if name.startswith(cmd[-1].split("=")[0].split("<")[0] + "-"):
                (dest / name).write_bytes(b"\0" * size)
        return subprocess.CompletedProcess(cmd, 0, "", "")


def test_download_off_a_terminal_is_one_line_per_wheel(tmp_path, monkeypatch, capsys):
    pip = FakePip({"torch-2.14.1-cp312-cp312-manylinux_2_28_x86_64.whl": 5_500_000, "pluggy-1.7.0-py3-none-any.whl": 31_400})
    monkeypatch.setattr(wheels.subprocess, "run", pip)
    new = wheels.pip_download(["torch==2.14.*", "pluggy"], tmp_path, TargetPython("3.12", "2.36"))
    assert [p.name for p in new] == ["torch-2.14.1-cp312-cp312-manylinux_2_28_x86_64.whl", "pluggy-1.7.0-py3-none-any.whl"]
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert err[0].startswith("downloaded torch-2.14.1-cp312-cp312-manylinux_2_28_x86_64.whl (5.5 MB in ")
    assert err[1].startswith("downloaded pluggy-1.7.0-py3-none-any.whl (31.4 KB in ")
    cmd, kwargs = pip.calls[0]
    assert cmd[-1] == "torch==2.14.*" and "-q" in cmd and kwargs["stdout"] == subprocess.PIPE
    assert cmd[cmd.index("--python-version") + 1] == "3.12" and cmd[cmd.index("--abi") + 1] == "cp312"
    assert "manylinux_2_36_x86_64" in cmd and "manylinux_2_37_x86_64" not in cmd


def test_download_on_a_terminal_lets_pip_draw_its_bar(tmp_path, monkeypatch):
    pip = FakePip({"pluggy-1.7.0-py3-none-any.whl": 10})
    monkeypatch.setattr(wheels.subprocess, "run", pip)
    monkeypatch.setattr(wheels.sys.stderr, "isatty", lambda: True)
    wheels.pip_download(["pluggy"], tmp_path, TargetPython("3.12", "2.36"))
    cmd, kwargs = pip.calls[0]
    assert "-q" not in cmd and kwargs["stdout"] == 2  # pip's own output, bar included, on our stderr


def test_failed_download_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(wheels.subprocess, "run", FakePip({}, fail=True))
    with pytest.raises(UsageError, match=r"^no torch==2\.14\.\* wheel here and pip download failed: ERROR: No matching"):
        wheels.pip_download(["torch==2.14.*"], tmp_path, TargetPython("3.12", "2.36"))


@pytest.mark.parametrize(("filename", "pure"), [
    ("charset_normalizer-3.5.3-py3-none-any.whl", True),
    ("kaitaistruct-0.11-py2.py3-none-any.whl", True),
    ("charset_normalizer-3.5.3-cp310-cp310-manylinux_2_28_x86_64.whl", False),
    ("ninja-1.13.2-py3-none-manylinux2014_x86_64.whl", False),
])
def test_a_noarch_package_repacks_a_pure_wheel(filename, pure):
    assert wheels.is_pure(wheels.Wheel(Path(filename), "x", "1")) is pure


def test_requires_python_decides_which_wheel_a_python_gets(tmp_path, wheel_maker):
    new = wheels.Wheel(wheel_maker(tmp_path, "networkx-3.6.1-py3-none-any.whl", requires_python=">=3.11,!=3.14.1"),
                       "networkx", "3.6.1")
    assert not wheels.admits(new, TargetPython("3.10", "2.36", "3.10.13"))
    assert wheels.admits(new, PY311)


@pytest.mark.parametrize(("requires_python", "py_ver"), [
    (None, "3.10"), (">=3.9", "3.10"), (">=3.10.0", "3.10"), (">=3.11,!=3.14.1", "3.11"), (">=3.12", "3.12"),
])
def test_noarch_markers_are_read_for_the_oldest_python_the_wheel_takes(requires_python, py_ver):
    """As conda-forge's noarch recipes state their python_min's requirements: one build for every Python."""
    assert wheels.noarch_python(requires_python, "3.10").py_ver == py_ver
    requires = [Requirement("exceptiongroup>=1; python_version < '3.11'")]
    run = wheels.conda_run_requirements(requires, requires_python, wheels.noarch_python(requires_python, "3.10"))
    assert ("exceptiongroup >=1" in run) is (py_ver == "3.10")


def test_a_pure_download_asks_pip_for_py3_none_any(tmp_path, monkeypatch):
    """charset-normalizer has binary wheels too, which pip prefers for a cp310 target."""
    pip = FakePip({"charset_normalizer-3.5.3-py3-none-any.whl": 10})
    monkeypatch.setattr(wheels.subprocess, "run", pip)
    wheels.pip_download(["charset-normalizer"], tmp_path, TargetPython("3.10", "2.36"), pure=True)
    cmd, _kwargs = pip.calls[0]
    assert cmd[cmd.index("--platform") + 1] == "any" and cmd.count("--platform") == 1
    assert cmd[cmd.index("--implementation") + 1] == "py" and "--abi" not in cmd
    assert cmd[cmd.index("--python-version") + 1] == "3.10"
