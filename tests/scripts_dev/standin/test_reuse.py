"""What the channel already holds: complete packages, digest stamps, pruning (no build, no network)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from ssm_conda_dev.standin import reuse


def write_conda(path: Path, complete: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("metadata.json", "{}")
        zf.writestr("info-x.tar.zst", b"")
        if complete:
            zf.writestr("pkg-x.tar.zst", b"")
    return path


def test_existing_package_reused(tmp_path):
    pkg = write_conda(reuse.package_path(tmp_path, "linux-64", "pytorch", "2.14.1", "cuda130_generic_py311_habc_0"))
    assert reuse.existing_package(tmp_path, "linux-64", "pytorch", "2.14.1", "cuda130_generic_py311_habc_0") == pkg


def test_other_build_string_is_not_reused(tmp_path):
    write_conda(reuse.package_path(tmp_path, "linux-64", "pytorch", "2.14.1", "cuda130_generic_py311_habc_0"))
    assert reuse.existing_package(tmp_path, "linux-64", "pytorch", "2.14.1", "cuda130_generic_py311_hdef_0") is None
    assert reuse.existing_package(tmp_path, "linux-64", "pytorch", "2.14.0", "cuda130_generic_py311_habc_0") is None
    assert reuse.existing_package(tmp_path, "noarch", "pytorch", "2.14.1", "cuda130_generic_py311_habc_0") is None


def test_recipe_digest_follows_recipe_context_and_named_helpers(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("build:\n  script: python $RECIPE_DIR/rewrite_torch_metadata.py\nrequirements:\n  run: [python]\n")
    (tmp_path / "rewrite_torch_metadata.py").write_text("v1")
    (tmp_path / "activate-gcc.sh").write_text("v1")
    context = {"version": "2.14.1", "wheel": "/w/torch.whl"}
    base = reuse.recipe_digest(recipe, context)
    assert reuse.recipe_digest(recipe, dict(context)) == base
    (tmp_path / "activate-gcc.sh").write_text("v2")  # not named by this recipe
    assert reuse.recipe_digest(recipe, context) == base
    assert reuse.recipe_digest(recipe, {**context, "activate": "activate-gcc.sh"}) != base  # named by the context
    assert reuse.recipe_digest(recipe, {**context, "wheel": "/w/other.whl"}) != base
    (tmp_path / "rewrite_torch_metadata.py").write_text("v2")
    changed_helper = reuse.recipe_digest(recipe, context)
    assert changed_helper != base
    recipe.write_text(recipe.read_text().replace("[python]", "[python, triton >=3.8.0,<3.9.0a0]"))
    assert reuse.recipe_digest(recipe, context) not in (base, changed_helper)


def test_stamp_lives_outside_the_served_subdirs(tmp_path):
    pkg = reuse.package_path(tmp_path, "linux-64", "pytorch", "2.14.1", "cuda130_generic_py311_habc_0")
    assert reuse.stamp_path(pkg) == tmp_path / ".recipes" / "linux-64-pytorch-2.14.1-cuda130_generic_py311_habc_0.conda.sha256"
    assert not reuse.is_stamped(pkg, "abc")
    reuse.write_stamp(pkg, "abc")
    assert reuse.is_stamped(pkg, "abc") and not reuse.is_stamped(pkg, "def")


def test_a_stamp_is_not_written_through_a_hard_link(tmp_path):
    """A channel copied with `cp -al` shares its stamps' files with the original until a rebuild replaces them."""
    original = write_conda(reuse.package_path(tmp_path / "a", "noarch", "pytest", "9.2.0", "pyh_0"))
    reuse.write_stamp(original, "old")
    copy = reuse.package_path(tmp_path / "b", "noarch", "pytest", "9.2.0", "pyh_0")
    copy.parent.mkdir(parents=True)
    reuse.stamp_path(copy).parent.mkdir()
    reuse.stamp_path(copy).hardlink_to(reuse.stamp_path(original))
    reuse.write_stamp(copy, "new")
    assert reuse.stamp_path(original).read_text() == "old" and reuse.stamp_path(copy).read_text() == "new"


def test_truncated_package_is_removed(tmp_path):
    pkg = reuse.package_path(tmp_path, "noarch", "pip", "26.3", "pyh_0")
    pkg.parent.mkdir(parents=True)
    pkg.write_bytes(b"PK\x03\x04 truncated")
    assert reuse.existing_package(tmp_path, "noarch", "pip", "26.3", "pyh_0") is None
    assert not pkg.exists()


def test_package_without_payload_is_not_complete(tmp_path):
    pkg = write_conda(tmp_path / "noarch" / "pip-26.3-pyh_0.conda", complete=False)
    assert not reuse.is_complete_package(pkg)


def test_prune_removes_the_older_builds_of_what_it_built(tmp_path):
    keep = write_conda(reuse.package_path(tmp_path, "linux-64", "nccl", "2.30.7", "hnew_0"))
    old = write_conda(reuse.package_path(tmp_path, "linux-64", "nccl", "2.30.7", "hold_0"))
    other = tmp_path / "noarch" / "repodata.json"
    other.parent.mkdir()
    other.write_text("{}")
    for pkg in (keep, old):
        reuse.write_stamp(pkg, "digest")
    removed = reuse.prune_channel(tmp_path, {keep}, "3.11", lambda _msg: None)
    assert removed == [old] and keep.exists() and not old.exists() and other.exists()
    assert reuse.stamp_path(keep).exists() and not reuse.stamp_path(old).exists()


