"""causal-conv1d's cases for the kernel benchmark: forward, backward and update, width 4 (see kernel_cases.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType

from ssm_conda_dev.benchmarks.kernel_cases import DTYPES, Case

PACKAGE, DISPLAY = "causal_conv1d", "causal-conv1d"
WIDTH = 4
OPS = ("fwd", "bwd", "update")
LAYOUTS = ("channel_first", "channel_last")
DESCRIBE = f"width {WIDTH}"
REF_WARMUP, REF_REPEATS = 5, None  # None: a third of --repeats, at least 3
# (batch, dim, seqlen): prefill/training shapes of Mamba models (d_inner 2048-8192).
SEQ_SHAPES = [(1, 2048, 2048), (4, 4096, 2048), (8, 4096, 4096), (2, 8192, 8192)]
# (batch, dim, seqlen): decoding, one token (or a few, speculative) per step.
UPDATE_SHAPES = [(1, 2048, 1), (8, 4096, 1), (8, 8192, 1), (8, 8192, 4)]


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
        if op not in OPS:
            continue
        for dtype in dtypes:
            if op == "update":
                cases += [Case(op, dtype, "channel_last", b, d, s, width=WIDTH) for b, d, s in UPDATE_SHAPES]
            else:
                cases += [Case(op, dtype, layout, b, d, s, width=WIDTH) for layout in layouts for b, d, s in SEQ_SHAPES]
    return cases


def import_interface() -> ModuleType:
    from causal_conv1d import causal_conv1d_interface

    return causal_conv1d_interface


def calls(torch: ModuleType, iface: ModuleType, case: Case, dev: str) -> tuple[Callable[[], object], Callable[[], object]]:
    dtype = getattr(torch, DTYPES[case.dtype])
    weight = torch.randn(case.dim, WIDTH, device=dev, dtype=torch.float32)
    bias = torch.randn(case.dim, device=dev, dtype=torch.float32)
    if case.op == "update":
        x = torch.randn(case.batch, case.seqlen, case.dim, device=dev, dtype=dtype).transpose(1, 2)
        state = torch.randn(case.batch, WIDTH - 1, case.dim, device=dev, dtype=dtype).transpose(1, 2)
        state_ref = state.clone()
        run = lambda: iface.causal_conv1d_update(x, state, weight, bias, activation="silu")  # noqa: E731
        ref = lambda: iface.causal_conv1d_update_ref(x, state_ref, weight, bias, activation="silu")  # noqa: E731
        return run, ref
    if case.layout == "channel_last":
        x = torch.randn(case.batch, case.seqlen, case.dim, device=dev, dtype=dtype).transpose(1, 2)
    else:
        x = torch.randn(case.batch, case.dim, case.seqlen, device=dev, dtype=dtype)
    if case.op == "fwd":
        run = lambda: iface.causal_conv1d_fn(x, weight, bias, activation="silu")  # noqa: E731
        ref = lambda: iface.causal_conv1d_ref(x, weight, bias, activation="silu")  # noqa: E731
        return run, ref
    inputs = (x.requires_grad_(), weight.requires_grad_(), bias.requires_grad_())
    out = iface.causal_conv1d_fn(*inputs, activation="silu")
    grad = torch.randn_like(out)
    run = lambda: torch.autograd.grad(out, inputs, grad, retain_graph=True)  # noqa: E731
    # The reference's graph is built on its first call, so that --no-ref builds none.
    ref_graph: list = []

    def ref() -> object:
        if not ref_graph:
            ref_graph.append(iface.causal_conv1d_ref(*inputs, activation="silu"))
        return torch.autograd.grad(ref_graph[0], inputs, grad, retain_graph=True)

    return run, ref
