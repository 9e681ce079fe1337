"""Debian's packages for the linux-aarch64 stand-in: versions, the private apt configuration, the
stand-ins made of them (the download and the build itself: test_cross_toolchain.py, --slow)."""

from __future__ import annotations

import pytest
from ssm_conda.console import UsageError
from ssm_conda_dev.standin import debian


@pytest.mark.parametrize(("debian_version", "upstream"), [
    ("2.36-8cross1", "2.36"), ("12.2.0-14cross1", "12.2.0"), ("1:10.0.2+ds-2+deb13u1~bpo12+1", "10.0.2"),
    ("6.1.4-1cross1", "6.1.4"), ("2.40-2", "2.40"),
])
def test_upstream_version(debian_version, upstream):
    assert debian.upstream_version(debian_version) == upstream


def test_apt_config_is_private(tmp_path):
    """apt reads and writes only below the given folder, never the machine's state."""
    config = debian.apt_config(tmp_path, "bookworm").read_text()
    for key in ("Dir::State", "Dir::Cache", "Dir::Etc::SourceList", "Dir::Etc::SourceParts", "Dir::State::status"):
        assert f'{key} "{tmp_path}' in config
    assert 'APT::Architectures { "amd64"; "arm64"; };' in config
    sources = (tmp_path / "etc" / "sources.list").read_text().splitlines()
    assert [line.split()[-2] for line in sources] == ["bookworm", "bookworm-backports"]


def test_offline_without_the_packages_is_one_line(tmp_path):
    with pytest.raises(UsageError, match=r"^no Debian package gcc-12-aarch64-linux-gnu in .*debs \(and --offline\)$"):
        debian.fetch(tmp_path, offline=True)


def test_cross_standins_follow_conda_forge_boundaries(fake_cross_standins):
    """The build machine runs the compilers (linux-64), the sysroot is noarch, the runtime is aarch64's;
    the compiler packages' run_exports name the target's runtime, as conda-forge's do."""
    standins = {s.key: s for s in fake_cross_standins}
    assert {key: s.platform for key, s in standins.items()} == {
        "sysroot_linux-aarch64": "linux-64", "gcc_impl_linux-aarch64": "linux-64", "gcc_linux-aarch64": "linux-64",
        "gxx_linux-aarch64": "linux-64", "libgcc-aarch64": "linux-aarch64", "libstdcxx-aarch64": "linux-aarch64",
        "python-aarch64": "linux-aarch64", "python_abi": "linux-64", "crossenv": "linux-64",  # these two: noarch
        "cpython-aarch64": "linux-64", "python-gil-aarch64": "linux-64",  # noarch too, of Debian's CPython
        "cross-python_linux-aarch64": "linux-64"}
    assert [(standins[k].conda_name, standins[k].context["version"]) for k in ("cpython-aarch64", "python-gil-aarch64")] == [
        ("cpython", standins["python-aarch64"].context["version"]), ("python-gil", standins["python-aarch64"].context["version"])]
    assert standins["gcc_linux-aarch64"].run_exports_strong == ["libgcc >=12"]
    assert standins["gxx_linux-aarch64"].run_exports_strong == ["libstdcxx >=12"]
    assert standins["gcc_linux-aarch64"].context["host"] == "aarch64-conda-linux-gnu"
    assert standins["sysroot_linux-aarch64"].context["deb_dirs"].split() == [f"/debs/{n}" for n in debian.SYSROOT]
    assert standins["cross-python_linux-aarch64"].context["sysconfigdata_name"] == "_sysconfigdata_aarch64_conda_linux_gnu"
    assert standins["python-aarch64"].context["py_ver"] == "3.11" and "/debs/python3.11_arm64" in \
        standins["python-aarch64"].context["deb_dirs"].split()
