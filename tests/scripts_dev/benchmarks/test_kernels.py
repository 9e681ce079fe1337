"""ssm-conda-dev bench-kernels without a GPU: a one-line error and a non-zero exit; its pure parts; whole runs on the
CPU stand-ins of the extensions (tests/recipe/causal_conv1d/cpu_kernel, tests/recipe/mamba_ssm/cpu_kernel), where
only the CUDA-event timer is swapped out."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ssm_conda_dev import cli
from ssm_conda_dev.benchmarks import causal_conv1d_ops, selective_scan_ops
from ssm_conda_dev.benchmarks import kernels as bench

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
    return subprocess.run([sys.executable, "-m", "ssm_conda_dev", "bench-kernels", *args],
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
    assert result.stderr.strip() == "error: unknown op 'sideways'; accepted: fwd, bwd, update, scan_fwd, scan_bwd"
    assert run_bench("--repeats", "0").returncode == 2


def test_default_cases_and_byte_model():
    cases = bench.default_cases(bench.OPS, list(bench.DTYPES), bench.LAYOUTS)
    conv = [c for c in cases if c.op in causal_conv1d_ops.OPS]
    # fwd and bwd: 4 shapes x 2 dtypes x 2 layouts each; update: 4 shapes x 2 dtypes.
    assert len(conv) == 16 + 16 + 8
    assert all(c.batch <= 8 and 2048 <= c.dim <= 8192 and 1 <= c.seqlen <= 8192 and c.width == 4 for c in conv)
    # scan_fwd and scan_bwd: 4 shapes x 2 dtypes each, after causal-conv1d's.
    scan = cases[len(conv):]
    assert [c.op for c in scan] == ["scan_fwd"] * 8 + ["scan_bwd"] * 8
    assert all(c.batch <= 8 and 1536 <= c.dim <= 5120 and 512 <= c.seqlen <= 4096 and c.d_state == 16 for c in scan)
    assert all(c.layout is None and c.width is None for c in scan)
    assert bench.default_cases(["scan_bwd", "update"], ["fp16"], bench.LAYOUTS)[0].op == "update"
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


def test_scan_byte_model():
    """The formula, term by term; the tensors' own sizes are checked in test_scan_bytes_are_the_tensors."""
    case = bench.Case("scan_fwd", "fp16", None, 2, 1536, 1024, d_state=16)
    act, bc, params = 2 * 1536 * 1024 * 2, 2 * 16 * 1024 * 2, (1536 * 16 + 2 * 1536) * 4
    assert bench.bytes_moved(case) == 4 * act + 2 * bc + params
    case.op = "scan_bwd"
    assert bench.bytes_moved(case) == 7 * act + 4 * bc + 2 * params
    assert case.label == "scan_bwd fp16 2x1536x1024"


def wall_ms(device, fn, repeats, warmup=1):
    """time_ms's stand-in: a wall clock (the CPU runs synchronously), one call to warm up."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def stand_in_device(monkeypatch, paths):
    """bench-kernels' Device on CPU stand-in extensions (paths first on sys.path), a wall clock for CUDA events."""
    for path in reversed(paths):
        monkeypatch.syspath_prepend(str(path))
    import torch

    device = bench.Device(torch, "CPU stand-in", "0.0", kind="cpu")
    monkeypatch.setattr(bench, "open_device", lambda: device)
    monkeypatch.setattr(bench, "time_ms", wall_ms)
    monkeypatch.setattr(causal_conv1d_ops, "SEQ_SHAPES", [(2, 64, 128)])
    monkeypatch.setattr(causal_conv1d_ops, "UPDATE_SHAPES", [(2, 64, 1), (2, 64, 3)])
    monkeypatch.setattr(selective_scan_ops, "SHAPES", [(2, 8, 40)])
    return device


@pytest.fixture
def cpu_device(monkeypatch, cpu_causal_conv1d):
    """causal-conv1d's stand-in only: mamba_ssm cannot be imported (even if an earlier test imported it)."""
    for name in ["mamba_ssm", *(n for n in sys.modules if n.startswith("mamba_ssm."))]:
        monkeypatch.setitem(sys.modules, name, None)
    return stand_in_device(monkeypatch, cpu_causal_conv1d)


@pytest.fixture
def cpu_scan_device(monkeypatch, cpu_mamba_ssm):
    """mamba-ssm's stand-in under upstream's mamba_ssm, and causal-conv1d's."""
    return stand_in_device(monkeypatch, cpu_mamba_ssm)


