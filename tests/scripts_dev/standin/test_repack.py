"""Building the channel: a real (tiny) rattler-build build, its progress lines, reuse, failure."""

from __future__ import annotations

import shutil

import pytest
from ssm_conda.console import PipelineError
from ssm_conda_dev.standin import packages, repack, reuse
from ssm_conda_dev.standin.packages import StandIn

from tests.scripts_dev.standin.test_reuse import write_conda

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


def test_libtorch_is_built_once_for_every_python(tmp_path, monkeypatch):
    """libtorch holds no Python: a run for 3.12 (its torch wheel another) reuses the one built from 3.11's
    wheel, and a run for 3.11 again keeps it: neither the digest nor the build string's hash sees the wheel."""
    from tests.scripts_dev.standin.conftest import machine

    built = []

    def fake_build(rendered, _channel, _tool, path, _log):  # the real one unpacks torch's wheel (hundreds of MB)
        built.append((rendered.recipe.about.summary, path))
        write_conda(path)

    monkeypatch.setattr(repack, "build_one", fake_build)
    channel, results = tmp_path / "channel", []
    for py_ver in ("3.11", "3.12", "3.11"):
        libtorch = packages.torch_standins(machine(tmp_path / f"wheels-{py_ver}", py_ver))[:1]
        results += [o.result for o in repack.build_channel(libtorch, py_ver, channel, 1, lambda _msg: None)]
    assert results == ["built", "reused", "reused"]
    [(summary, path)] = built
    assert "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl" in summary and path.parent == channel / "linux-64"
    assert list(channel.glob("*/libtorch-*.conda")) == [path] and reuse.stamp_path(path).is_file()


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
