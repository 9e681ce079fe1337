"""Fast tests of scripts/offline_channel.py: input errors and the reuse check (no build, no network)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from ssm_conda import cli
from ssm_conda import standin as oc

REPO = Path(__file__).resolve().parents[2]
HAS_PY_SHARED = bool(list(Path(sys.base_prefix, "lib").glob("libpython3*.so*")))


def fake_cuda(root: Path, version: str = "13.0.88") -> Path:
    """A directory that looks like a CUDA toolkit: an nvcc script printing its version, libcudart."""
    (root / "bin").mkdir(parents=True)
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V{version}'\n")
    nvcc.chmod(0o755)
    lib = root / "targets/x86_64-linux/lib"
    lib.mkdir(parents=True)
    (lib / "libcudart.so.13").write_bytes(b"\x7fELF")
    return root


def write_conda(path: Path, complete: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("metadata.json", "{}")
        zf.writestr("info-x.tar.zst", b"")
        if complete:
            zf.writestr("pkg-x.tar.zst", b"")
    return path


# --- input errors: one line, exit 2, nothing written ------------------------------------------


def run(argv: list[str], capsys) -> tuple[int, str]:
    code = cli.main(["standin", *argv])
    return code, capsys.readouterr().err


@pytest.mark.skipif(not HAS_PY_SHARED, reason="the running Python has no shared libpython")
def test_missing_torch_wheel(tmp_path, capsys):
    out = tmp_path / "channel"
    code, err = run(["--output", str(out), "--cuda-home", str(fake_cuda(tmp_path / "cuda")),
                     "--wheel-dir", str(tmp_path / "empty"), "--offline"], capsys)
    assert code == 2
    assert err.count("\n") == 1 and "torch wheel" in err
    assert not out.exists()


def torch_args(tmp_path: Path, **overrides) -> argparse.Namespace:
    values = {"torch_installed": None, "torch_wheel": None, "torch": "2.14", "offline": False}
    return argparse.Namespace(**{**values, **overrides})


def test_missing_torch_wheel_is_downloaded_for_that_python(tmp_path, monkeypatch):
    """A stand-in for another Python needs torch for it: fetched from PyPI, pinned to --torch."""
    calls = []

    def fake_download(names, dest, py_ver):
        calls.append((list(names), py_ver))
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "torch-2.14.1-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"")

    monkeypatch.setattr(oc, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(oc, "pip_download", fake_download)
    kind, path, version = oc.detect_torch(torch_args(tmp_path), "3.12", [tmp_path / "empty"])
    assert calls == [(["torch==2.14.*"], "3.12")]
    assert (kind, version) == ("wheel", "2.14.1") and path.parent == tmp_path / "cache" / "wheels"


def test_missing_torch_wheel_offline_is_an_error_without_download(tmp_path, monkeypatch):
    monkeypatch.setattr(oc, "pip_download", lambda *a: pytest.fail("--offline must not download"))
    with pytest.raises(oc.UsageError, match="no torch wheel for cp312"):
        oc.detect_torch(torch_args(tmp_path, offline=True), "3.12", [tmp_path / "empty"])


@pytest.mark.skipif(not HAS_PY_SHARED, reason="the running Python has no shared libpython")
def test_named_torch_wheel_missing(tmp_path, capsys):
    out = tmp_path / "channel"
    code, err = run(["--output", str(out), "--cuda-home", str(fake_cuda(tmp_path / "cuda")),
                     "--torch-wheel", str(tmp_path / "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl")], capsys)
    assert code == 2 and err.startswith("error: torch wheel not found") and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.skipif(not HAS_PY_SHARED, reason="the running Python has no shared libpython")
def test_missing_nvcc(tmp_path, capsys):
    out = tmp_path / "channel"
    code, err = run(["--output", str(out), "--cuda-home", str(tmp_path / "nocuda")], capsys)
    assert code == 2
    assert err.startswith("error: no nvcc at ") and err.count("\n") == 1
    assert not out.exists()


def test_python_without_shared_lib(tmp_path, capsys):
    prefix = tmp_path / "py"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "lib").mkdir()
    (prefix / "bin" / "python3.11").symlink_to(sys.executable)
    out = tmp_path / "channel"
    code, err = run(["--output", str(out), "--python-prefix", str(prefix)], capsys)
    assert code == 2 and "libpython" in err and err.count("\n") == 1
    assert not out.exists()


def test_torch_sources_exclude_each_other(tmp_path, capsys):
    code, err = run(["--output", str(tmp_path / "c"), "--torch-wheel", "a.whl", "--torch-installed", "x"], capsys)
    assert code == 2 and "exclude each other" in err
    assert not (tmp_path / "c").exists()


@pytest.mark.skipif(not HAS_PY_SHARED, reason="the running Python has no shared libpython")
def test_cli_runs_as_a_file(tmp_path):
    """`python scripts/offline_channel.py` works without the package on sys.path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-m", "ssm_conda", "standin", "--output", str(tmp_path / "c"),
         "--cuda-home", str(tmp_path / "nocuda")],
        capture_output=True, text=True, cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert result.stderr.startswith("error: no nvcc at ") and result.stderr.count("\n") == 1
    assert not (tmp_path / "c").exists()