def test_whole_run_on_the_cpu_stand_in(cpu_device, tmp_path, capsys):
    """Every op through upstream's interface, then table, JSON and plot (the CUDA timer swapped out)."""
    argv = ["bench-kernels", "--repeats", "2", "--json-file", str(tmp_path / "b.json"), "--plot", str(tmp_path / "b.png")]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "CPU stand-in (compute capability 0.0)" in out
    assert "[12/12] update fp16 2x64x3" in out
    # Without --ops, the package that is missing is one line, not an error.
    (skipped,) = [line for line in out.splitlines() if "scan" in line]
    assert skipped.startswith("skipping scan_fwd, scan_bwd: mamba_ssm is not installed (")
    data = json.loads((tmp_path / "b.json").read_text())
    assert data["device"] == "CPU stand-in"
    assert data["skipped_ops"] == ["scan_fwd", "scan_bwd"] and list(data["packages"]) == ["causal_conv1d"]
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


def test_named_scan_ops_without_mamba_ssm_are_an_error(cpu_device, tmp_path, capsys):
    assert cli.main(["bench-kernels", "--ops", "fwd,scan_bwd", "--json-file", str(tmp_path / "b.json")]) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: bench-kernels needs the mamba_ssm package installed for "
                                                   "scan_bwd: "), captured.err
    assert not (tmp_path / "b.json").exists()


def test_whole_run_with_the_scan_on_the_cpu_stand_ins(cpu_scan_device, tmp_path, capsys, monkeypatch):
    """Both packages' ops through upstream's interfaces (selective_scan_fn against selective_scan_ref): table, JSON, and
    the SVG plot, which needs no matplotlib (a GPU node with pip's torch has none)."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    argv = ["bench-kernels", "--dtypes", "bf16", "--layouts", "channel_last", "--repeats", "2",
            "--json-file", str(tmp_path / "b.json"), "--plot", str(tmp_path / "b.svg")]
    assert cli.main(argv) == 0
    bars = ET.parse(tmp_path / "b.svg").getroot().findall("{http://www.w3.org/2000/svg}rect")
    assert [b.find("{http://www.w3.org/2000/svg}title").text.split(":")[0] for b in bars] == [
        "fwd bf16 cl 2x64x128", "bwd bf16 cl 2x64x128", "update bf16 2x64x1", "update bf16 2x64x3", "scan_fwd bf16 2x8x40",
        "scan_bwd bf16 2x8x40"]
    out = capsys.readouterr().out
    assert "mamba_ssm 2.3.2.post1 (selective_scan d_state 16)" in out.splitlines()[0]
    assert "skipping" not in out
    assert "[6/6] scan_bwd bf16 2x8x40" in out
    data = json.loads((tmp_path / "b.json").read_text())
    assert data["skipped_ops"] == [] and list(data["packages"]) == ["causal_conv1d", "mamba_ssm"]
    results = data["results"]
    assert [r["op"] for r in results] == ["fwd", "bwd", "update", "update", "scan_fwd", "scan_bwd"]
    for r in results[4:]:
        assert r["package"] == "mamba-ssm" and r["d_state"] == 16 and r["layout"] is None
        assert r["kernel_ms"] > 0 and r["copy_ms"] > 0 and r["ref_ms"] > 0
        assert r["bytes"] == bench.bytes_moved(bench.Case(r["op"], "bf16", None, 2, 8, 40, d_state=16))
        assert r["bandwidth_gbs"] == pytest.approx(r["bytes"] / (r["kernel_ms"] * 1e-3) / 1e9)
        assert r["fraction_of_copy"] == pytest.approx(r["copy_ms"] / r["kernel_ms"])
        assert r["speedup_vs_ref"] == pytest.approx(r["ref_ms"] / r["kernel_ms"])
        table_row = next(line for line in out.splitlines() if line.lstrip().startswith(r["label"]))
        assert f"{r['kernel_ms'] * 1e3:.1f}" in table_row and f"{r['bytes'] / 1e6:.1f}" in table_row


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_scan_bytes_are_the_tensors(cpu_scan_device, dtype):
    """bytes_moved is the size of what selective_scan_fn is given and returns: forward's inputs and out; backward's
    inputs, dout, and every input's gradient."""
    import torch
    from mamba_ssm.ops.selective_scan_interface import selective_scan_fn

    case = bench.Case("scan_fwd", dtype, None, 2, 8, 24, d_state=16)
    args = selective_scan_ops.inputs(torch, case, "cpu")
    assert set(args) == {"u", "delta", "A", "B", "C", "D", "z", "delta_bias"}
    leaves = [t.requires_grad_() for t in args.values()]
    out = selective_scan_fn(**args, delta_softplus=True)
    given = sum(t.nbytes for t in leaves)
    assert bench.bytes_moved(case) == given + out.nbytes
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, leaves, dout)
    assert [g.dtype for g in grads] == [t.dtype for t in leaves]
    case.op = "scan_bwd"
    assert bench.bytes_moved(case) == given + dout.nbytes + sum(g.nbytes for g in grads)
