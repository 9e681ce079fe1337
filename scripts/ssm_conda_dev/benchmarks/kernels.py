"""Benchmark the installed causal-conv1d and mamba-ssm kernels on Mamba-sized shapes (needs a CUDA GPU).

    ssm-conda-dev bench-kernels                          # every op of the packages installed (H200: causal-conv1d's
                                                     # about a minute, selective_scan's about half a minute more)
    ssm-conda-dev bench-kernels --ops fwd,update --dtypes bf16 --json-file bench.json --plot bench.png
    ssm-conda-dev bench-kernels --ops scan_fwd,scan_bwd  # mamba-ssm's selective_scan only

For causal-conv1d's forward, backward and update (width 4, bf16/fp16, channel-first and
channel-last; causal_conv1d_ops.py) and mamba-ssm's selective_scan forward and backward (d_state 16,
bf16/fp16; selective_scan_ops.py) it reports the median time (CUDA events, after warmup), the
achieved memory bandwidth (the bytes the op must read and write, over its time), that bandwidth as
a fraction of a device-to-device copy of the same bytes measured in the same run, and the speed-up
over upstream's pure-torch reference. Small cases fit in L2, so their bandwidth can exceed the copy's.
Without --ops, a package that is not installed is skipped with one line; named in --ops, it is an error.
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
from xml.sax.saxutils import escape

from ssm_conda.console import PipelineError, UsageError, format_table

from ssm_conda_dev.benchmarks import causal_conv1d_ops, selective_scan_ops
from ssm_conda_dev.benchmarks.kernel_cases import DTYPES, Case

PACKAGES = (causal_conv1d_ops, selective_scan_ops)
OPS = tuple(op for package in PACKAGES for op in package.OPS)
LAYOUTS = causal_conv1d_ops.LAYOUTS


def package_of(op: str) -> ModuleType:
    return next(package for package in PACKAGES if op in package.OPS)


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
            **asdict(self.case), "label": self.case.label, "package": package_of(self.case.op).DISPLAY,
            "bytes": self.bytes_moved, "kernel_ms": self.kernel_ms, "copy_ms": self.copy_ms, "ref_ms": self.ref_ms,
            "bandwidth_gbs": self.bandwidth_gbs, "copy_bandwidth_gbs": self.copy_bandwidth_gbs,
            "fraction_of_copy": self.of_copy, "speedup_vs_ref": self.speedup,
        }


def bytes_moved(case: Case) -> int:
    """Minimum bytes the case's op reads plus writes (its package's formula)."""
    return package_of(case.op).bytes_moved(case)


def default_cases(ops: Sequence[str], dtypes: Sequence[str], layouts: Sequence[str]) -> list[Case]:
    """The cases of ops, package by package in PACKAGES' order."""
    return [case for package in PACKAGES for case in package.default_cases(ops, dtypes, layouts)]


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
    """What the benchmark runs on: torch and the GPU's name."""

    torch: ModuleType
    name: str
    capability: str  # "9.0"
    kind: str = "cuda"  # a torch device type; tests use "cpu" with CPU stand-ins of the extensions


def open_device() -> Device:
    """torch and the GPU, or a PipelineError saying in one line what is missing."""
    try:
        import torch
    except ImportError:
        raise PipelineError("bench-kernels needs torch and a CUDA GPU: torch is not installed in this Python") from None
    if torch.version.cuda is None:
        raise PipelineError(f"bench-kernels needs a CUDA GPU: torch {torch.__version__} is not a CUDA build")
    if not torch.cuda.is_available():
        raise PipelineError(f"bench-kernels needs a CUDA GPU: torch {torch.__version__} (CUDA {torch.version.cuda}) sees none")
    major, minor = torch.cuda.get_device_capability(0)
    return Device(torch, torch.cuda.get_device_name(0), f"{major}.{minor}")


def open_interfaces(ops: Sequence[str], named: bool, say: Callable[[str], None]) -> dict[str, ModuleType]:
    """{package's import name: its interface} for the packages of ops.

    A package that does not import is an error when its ops were named (--ops); otherwise it is
    skipped with one line, and an error only when no package is left.
    """
    interfaces, missing = {}, []
    for package in PACKAGES:
        wanted = [op for op in ops if op in package.OPS]
        if not wanted:
            continue
        try:
            interfaces[package.PACKAGE] = package.import_interface()
        except Exception as exc:  # an ImportError, or whatever a broken install raises on import: one line
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            if not isinstance(exc, ImportError):
                reason = f"{type(exc).__name__}: {reason}"
            if named:
                raise PipelineError(f"bench-kernels needs the {package.PACKAGE} package installed for "
                                    f"{', '.join(wanted)}: {reason}") from None
            missing.append((package, wanted, reason))
    if not interfaces:
        raise PipelineError("bench-kernels needs " + " or ".join(f"the {p.PACKAGE} package installed ({r})"
                                                                  for p, _, r in missing))
    for package, wanted, reason in missing:
        say(f"skipping {', '.join(wanted)}: {package.PACKAGE} is not installed ({reason})")
    return interfaces


def version_of(package: str) -> str | None:
    return getattr(sys.modules.get(package), "__version__", None)


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


