"""scripts/bench.py without a GPU: a one-line error and a non-zero exit; its pure parts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scripts import bench

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
    return subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "bench.py"), *args],
                          capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)


@pytest.mark.skipif(_has_cuda(), reason="this machine has a CUDA GPU")
def test_no_gpu_is_one_clear_line(tmp_path):
    result = run_bench("--json", str(tmp_path / "b.json"))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: bench.py needs")
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
