"""ssm-conda bench-kernels without a GPU: a one-line error and a non-zero exit; its pure parts; a whole run on the
CPU stand-in of the extension (tests/recipe/causal_conv1d/cpu_kernel), where only the CUDA-event timer is swapped out."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ssm_conda import cli
from ssm_conda.benchmarks import kernels as bench

REPO_ROOT = Path(__file__).resolve().parents[2]


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    try:
        return torch.cuda.is_available()
    except Exception:
        return False


def run_bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ssm_conda", "bench-kernels", *args],
                          capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)


@pytest.mark.skipif(_has_cuda(), reason="this machine has a CUDA GPU")
def test_no_gpu_is_one_clear_line(tmp_path):
    result = run_bench("--json-file", str(tmp_path / "b.json"))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: bench-kernels needs")
    assert "GPU" in lines[0] or "torch" in lines[0]
    assert result.stdout == ""
    assert not (tmp_path / "b.json").exists()


def test_bad_arguments_exit_2():
    result = run_bench("--ops", "fwd,sideways")
    assert result.returncode == 2
    assert result.stderr.strip() == "error: unknown op 'sideways'; accepted: fwd, bwd, update"
    assert run_bench("--repeats", "0").returncode == 2


def test_default_cases_and_byte_model():
    cases = bench.default_cases(bench.OPS, list(bench.DTYPES), bench.LAYOUTS)
    # fwd and bwd: 4 shapes x 2 dtypes x 2 layouts each; update: 4 shapes x 2 dtypes.
    assert len(cases) == 16 + 16 + 8
    assert all(c.batch <= 8 and 2048 <= c.dim <= 8192 and 1 <= c.seqlen <= 8192 for c in cases)
    fwd = bench.Case("fwd", "bf16", "channel_first", 2, 4096, 1024)
    act = 2 * 4096 * 1024 * 2
    params = 4096 * 5 * 4
    assert bench.bytes_moved(fwd) == 2 * act + params
    assert bench.bytes_moved(bench.Case("bwd", "bf16", "channel_last", 2, 4096, 1024)) == 3 * act + 2 * params
    upd = bench.Case("update", "fp16", "channel_last", 8, 2048, 1)
    assert bench.bytes_moved(upd) == 2 * (8 * 2048 * 2) + 2 * (8 * 2048 * 3 * 2) + 2048 * 5 * 4
    result = bench.Result(fwd, bytes_moved=10**9, kernel_ms=1.0, copy_ms=0.8, ref_ms=5.0)
    assert result.bandwidth_gbs == pytest.approx(1000)
    assert result.of_copy == pytest.approx(0.8)
    assert result.speedup == pytest.approx(5.0)
    assert "fwd bf16 cf 2x4096x1024" in bench.table([result])


@pytest.fixture
def cpu_device(monkeypatch, cpu_causal_conv1d):
    """bench-kernels' Device on the CPU stand-in extension, with a wall-clock timer for CUDA events."""
    for path in reversed(cpu_causal_conv1d):
        monkeypatch.syspath_prepend(str(path))
    import torch
    from causal_conv1d import causal_conv1d_interface

    def wall_ms(device, fn, repeats, warmup=1):
        fn()
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1e3)
        return statistics.median(samples)

    device = bench.Device(torch, causal_conv1d_interface, "CPU stand-in", "0.0", kind="cpu")
    monkeypatch.setattr(bench, "open_device", lambda: device)
    monkeypatch.setattr(bench, "time_ms", wall_ms)
    monkeypatch.setattr(bench, "SEQ_SHAPES", [(2, 64, 128)])
    monkeypatch.setattr(bench, "UPDATE_SHAPES", [(2, 64, 1), (2, 64, 3)])
    return device


def test_whole_run_on_the_cpu_stand_in(cpu_device, tmp_path, capsys):
    """Every op through upstream's interface, then table, JSON and plot (the CUDA timer swapped out)."""
    argv = ["bench-kernels", "--repeats", "2", "--json-file", str(tmp_path / "b.json"), "--plot", str(tmp_path / "b.png")]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "CPU stand-in (compute capability 0.0)" in out
    assert "[12/12] update fp16 2x64x3" in out
    data = json.loads((tmp_path / "b.json").read_text())
    assert data["device"] == "CPU stand-in"
    results = data["results"]
    assert [r["op"] for r in results] == ["fwd"] * 4 + ["bwd"] * 4 + ["update"] * 2 * 2
    for r in results:
        assert r["kernel_ms"] > 0 and r["copy_ms"] > 0 and r["ref_ms"] > 0
        assert r["bandwidth_gbs"] == pytest.approx(r["bytes"] / (r["kernel_ms"] * 1e-3) / 1e9)
        assert r["speedup_vs_ref"] == pytest.approx(r["ref_ms"] / r["kernel_ms"])
        assert r["label"] in out
    assert (tmp_path / "b.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_ref_leaves_the_speedup_out(cpu_device, tmp_path, capsys):
    assert cli.main(["bench-kernels", "--ops", "bwd", "--dtypes", "bf16", "--layouts", "channel_last", "--repeats", "1",
                       "--no-ref", "--json-file", str(tmp_path / "b.json")]) == 0
    (result,) = json.loads((tmp_path / "b.json").read_text())["results"]
    assert result["label"] == "bwd bf16 cl 2x64x128"
    assert result["ref_ms"] is None and result["speedup_vs_ref"] is None
    assert "bwd bf16 cl 2x64x128" in capsys.readouterr().out


def test_json_prints_only_json_on_stdout(cpu_device, capsys):
    assert cli.main(["bench-kernels", "--ops", "update", "--dtypes", "fp16", "--repeats", "1", "--no-ref", "--json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert [r["op"] for r in data["results"]] == ["update", "update"]
    assert "[2/2] update fp16" in captured.err