def test_prune_keeps_the_packages_of_other_pythons(tmp_path):
    """A channel built for 3.11, then for 3.12, serves both: the second run prunes only its own."""
    ours_new = write_conda(reuse.package_path(tmp_path, "linux-64", "numpy", "2.4.1", "py312hnew_0"))
    ours_old = write_conda(reuse.package_path(tmp_path, "linux-64", "numpy", "2.4.1", "py312hold_0"))
    shared_new = write_conda(reuse.package_path(tmp_path, "noarch", "pip", "26.3", "pyhnew_0"))
    shared_old = write_conda(reuse.package_path(tmp_path, "noarch", "pip", "26.3", "pyhold_0"))
    theirs = [
        write_conda(reuse.package_path(tmp_path, "linux-64", "numpy", "2.4.1", "py311h845419f_0")),
        write_conda(reuse.package_path(tmp_path, "linux-64", "pytorch", "2.14.1", "cuda130_generic_py311_h90ee949_0")),
        write_conda(reuse.package_path(tmp_path, "linux-64", "python", "3.11.7", "h9770da4_0_cpython")),
        write_conda(reuse.package_path(tmp_path, "linux-64", "python_abi", "3.11", "8_cp311")),
    ]
    removed = reuse.prune_channel(tmp_path, {ours_new, shared_new}, "3.12", lambda _msg: None)
    assert sorted(removed) == sorted([ours_old, shared_old])
    assert ours_new.exists() and all(p.exists() for p in theirs)
    assert reuse.channel_pythons(tmp_path) == ["3.11"]


def test_prune_keeps_the_noarch_versions_of_other_pythons(tmp_path):
    """Requires-Python gives Python 3.10 networkx 3.4.2 and 3.11 on 3.6.1: both stay; a rebuild of 3.4.2 replaces its own."""
    ours = write_conda(reuse.package_path(tmp_path, "noarch", "networkx", "3.4.2", "pyhnew_0"))
    ours_old = write_conda(reuse.package_path(tmp_path, "noarch", "networkx", "3.4.2", "pyhold_0"))
    theirs = write_conda(reuse.package_path(tmp_path, "noarch", "networkx", "3.6.1", "pyhcc0d12b_0"))
    assert reuse.prune_channel(tmp_path, {ours}, "3.10", lambda _msg: None) == [ours_old]
    assert theirs.exists()


def test_prune_keeps_the_cpython_of_another_interpreter(tmp_path):
    """linux-aarch64's run builds cpython and python-gil 3.11.2 (Debian's CPython) beside linux-64's 3.11.7, both noarch
    and of Python 3.11: the linux-64 environments of 3.11 still need 3.11.7; a rebuild of 3.11.2 replaces its own."""
    for name in ("cpython", "python-gil"):
        linux = write_conda(reuse.package_path(tmp_path, "noarch", name, "3.11.7", "h177f0da_0"))
        old = write_conda(reuse.package_path(tmp_path, "noarch", name, "3.11.2", "hold_0"))
        arm = write_conda(reuse.package_path(tmp_path, "noarch", name, "3.11.2", "h2fcef64_0"))
        assert reuse.prune_channel(tmp_path, {arm}, "3.11", lambda _msg: None) == [old]
        assert linux.exists()


def test_prune_keeps_the_packages_of_other_platforms(tmp_path):
    """A linux-64 run and a linux-aarch64 run build libgcc each, into their own subdirs."""
    ours = write_conda(reuse.package_path(tmp_path, "linux-64", "libgcc", "12.2.0", "hnew_0"))
    arm = write_conda(reuse.package_path(tmp_path, "linux-aarch64", "libgcc", "12.2.0", "harm_0"))
    arm_sysroot = write_conda(reuse.package_path(tmp_path, "noarch", "sysroot_linux-aarch64", "2.36", "h1_0"))
    assert reuse.prune_channel(tmp_path, {ours}, "3.11", lambda _msg: None) == []
    assert arm.exists() and arm_sysroot.exists()


@pytest.mark.parametrize(("filename", "python"), [
    ("python-3.12.1-h1234567_0_cpython.conda", "3.12"),
    ("python_abi-3.10-8_cp310.conda", "3.10"),
    ("numpy-2.4.1-py311h845419f_0.conda", "3.11"),
    ("markupsafe-3.0.4-py314h3a93723_0.conda", "3.14"),
    ("pytorch-2.14.1-cuda130_generic_py312_h90ee949_0.conda", "3.12"),
    ("pip-26.3-pyhc1a33c8_0.conda", None),
    ("python-abi3-3.10-h9e828f6_3.conda", "3.10"),
    ("cpython-3.10.13-ha8f5241_0.conda", "3.10"),
    ("python-gil-3.12.1-h263048c_0.conda", "3.12"),
    ("_python_abi3_support-1.0-h4616a5c_3.conda", None),
    ("libgcc-12.2.0-h839968c_0.conda", None),
    ("cuda-version-13.0-hefd1383_0.conda", None),
])
def test_package_python_reads_the_file_name(filename, python):
    assert reuse.package_python(Path(filename)) == python


def test_channel_pythons_sorts_numerically(tmp_path):
    for version in ("3.9.18", "3.12.1", "3.10.13"):
        write_conda(reuse.package_path(tmp_path, "linux-64", "python", version, "h0_0_cpython"))
    assert reuse.channel_pythons(tmp_path) == ["3.9", "3.10", "3.12"]