# --- the reuse check ----------------------------------------------------------------------------


def test_existing_package_reused(tmp_path):
    pkg = write_conda(oc.package_path(tmp_path, "linux-64", "pytorch", "2.14.1", "cuda130_generic_py311_habc_0"))
    assert oc.existing_package(tmp_path, "linux-64", "pytorch", "2.14.1", "cuda130_generic_py311_habc_0") == pkg


def test_other_build_string_is_not_reused(tmp_path):
    write_conda(oc.package_path(tmp_path, "linux-64", "pytorch", "2.14.1", "cuda130_generic_py311_habc_0"))
    assert oc.existing_package(tmp_path, "linux-64", "pytorch", "2.14.1", "cuda130_generic_py311_hdef_0") is None
    assert oc.existing_package(tmp_path, "linux-64", "pytorch", "2.14.0", "cuda130_generic_py311_habc_0") is None
    assert oc.existing_package(tmp_path, "noarch", "pytorch", "2.14.1", "cuda130_generic_py311_habc_0") is None


def test_recipe_digest_follows_recipe_context_and_named_helpers(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("build:\n  script: python $RECIPE_DIR/rewrite_torch_metadata.py\nrequirements:\n  run: [python]\n")
    (tmp_path / "rewrite_torch_metadata.py").write_text("v1")
    (tmp_path / "activate-gcc.sh").write_text("v1")
    context = {"version": "2.14.1", "wheel": "/w/torch.whl"}
    base = oc.recipe_digest(recipe, context)
    assert oc.recipe_digest(recipe, dict(context)) == base
    (tmp_path / "activate-gcc.sh").write_text("v2")  # not named by this recipe
    assert oc.recipe_digest(recipe, context) == base
    assert oc.recipe_digest(recipe, {**context, "activate": "activate-gcc.sh"}) != base  # named by the context
    assert oc.recipe_digest(recipe, {**context, "wheel": "/w/other.whl"}) != base
    (tmp_path / "rewrite_torch_metadata.py").write_text("v2")
    changed_helper = oc.recipe_digest(recipe, context)
    assert changed_helper != base
    recipe.write_text(recipe.read_text().replace("[python]", "[python, triton >=3.8.0,<3.9.0a0]"))
    assert oc.recipe_digest(recipe, context) not in (base, changed_helper)


def test_stamp_lives_outside_the_served_subdirs(tmp_path):
    pkg = oc.package_path(tmp_path, "linux-64", "pytorch", "2.14.1", "cuda130_generic_py311_habc_0")
    assert oc.stamp_path(pkg) == tmp_path / ".recipes" / "linux-64-pytorch-2.14.1-cuda130_generic_py311_habc_0.conda.sha256"


def test_truncated_package_is_removed(tmp_path):
    pkg = oc.package_path(tmp_path, "noarch", "pip", "26.3", "pyh_0")
    pkg.parent.mkdir(parents=True)
    pkg.write_bytes(b"PK\x03\x04 truncated")
    assert oc.existing_package(tmp_path, "noarch", "pip", "26.3", "pyh_0") is None
    assert not pkg.exists()


def test_package_without_payload_is_not_complete(tmp_path):
    pkg = write_conda(tmp_path / "noarch" / "pip-26.3-pyh_0.conda", complete=False)
    assert not oc.is_complete_package(pkg)


# --- metadata translation -------------------------------------------------------------------------


def test_wheel_selection_prefers_newest_fitting(tmp_path):
    for name in ("mpmath-1.3.0-py3-none-any.whl", "mpmath-1.4.1-py3-none-any.whl",
                 "numpy-2.4.1-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
                 "numpy-2.5.0-cp312-cp312-manylinux_2_28_x86_64.whl"):
        (tmp_path / name).write_bytes(b"")
    assert oc.find_wheel([tmp_path], "mpmath", "<1.4", "cp311").version == "1.3.0"
    assert oc.find_wheel([tmp_path], "mpmath", "", "cp311").version == "1.4.1"
    assert oc.find_wheel([tmp_path], "numpy", "", "cp311").version == "2.4.1"
    assert oc.find_wheel([tmp_path], "torch", "", "cp311") is None


def test_conda_run_requirements():
    run = oc.conda_run_requirements(
        ["packaging>=22", "pluggy<2,>=1.5", "colorama>=0.4; sys_platform == 'win32'",
         "typing-extensions~=4.10", "pytest; extra == 'test'",
         "triton~=3.8.0; platform_system == 'Linux' and python_version < '3.15'"], ">=3.10", "3.11")
    assert run == ["python >=3.10", "packaging >=22", "pluggy >=1.5,<2", "typing_extensions >=4.10,<5.0a0",
                   "triton >=3.8.0,<3.9.0a0"]
    assert oc.conda_run_requirements(["triton~=3.8.0; python_version < '3.15'"], None, "3.15") == ["python"]


def test_torch_companions_pinned_as_torch_asks(tmp_path):
    requires = ("Requires-Dist: filelock\nRequires-Dist: nvidia-nccl-cu13==2.30.7; platform_system == \"Linux\"\n"
                "Requires-Dist: triton~=3.8.0; platform_system == \"Linux\" and python_version < \"3.15\"\n")
    wheel = tmp_path / "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("torch-2.14.1.dist-info/METADATA", "Name: torch\nVersion: 2.14.1\n" + requires)
    assert oc.torch_companions("wheel", wheel, "3.11") == {"triton": "~=3.8.0"}
    assert oc.torch_companions("wheel", wheel, "3.15") == {}
    site = tmp_path / "site"
    (site / "torch-2.14.1.dist-info").mkdir(parents=True)
    (site / "torch-2.14.1.dist-info" / "METADATA").write_text("Name: torch\n" + requires)
    assert oc.torch_companions("installed", site, "3.12") == {"triton": "~=3.8.0"}


def test_variant_overrides_tell_the_truth():
    machine = oc.Machine(Path("/p"), "3.11.7", "3.11", Path("/c"), "13.0.88", "13.0.96", "/usr/bin/gcc-12",
                         "/usr/bin/g++-12", "12.2.0", "2.36", [], [], [], "wheel", Path("/t.whl"), "2.14.1")
    assert oc.variant_overrides(machine) == {
        "c_compiler_version": ["12"], "cxx_compiler_version": ["12"], "c_stdlib_version": ["2.36"]}


def test_installed_nvidia_library_from_record(tmp_path):
    dist = tmp_path / "nvidia_cublas-13.1.1.3.dist-info"
    dist.mkdir()
    (dist / "RECORD").write_text(
        "nvidia/cu13/lib/libcublas.so.13,sha256=x,1\nnvidia/cu13/lib/libcublasLt.so.13,sha256=y,2\n"
        "nvidia/cu13/include/cublas.h,sha256=z,3\nnvidia_cublas-13.1.1.3.dist-info/RECORD,,\n")
    wheel = oc.installed_nvidia(tmp_path, "nvidia_cublas")
    assert wheel is not None and wheel.version == "13.1.1.3" and wheel.path == tmp_path
    assert wheel.lib_files == ("nvidia/cu13/lib/libcublas.so.13", "nvidia/cu13/lib/libcublasLt.so.13")
    assert oc.installed_nvidia(tmp_path, "nvidia_cufft") is None


def test_wheel_context_carries_library_list(tmp_path):
    wheel = oc.Wheel(tmp_path, "nvidia_nvtx", "13.0.85", ("nvidia/cu13/lib/libnvtx3interop.so.1",))
    ctx = oc.wheel_context(wheel, "cuda-nvtx")
    assert ctx["lib_files"] == "nvidia/cu13/lib/libnvtx3interop.so.1" and ctx["version"] == "13.0.85"


def test_prune_removes_only_packages_no_standin_builds(tmp_path):
    keep = write_conda(oc.package_path(tmp_path, "linux-64", "nccl", "2.30.7", "hnew_0"))
    old = write_conda(oc.package_path(tmp_path, "linux-64", "nccl", "2.30.7", "hold_0"))
    other = tmp_path / "noarch" / "repodata.json"
    other.parent.mkdir()
    other.write_text("{}")
    stamps = {p: oc.stamp_path(p) for p in (keep, old)}
    stamps[keep].parent.mkdir()
    for stamp in stamps.values():
        stamp.write_text("digest")
    removed = oc.prune_channel(tmp_path, {keep}, "3.11", lambda _msg: None)
    assert removed == [old] and keep.exists() and not old.exists() and other.exists()
    assert stamps[keep].exists() and not stamps[old].exists()


def test_prune_keeps_the_packages_of_other_pythons(tmp_path):
    """A channel built for 3.11, then for 3.12, serves both: the second run prunes only its own."""
    ours_new = write_conda(oc.package_path(tmp_path, "linux-64", "numpy", "2.4.1", "py312hnew_0"))
    ours_old = write_conda(oc.package_path(tmp_path, "linux-64", "numpy", "2.4.1", "py312hold_0"))
    shared_old = write_conda(oc.package_path(tmp_path, "noarch", "pip", "26.3", "pyhold_0"))
    theirs = [
        write_conda(oc.package_path(tmp_path, "linux-64", "numpy", "2.4.1", "py311h845419f_0")),
        write_conda(oc.package_path(tmp_path, "linux-64", "pytorch", "2.14.1", "cuda130_generic_py311_h90ee949_0")),
        write_conda(oc.package_path(tmp_path, "linux-64", "python", "3.11.7", "h9770da4_0_cpython")),
        write_conda(oc.package_path(tmp_path, "linux-64", "python_abi", "3.11", "8_cp311")),
    ]
    removed = oc.prune_channel(tmp_path, {ours_new}, "3.12", lambda _msg: None)
    assert sorted(removed) == sorted([ours_old, shared_old])
    assert ours_new.exists() and all(p.exists() for p in theirs)


@pytest.mark.parametrize(("filename", "python"), [
    ("python-3.12.1-h1234567_0_cpython.conda", "3.12"),
    ("python_abi-3.10-8_cp310.conda", "3.10"),
    ("numpy-2.4.1-py311h845419f_0.conda", "3.11"),
    ("markupsafe-3.0.4-py314h3a93723_0.conda", "3.14"),
    ("pytorch-2.14.1-cuda130_generic_py312_h90ee949_0.conda", "3.12"),
    ("pip-26.3-pyhc1a33c8_0.conda", None),
    ("libgcc-12.2.0-h839968c_0.conda", None),
    ("cuda-version-13.0-hefd1383_0.conda", None),
])
def test_package_python_reads_the_file_name(filename, python):
    assert oc.package_python(Path(filename)) == python
