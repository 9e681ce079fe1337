"""What one kernel-benchmark case is, shared by the runner (kernels.py) and the per-package case lists.

A package's module (causal_conv1d_ops.py, selective_scan_ops.py) provides:

    PACKAGE          the import name ("causal_conv1d"), DISPLAY its distribution name ("causal-conv1d")
    OPS              the ops it benchmarks, named uniquely across packages
    DESCRIBE         what the cases share, for the header line ("width 4")
    REF_WARMUP       warm-up calls before timing the reference (besides the one that sizes its batches)
    REF_REPEATS      timed samples of the reference (None: a third of --repeats, at least 3)
    default_cases(ops, dtypes, layouts) -> [Case]
    bytes_moved(case) -> int            the minimum bytes the op reads plus writes
    import_interface() -> module        upstream's Python interface; raises when the package is not usable
    calls(torch, iface, case, device) -> (run, ref)   zero-argument callables: the kernel, the reference
"""

from __future__ import annotations

from dataclasses import dataclass

DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


@dataclass
class Case:
    op: str
    dtype: str  # "bf16" / "fp16"
    layout: str | None  # causal-conv1d's fwd/bwd: "channel_first" / "channel_last"; None where there is no choice
    batch: int
    dim: int
    seqlen: int
    width: int | None = None  # causal-conv1d's filter width
    d_state: int | None = None  # selective_scan's state size

    @property
    def label(self) -> str:
        layout = {"channel_last": " cl", "channel_first": " cf"}.get(self.layout or "", "")
        if self.op == "update":
            layout = ""
        return f"{self.op} {self.dtype}{layout} {self.batch}x{self.dim}x{self.seqlen}"
