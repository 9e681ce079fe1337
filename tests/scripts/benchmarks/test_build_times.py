"""ssm-conda bench-build: bad input fails before any build starts (the benchmark itself is real builds)."""

import argparse
import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["cache", "--channel", "/no/such/channel"], "error: no such channel directory: /no/such/channel"),
        (["cache", "--channel", "conda-forge", "--python-b", "3"], "error: unknown Python version '3'"),
        (["archs", "--channel", "conda-forge", "--cuda", "11.8"], "error: unknown CUDA version '11.8'"),
        (["archs", "--channel", "conda-forge", "--arch", "sm_90"], "error: unknown architecture 'sm_90'"),
        (["generations", "--channel", "conda-forge", "--cuda", "12.9"],
         "error: --cuda 12.9: its variant file does not split by GPU generation"),
        (["generations", "--channel", "conda-forge", "--baseline-mb", "0"], "error: --baseline-mb 0.0: give the size"),
        (["cache", "--channel", "conda-forge", "--package", "flash-attn"], "error: ssm-conda bench-build: argument --package"),
        (["lineinfo", "--channel", "conda-forge", "--generation", "sm100"],
         "error: --generation 'sm100': accepted for CUDA 13.0: all, sm8x, sm90, sm10x, sm12x"),
    ],
)
def test_bad_input_exits_2_before_building(args, message):
    result = subprocess.run([sys.executable, "-m", "ssm_conda", "bench-build", *args],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith(message), result.stderr
    assert "==" not in result.stdout  # no build was started


def test_report_prints_every_ratio_and_writes_the_figures(tmp_path, capsys):
    import json

    from ssm_conda.benchmarks.build_times import Timing, report

    timings = [Timing("variant A", "3.11", "9.0", "cold", 356.0, 21_861_976, "0/4"),
               Timing("variant B", "3.12", "9.0", "warm", 42.4, 21_861_789, "3/4")]
    path = tmp_path / "figures.json"
    ratios = [("warm B / cold A", 42.4 / 356.0, "< 0.33")]
    report(timings, ratios, argparse.Namespace(json=False, json_file=str(path)))
    out = capsys.readouterr().out
    assert "warm B / cold A: 0.12 (target < 0.33)" in out
    assert any(line.split()[:2] == ["variant", "B"] and "3/4" in line for line in out.splitlines())
    figures = json.loads(path.read_text())
    assert figures["warm B / cold A"] == 42.4 / 356.0 and figures["builds"][1]["hits"] == "3/4"
    # --json: the same figures on stdout, and nothing else there
    report(timings, ratios, argparse.Namespace(json=True, json_file=None))
    assert json.loads(capsys.readouterr().out) == figures


def test_generations_compares_what_the_solver_picks_for_an_h100(monkeypatch, capsys, tmp_path):
    """Every generation built once (faked here: the builds are the benchmark), the H100's package
    found by solving the channel they were copied into, the figures against the baseline."""
    from types import SimpleNamespace

    from ssm_conda.benchmarks import build_times as bt

    sizes = {"all": 60e6, "sm8x": 20e6, "sm90": 9e6, "sm10x": 10e6, "sm12x": 10e6}
    built, asked = [], []

    def fake_build(name, args, python, arch, cache_dir, cache="off", keep=None):  # noqa: ANN001, ANN202
        built.append((arch, cache_dir, keep is not None))
        return bt.Timing(name, python, arch, cache, 100.0 if arch == "all" else 40.0, int(sizes[arch]), "-")

    def fake_solve(channels, specs, cuda=None, cuda_arch=None):  # noqa: ANN001, ANN202
        asked.append((specs, cuda, cuda_arch))
        return [SimpleNamespace(name=SimpleNamespace(normalized="causal-conv1d"),
                                build="cuda130_py311_torch214_sm90_h1234567_0")]

    monkeypatch.setattr(bt, "timed_build", fake_build)
    monkeypatch.setattr(bt, "solve_for_machine", fake_solve)
    monkeypatch.setattr(bt, "index_channel", lambda path: None)
    from ssm_conda.matrix import load_variant_files

    generations = next(f for f in load_variant_files() if f.cuda == "13.0").generations  # as run() reads them
    args = argparse.Namespace(cuda="13.0", python_a="3.11", package="causal-conv1d", channel="file:///standin",
                              generations=generations,
                              baseline_mb=184.0, json=False, json_file=str(tmp_path / "f.json"))
    bt.bench_generations(args)
    assert built == [(g, None, True) for g in ("all", "sm8x", "sm90", "sm10x", "sm12x")]  # no cache, all kept
    assert asked == [(["causal-conv1d"], "13.0", "9.0")]
    out = capsys.readouterr().out
    assert "H100 download (sm90, 9.0 MB) / 184.0 MB: 0.05" in out
    assert "all-architecture package (60.0 MB) / 184.0 MB: 0.33" in out
    assert "channel build time, every generation (4m20s) / all-architecture alone (1m40s): 2.60" in out
    assert "sm90: 9.0+PTX" in out


def test_lineinfo_builds_each_generation_without_and_with_line_tables(monkeypatch, capsys):
    from ssm_conda.benchmarks import build_times as bt

    built = []

    def fake_build(name, args, python, arch, cache_dir, cache="off", keep=None, line_info=False):  # noqa: ANN001, ANN202
        built.append((arch, line_info, cache_dir))
        return bt.Timing(name, python, arch, cache, 300.0 if line_info else 250.0, 30_000_000 if line_info else 10_000_000, "-")

    monkeypatch.setattr(bt, "timed_build", fake_build)
    args = argparse.Namespace(cuda="13.0", python_a="3.11", generation=None, json=False, json_file=None)
    bt.bench_lineinfo(args)
    assert built == [("sm90", False, None), ("sm90", True, None), ("all", False, None), ("all", True, None)]
    out = capsys.readouterr().out
    assert "sm90: package with / without line tables: 3.00" in out and "all: build time with / without: 1.20" in out
