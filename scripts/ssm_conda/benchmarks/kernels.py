"""Benchmark the installed causal-conv1d kernels on Mamba-sized shapes (needs a CUDA GPU).

    ssm-conda bench-kernels                          # default set, about a minute on an H200
    ssm-conda bench-kernels --ops fwd,update --dtypes bf16 --json-file bench.json --plot bench.png

For forward, backward and update (width 4, bf16/fp16, channel-first and channel-last) it reports
the median time (CUDA events, after warmup), the achieved memory bandwidth (the bytes the op must
read and write, over its time), that bandwidth as a fraction of a device-to-device copy of the
same bytes measured in the same run, and the speed-up over upstream's pure-torch reference.
Small cases fit in L2, so their bandwidth can exceed the copy's.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

from ssm_conda.console import PipelineError, UsageError, format_table

WIDTH = 4
DTYPES = {"bf16": "bfloat16", "fp16": "float16"}
OPS = ("fwd", "bwd", "update")
LAYOUTS = ("channel_first", "channel_last")
# (batch, dim, seqlen): prefill/training shapes of Mamba models (d_inner 2048-8192).
SEQ_SHAPES = [(1, 2048, 2048), (4, 4096, 2048), (8, 4096, 4096), (2, 8192, 8192)]
# (batch, dim, seqlen): decoding, one token (or a few, speculative) per step.
UPDATE_SHAPES = [(1, 2048, 1), (8, 4096, 1), (8, 8192, 1), (8, 8192, 4)]


@dataclass
class Case:
    op: str
    dtype: str  # "bf16" / "fp16"
    layout: str
    batch: int
    dim: int
    seqlen: int

    @property
    def label(self) -> str:
        layout = "" if self.op == "update" else (" cl" if self.layout == "channel_last" else " cf")
        return f"{self.op} {self.dtype}{layout} {self.batch}x{self.dim}x{self.seqlen}"


@dataclass
class Result:
    case: Case
    bytes_moved: int
    kernel_ms: float
    copy_ms: float
    ref_ms: float | None

    @property
    def bandwidth_gbs(self) -> float:
        return self.bytes_moved / (self.kernel_ms * 1e-3) / 1e9

    @property
    def copy_bandwidth_gbs(self) -> float:
        return self.bytes_moved / (self.copy_ms * 1e-3) / 1e9

    @property
    def of_copy(self) -> float:
        return self.copy_ms / self.kernel_ms

    @property
    def speedup(self) -> float | None:
        return None if self.ref_ms is None else self.ref_ms / self.kernel_ms

    def to_dict(self) -> dict:
        return {
            **asdict(self.case), "label": self.case.label, "width": WIDTH, "bytes": self.bytes_moved,
            "kernel_ms": self.kernel_ms, "copy_ms": self.copy_ms, "ref_ms": self.ref_ms,
            "bandwidth_gbs": self.bandwidth_gbs, "copy_bandwidth_gbs": self.copy_bandwidth_gbs,
            "fraction_of_copy": self.of_copy, "speedup_vs_ref": self.speedup,
        }


def bytes_moved(case: Case) -> int:
    """Minimum bytes an op reads plus writes (activations in the dtype, weight and bias fp32)."""
    elem = 2  # bf16 and fp16
    act = case.batch * case.dim * case.seqlen * elem
    params = case.dim * (WIDTH + 1) * 4
    if case.op == "fwd":
        return 2 * act + params  # x in, out
    if case.op == "bwd":
        return 3 * act + 2 * params  # x and dout in, dx out; weight/bias in, their grads out
    state = case.batch * case.dim * (WIDTH - 1) * elem
    return 2 * act + 2 * state + params  # x in, out; conv_state read and written


def default_cases(ops: Sequence[str], dtypes: Sequence[str], layouts: Sequence[str]) -> list[Case]:
    cases = []
    for op in ops:
        for dtype in dtypes:
            if op == "update":
                cases += [Case(op, dtype, "channel_last", b, d, s) for b, d, s in UPDATE_SHAPES]
            else:
                cases += [Case(op, dtype, layout, b, d, s) for layout in layouts for b, d, s in SEQ_SHAPES]
    return cases


def parse_list(value: str, accepted: Sequence[str], what: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    for item in items:
        if item not in accepted:
            raise UsageError(f"unknown {what} {item!r}; accepted: {', '.join(accepted)}")
    if not items:
        raise UsageError(f"--{what}s is empty; accepted: {', '.join(accepted)}")
    return items


# ---------------------------------------------------------------------------------------------
# Measuring (torch and the package are imported only here)


@dataclass
class Device:
    """What the benchmark runs on: torch, the package's interface, and the GPU's name."""

    torch: ModuleType
    iface: ModuleType
    name: str
    capability: str  # "9.0"
    kind: str = "cuda"  # a torch device type; tests use "cpu" with a CPU stand-in of the extension


def open_device() -> Device:
    """torch, the installed package and the GPU, or a PipelineError saying in one line what is missing."""
    try:
        import torch
    except ImportError:
        raise PipelineError("bench-kernels needs torch and a CUDA GPU: torch is not installed in this Python") from None
    if torch.version.cuda is None:
        raise PipelineError(f"bench-kernels needs a CUDA GPU: torch {torch.__version__} is not a CUDA build")
    if not torch.cuda.is_available():
        raise PipelineError(f"bench-kernels needs a CUDA GPU: torch {torch.__version__} (CUDA {torch.version.cuda}) sees none")
    try:
        from causal_conv1d import causal_conv1d_interface
    except ImportError as exc:
        raise PipelineError(f"bench-kernels needs the causal_conv1d package installed: {exc}") from None
    major, minor = torch.cuda.get_device_capability(0)
    return Device(torch, causal_conv1d_interface, torch.cuda.get_device_name(0), f"{major}.{minor}")


def time_ms(device: Device, fn: Callable[[], object], repeats: int, warmup: int = 5) -> float:
    """Median milliseconds per call: CUDA events around batches of calls sized to about 1 ms."""
    torch = device.torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    stop.record()
    torch.cuda.synchronize()
    inner = max(1, min(1000, math.ceil(1.0 / max(start.elapsed_time(stop), 1e-3))))
    samples = []
    for _ in range(repeats):
        start.record()
        for _ in range(inner):
            fn()
        stop.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(stop) / inner)
    return statistics.median(samples)


def measure(device: Device, case: Case, repeats: int, with_ref: bool) -> Result:
    torch, iface, dev = device.torch, device.iface, device.kind
    dtype = getattr(torch, DTYPES[case.dtype])
    weight = torch.randn(case.dim, WIDTH, device=dev, dtype=torch.float32)
    bias = torch.randn(case.dim, device=dev, dtype=torch.float32)
    if case.op == "update":
        x = torch.randn(case.batch, case.seqlen, case.dim, device=dev, dtype=dtype).transpose(1, 2)
        state = torch.randn(case.batch, WIDTH - 1, case.dim, device=dev, dtype=dtype).transpose(1, 2)
        state_ref = state.clone()
        run = lambda: iface.causal_conv1d_update(x, state, weight, bias, activation="silu")  # noqa: E731
        ref = lambda: iface.causal_conv1d_update_ref(x, state_ref, weight, bias, activation="silu")  # noqa: E731
    else:
        if case.layout == "channel_last":
            x = torch.randn(case.batch, case.seqlen, case.dim, device=dev, dtype=dtype).transpose(1, 2)
        else:
            x = torch.randn(case.batch, case.dim, case.seqlen, device=dev, dtype=dtype)
        if case.op == "fwd":
            run = lambda: iface.causal_conv1d_fn(x, weight, bias, activation="silu")  # noqa: E731
            ref = lambda: iface.causal_conv1d_ref(x, weight, bias, activation="silu")  # noqa: E731
        else:
            inputs = (x.requires_grad_(), weight.requires_grad_(), bias.requires_grad_())
            out = iface.causal_conv1d_fn(*inputs, activation="silu")
            grad = torch.randn_like(out)
            run = lambda: torch.autograd.grad(out, inputs, grad, retain_graph=True)  # noqa: E731
            out_ref = iface.causal_conv1d_ref(*inputs, activation="silu") if with_ref else None
            ref = lambda: torch.autograd.grad(out_ref, inputs, grad, retain_graph=True)  # noqa: E731
    kernel_ms = time_ms(device, run, repeats)
    moved = bytes_moved(case)
    src = torch.empty(moved // 2, device=dev, dtype=torch.uint8)
    dst = torch.empty_like(src)
    copy_ms = time_ms(device, lambda d=dst, s=src: d.copy_(s), repeats)
    ref_ms = time_ms(device, ref, max(3, repeats // 3)) if with_ref else None
    del src, dst
    return Result(case, moved, kernel_ms, copy_ms, ref_ms)


# ---------------------------------------------------------------------------------------------
# Reporting


def table(results: Sequence[Result]) -> str:
    rows = [
        [r.case.label, f"{r.kernel_ms * 1e3:.1f}", f"{r.bytes_moved / 1e6:.1f}", f"{r.bandwidth_gbs:.0f}",
         f"{r.copy_bandwidth_gbs:.0f}", f"{r.of_copy:.0%}", "-" if r.speedup is None else f"{r.speedup:.1f}x"]
        for r in results
    ]
    return format_table(["case (op dtype layout BxDxL)", "time us", "MB moved", "GB/s", "copy GB/s",
                         "of copy", "vs ref"], rows)


def plot(results: Sequence[Result], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r.case.label for r in results]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(8, 0.35 * len(results) + 3), 8), sharex=True)
    xs = range(len(results))
    colors = {"fwd": "tab:blue", "bwd": "tab:orange", "update": "tab:green"}
    ax1.bar(xs, [r.bandwidth_gbs for r in results], color=[colors[r.case.op] for r in results])
    ax1.plot(xs, [r.copy_bandwidth_gbs for r in results], "k_", markersize=14, label="D2D copy, same bytes")
    ax1.set_ylabel("achieved GB/s")
    ax1.legend()
    ax1.set_title(title)
    ax2.bar(xs, [r.speedup or 0 for r in results], color=[colors[r.case.op] for r in results])
    ax2.set_yscale("log")
    ax2.set_ylabel("speed-up vs reference")
    ax2.set_xticks(list(xs), labels, rotation=75, ha="right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ops", default=",".join(OPS), help=f"comma-separated, from {', '.join(OPS)}")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help=f"comma-separated, from {', '.join(DTYPES)}")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help=f"for fwd/bwd, from {', '.join(LAYOUTS)}")
    parser.add_argument("--repeats", type=int, default=15, help="timed samples per measurement (median taken)")
    parser.add_argument("--no-ref", action="store_true", help="skip timing the reference implementation")
    parser.add_argument("--json", action="store_true", help="print the results as JSON on stdout instead of the table")
    parser.add_argument("--json-file", type=Path, metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument("--plot", type=Path, metavar="PATH", help="write a PNG plot (needs matplotlib)")


def run(args: argparse.Namespace) -> int:
    ops = parse_list(args.ops, OPS, "op")
    dtypes = parse_list(args.dtypes, list(DTYPES), "dtype")
    layouts = parse_list(args.layouts, LAYOUTS, "layout")
    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("--plot needs matplotlib, which is not installed (pip install matplotlib)") from None

    say = functools.partial(print, file=sys.stderr if args.json else sys.stdout, flush=True)
    device = open_device()
    say(f"{device.name} (compute capability {device.capability}), torch {device.torch.__version__}, width {WIDTH}")
    cases = default_cases(ops, dtypes, layouts)
    results = []
    for number, case in enumerate(cases, 1):
        result = measure(device, case, args.repeats, with_ref=not args.no_ref)
        results.append(result)
        say(f"  [{number}/{len(cases)}] {case.label}: {result.kernel_ms * 1e3:.1f} us")
        if device.kind == "cuda":
            device.torch.cuda.empty_cache()
    figures = json.dumps({
        "device": device.name, "compute_capability": device.capability, "torch": device.torch.__version__,
        "results": [r.to_dict() for r in results],
    }, indent=2)
    if args.json:
        print(figures)
    else:
        print()
        print(table(results))
    if args.json_file is not None:
        args.json_file.parent.mkdir(parents=True, exist_ok=True)
        args.json_file.write_text(figures + "\n")
        say(f"wrote {args.json_file}")
    if args.plot is not None:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        plot(results, args.plot, f"causal-conv1d on {device.name}")
        say(f"wrote {args.plot}")
    return 0
