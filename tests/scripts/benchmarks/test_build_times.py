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