def measure(device: Device, iface: ModuleType, case: Case, repeats: int, with_ref: bool) -> Result:
    """The case's kernel, a copy of as many bytes as it moves, and (with_ref) upstream's reference, timed."""
    package = package_of(case.op)
    run, ref = package.calls(device.torch, iface, case, device.kind)
    kernel_ms = time_ms(device, run, repeats)
    moved = bytes_moved(case)
    src = device.torch.empty(moved // 2, device=device.kind, dtype=device.torch.uint8)
    dst = device.torch.empty_like(src)
    copy_ms = time_ms(device, lambda d=dst, s=src: d.copy_(s), repeats)
    del src, dst
    ref_repeats = package.REF_REPEATS or max(3, repeats // 3)
    ref_ms = time_ms(device, ref, ref_repeats, warmup=package.REF_WARMUP) if with_ref else None
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


COLORS = {"fwd": "#1f77b4", "bwd": "#ff7f0e", "update": "#2ca02c", "scan_fwd": "#9467bd", "scan_bwd": "#d62728"}


def plot_svg(results: Sequence[Result], path: Path, title: str) -> None:
    """Each case's bandwidth as a fraction of the device copy's, one bar each, the copy's level dashed: an SVG written
    with the standard library alone (a GPU node with pip's torch has no matplotlib)."""
    height, bar, top = 300, 14, max([1.0, *(r.of_copy for r in results)])
    copy_y = 40 + height - height / top  # where a bar as fast as the copy ends
    shapes = [f'<text x="10" y="20" font-size="14">{escape(title)}: bandwidth as a fraction of a device copy</text>',
              f'<text x="5" y="{copy_y + 5:.1f}" font-size="9">copy</text>',
              f'<line x1="60" y1="{copy_y:.1f}" x2="{70 + bar * len(results)}" y2="{copy_y:.1f}" stroke="black" '
              'stroke-dasharray="4"/>']
    for i, r in enumerate(results):
        x, h, label = 65 + i * bar, height * r.of_copy / top, escape(r.case.label)
        shapes += [f'<rect x="{x}" y="{40 + height - h:.1f}" width="{bar - 2}" height="{h:.1f}" fill="{COLORS[r.case.op]}">'
                   f'<title>{label}: {r.of_copy:.0%} of copy</title></rect>',
                   f'<text transform="translate({x + 9},{48 + height}) rotate(75)" font-size="8">{label}</text>']
    path.write_text(f'<svg xmlns="http://www.w3.org/2000/svg" width="{100 + bar * len(results)}" height="{height + 260}">'
                    + "".join(shapes) + "</svg>\n")


def plot(results: Sequence[Result], path: Path, title: str) -> None:
    if path.suffix == ".svg":
        plot_svg(results, path, title)
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r.case.label for r in results]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(8, 0.35 * len(results) + 3), 8), sharex=True)
    xs = range(len(results))
    ax1.bar(xs, [r.bandwidth_gbs for r in results], color=[COLORS[r.case.op] for r in results])
    ax1.plot(xs, [r.copy_bandwidth_gbs for r in results], "k_", markersize=14, label="D2D copy, same bytes")
    ax1.set_ylabel("achieved GB/s")
    ax1.legend()
    ax1.set_title(title)
    ax2.bar(xs, [r.speedup or 0 for r in results], color=[COLORS[r.case.op] for r in results])
    ax2.set_yscale("log")
    ax2.set_ylabel("speed-up vs reference")
    ax2.set_xticks(list(xs), labels, rotation=75, ha="right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ops", help=f"comma-separated, from {', '.join(OPS)} (default: those of the packages installed)")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help=f"comma-separated, from {', '.join(DTYPES)}")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help=f"for fwd/bwd, from {', '.join(LAYOUTS)}")
    parser.add_argument("--repeats", type=int, default=15, help="timed samples per measurement (median taken)")
    parser.add_argument("--no-ref", action="store_true", help="skip timing the reference implementation")
    parser.add_argument("--json", action="store_true", help="print the results as JSON on stdout instead of the table")
    parser.add_argument("--json-file", type=Path, metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument("--plot", type=Path, metavar="PATH", help="write a plot: PATH.svg with the standard library, "
                        "any other (PNG) with matplotlib")


def run(args: argparse.Namespace) -> int:
    ops = parse_list(args.ops, OPS, "op") if args.ops is not None else list(OPS)
    dtypes = parse_list(args.dtypes, list(DTYPES), "dtype")
    layouts = parse_list(args.layouts, LAYOUTS, "layout")
    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    if args.plot is not None and args.plot.suffix != ".svg":
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("--plot needs matplotlib, which is not installed (pip install matplotlib)") from None

    say = functools.partial(print, file=sys.stderr if args.json else sys.stdout, flush=True)
    device = open_device()
    interfaces = open_interfaces(ops, named=args.ops is not None, say=say)
    used = [package for package in PACKAGES if package.PACKAGE in interfaces]
    versions = {package.PACKAGE: version_of(package.PACKAGE) for package in used}
    say(f"{device.name} (compute capability {device.capability}), torch {device.torch.__version__}, "
        + ", ".join(f"{p.PACKAGE} {versions[p.PACKAGE] or '?'} ({p.DESCRIBE})" for p in used))
    cases = default_cases([op for op in ops if package_of(op) in used], dtypes, layouts)
    results = []
    for number, case in enumerate(cases, 1):
        result = measure(device, interfaces[package_of(case.op).PACKAGE], case, args.repeats, with_ref=not args.no_ref)
        results.append(result)
        say(f"  [{number}/{len(cases)}] {case.label}: {result.kernel_ms * 1e3:.1f} us")
        if device.kind == "cuda":
            device.torch.cuda.empty_cache()
    figures = json.dumps({
        "device": device.name, "compute_capability": device.capability, "torch": device.torch.__version__,
        "packages": versions, "skipped_ops": [op for op in ops if package_of(op) not in used],
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
        plot(results, args.plot, f"{' and '.join(p.DISPLAY for p in used)} kernels on {device.name}")
        say(f"wrote {args.plot}")
    return 0
