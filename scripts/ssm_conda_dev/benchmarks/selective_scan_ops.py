"""mamba-ssm's selective_scan for the kernel benchmark: selective_scan_fn's forward and backward (see kernel_cases.py).

The call is the Mamba block's (mamba_ssm/modules/mamba_simple.py, its path without the fused
mamba_inner_fn): u, delta and z (batch, d_inner, seqlen) and B, C (batch, d_state, seqlen) in the
dtype; A (d_inner, d_state), D and delta_bias (d_inner) in fp32; delta_softplus. The reference is
upstream's selective_scan_ref (a Python loop over time), whose backward is autograd's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from types import ModuleType

from ssm_conda_dev.benchmarks.kernel_cases import DTYPES, Case

PACKAGE, DISPLAY = "mamba_ssm", "mamba-ssm"
D_STATE = 16
OPS = ("scan_fwd", "scan_bwd")
DESCRIBE = f"selective_scan d_state {D_STATE}"
# The reference is slow (a Python loop over time; autograd's backward of its per-step slices fills a
# zero tensor of the whole (batch, d_inner, seqlen, d_state) fp32 for every step, so its cost grows
# as seqlen squared): the calibrating call warms it, and three samples are its median.
REF_WARMUP, REF_REPEATS = 0, 3
# (batch, d_inner, seqlen): training/prefill shapes of Mamba-130m (d_inner 1536) to Mamba-2.8b (5120),
# the last past the H200's L2. Chosen so that the references (the backward's above all) keep the
# default set (both dtypes) around half a minute on an H200.
SHAPES = [(1, 1536, 2048), (8, 2048, 512), (4, 5120, 512), (8, 4096, 1024)]


def bytes_moved(case: Case) -> int:
    """Minimum bytes the op reads plus writes.

    fwd: read u, delta, z (3 * act), B, C (2 * bc), A, D, delta_bias (params); write out (act):
         4 * act + 2 * bc + params
    bwd: read the fwd's inputs and dout, write a gradient for every input, in its dtype:
         (3 * act + 2 * bc + params) + act + (3 * act + 2 * bc + params) = 7 * act + 4 * bc + 2 * params
    with act = batch * d_inner * seqlen * 2 (bf16/fp16), bc = batch * d_state * seqlen * 2 and
    params = (d_inner * d_state + 2 * d_inner) * 4 (fp32). Left out, as no minimum needs them: the
    kernel's chunk-end states (batch * d_inner * ceil(seqlen / 2048) * 2 * d_state fp32), written by
    the forward and read by the backward, the ungated out it also writes, and the backward's fp32
    dB and dC that autograd then casts to the dtype.
    """
    elem = 2  # bf16 and fp16
    d_state = case.d_state or D_STATE
    act = case.batch * case.dim * case.seqlen * elem
    bc = case.batch * d_state * case.seqlen * elem
    params = (case.dim * d_state + 2 * case.dim) * 4
    inputs = 3 * act + 2 * bc + params
    if case.op == "scan_fwd":
        return inputs + act
    return 2 * inputs + act


def default_cases(ops: Sequence[str], dtypes: Sequence[str], layouts: Sequence[str]) -> list[Case]:
    del layouts  # u, delta and z are (batch, d_inner, seqlen), contiguous: the kernel's only layout
    return [Case(op, dtype, None, b, d, s, d_state=D_STATE) for op in ops if op in OPS for dtype in dtypes
            for b, d, s in SHAPES]


def import_interface() -> ModuleType:
    from mamba_ssm.ops import selective_scan_interface

    return selective_scan_interface


def inputs(torch: ModuleType, case: Case, dev: str) -> dict:
    """selective_scan_fn's arguments, initialised as Mamba initialises its parameters."""
    dtype = getattr(torch, DTYPES[case.dtype])
    d_state = case.d_state or D_STATE

    def act(*shape: int):
        return torch.randn(*shape, device=dev, dtype=dtype)

    # A = -exp(A_log), A_log = log(1..d_state); dt = softplus(delta + delta_bias) in [1e-3, 1e-1].
    A = -torch.arange(1, d_state + 1, device=dev, dtype=torch.float32).repeat(case.dim, 1)
    dt = torch.exp(torch.rand(case.dim, device=dev) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
    return {
        "u": act(case.batch, case.dim, case.seqlen), "delta": 0.1 * act(case.batch, case.dim, case.seqlen), "A": A,
        "B": act(case.batch, d_state, case.seqlen), "C": act(case.batch, d_state, case.seqlen),
        "D": torch.ones(case.dim, device=dev, dtype=torch.float32), "z": act(case.batch, case.dim, case.seqlen),
        "delta_bias": dt + torch.log(-torch.expm1(-dt)),
    }


def calls(torch: ModuleType, iface: ModuleType, case: Case, dev: str) -> tuple[Callable[[], object], Callable[[], object]]:
    args = inputs(torch, case, dev)
    if case.op == "scan_fwd":
        run = lambda: iface.selective_scan_fn(**args, delta_softplus=True)  # noqa: E731
        ref = lambda: iface.selective_scan_ref(**args, delta_softplus=True)  # noqa: E731
        return run, ref
    leaves = [t.requires_grad_() for t in args.values()]
    out = iface.selective_scan_fn(**args, delta_softplus=True)
    grad = torch.randn_like(out)
    run = lambda: torch.autograd.grad(out, leaves, grad, retain_graph=True)  # noqa: E731
    # The reference's graph (large: the loop's every step) is built on its first call, so that --no-ref builds none.
    ref_graph: list = []

    def ref() -> object:
        if not ref_graph:
            ref_graph.append(iface.selective_scan_ref(**args, delta_softplus=True))
        return torch.autograd.grad(ref_graph[0], leaves, grad, retain_graph=True)

    return run, ref
