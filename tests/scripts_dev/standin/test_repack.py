"""Building the channel: a real (tiny) rattler-build build, its progress lines, reuse, failure."""

from __future__ import annotations

import shutil

import pytest
from ssm_conda.console import PipelineError
from ssm_conda_dev.standin import packages, repack, reuse
from ssm_conda_dev.standin.packages import StandIn

PYTHON_ABI = [StandIn("python_abi", "python_abi.yaml", {"py_ver": "3.11"})]


def test_build_then_reuse_with_progress(tmp_path):
    channel, lines = tmp_path / "channel", []
    outcomes = repack.build_channel(PYTHON_ABI, "3.11", channel, 1, lines.append)
    package = channel / "noarch" / "python_abi-3.11-8_cp311.conda"
    assert [(o.package, o.variant, o.result) for o in outcomes] == [("python_abi 3.11", "8_cp311", "built")]
    assert outcomes[0].seconds is not None and outcomes[0].size == package.stat().st_size
    assert lines[0] == "[1/1] python_abi 3.11 8_cp311: building ..."
    assert lines[1].startswith("[1/1] python_abi 3.11 built in ") and lines[1].endswith(" KB)")
    assert reuse.stamp_path(package).is_file()
    assert not (channel / "bld").exists() and not (channel / "rattler-build-log.txt").exists()

    lines.clear()
    again = repack.build_channel(PYTHON_ABI, "3.11", channel, 1, lines.append)
    assert [o.result for o in again] == ["reused"] and again[0].seconds is None and lines == []
    repack.build_channel(PYTHON_ABI, "3.11", channel, 1, lines.append, verbose=True)
    assert lines == [f"[1/1] python_abi 3.11 reused ({outcomes[0].row()[4]})"]

    lines.clear()
    rebuilt = repack.build_channel(PYTHON_ABI, "3.11", channel, 1, lines.append, rebuild=frozenset({"python_abi"}))
    assert [o.result for o in rebuilt] == ["built"] and len(lines) == 2


def test_changed_recipe_is_rebuilt(tmp_path):
    channel = tmp_path / "channel"
    repack.build_channel(PYTHON_ABI, "3.11", channel, 1, lambda _msg: None)
    reuse.write_stamp(channel / "noarch" / "python_abi-3.11-8_cp311.conda", "an older recipe's digest")
    lines = []
    outcomes = repack.build_channel(PYTHON_ABI, "3.11", channel, 1, lines.append)
    assert [o.result for o in outcomes] == ["rebuilt"] and "(its recipe changed)" in lines[0]


def test_failed_build_is_one_line_with_the_log_kept(tmp_path, monkeypatch):
    recipes = tmp_path / "recipes"
    shutil.copytree(packages.RECIPES_DIR, recipes)
    template = (recipes / "python_abi.yaml").read_text()
    (recipes / "python_abi.yaml").write_text(template.replace(
        "build:\n", "build:\n  script: echo stand-in build broke on purpose; exit 3\n", 1))
    monkeypatch.setattr(packages, "RECIPES_DIR", recipes)
    channel = tmp_path / "channel"
    with pytest.raises(PipelineError, match=r"^building the python_abi-3.11-8_cp311 stand-in failed: .*\(log: ") as info:
        repack.build_channel(PYTHON_ABI, "3.11", channel, 1, lambda _msg: None)
    assert "\n" not in str(info.value)
    log = channel / repack.LOGS_DIR / "python_abi-3.11-8_cp311.log"
    assert "broke on purpose" in log.read_text()
    assert not list(channel.glob("*/*.conda")) and not (channel / "bld").exists()


def test_variant_overrides_tell_the_truth(fake_machine, tmp_path):
    assert repack.variant_overrides(fake_machine) == {
        "c_compiler_version": ["12"], "cxx_compiler_version": ["12"], "c_stdlib_version": ["2.36"]}
    for version in ("3.11.7", "3.12.1"):
        (tmp_path / "linux-64").mkdir(exist_ok=True)
        (tmp_path / "linux-64" / f"python-{version}-h0_0_cpython.conda").write_bytes(b"")
    text = repack.write_variants_file(tmp_path, fake_machine).read_text()
    assert "python 3.11, 3.12, pytorch 2.14.1" in text and "c_stdlib_version: ['2.36']" in text
