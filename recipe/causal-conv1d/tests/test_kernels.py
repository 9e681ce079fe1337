"""The installed CUDA kernels against causal-conv1d's pure-torch references.

Forward and backward of causal_conv1d_fn (grads of x, weight, bias and initial states) and
causal_conv1d_update, in fp32/fp16/bf16 with upstream's tolerances, widths 2-4, channel-first and
channel-last layouts, with and without bias and SiLU, initial/final states, seq_idx (several
sequences per row, padding), cache_seqlens (circular state) and conv_state_indices (batch gather,
with the padding index -1). Sizes are small: the whole file takes seconds on one GPU.

Without a usable GPU, conftest.py skips every test here with the reason (or fails them when a GPU
is required).
"""

from __future__ import annotations

import os

import pytest
from compare import assert_close  # shared/tests, on sys.path through conftest.py

try:
    import torch
except ImportError:  # collected anyway, so that conftest can report why nothing runs
    torch = None

DTYPES = ["float32", "float16", "bfloat16"]
WIDTHS = [2, 3, 4]
# Upstream's tolerances (tests/test_causal_conv1d.py): activations and dx/dinitial_states in the
# input dtype; weight and bias grads are fp32.
TOLERANCES = {"float32": (3e-4, 1e-3), "float16": (3e-3, 5e-3), "bfloat16": (1e-2, 5e-2)}
WEIGHT_GRAD_TOLERANCE = (1e-3, 1e-3)
PADDING_INDEX = -1  # conv_state_indices entry for a padded batch row (vLLM's PAD_SLOT_ID)


def _device() -> str:
    return os.environ.get("CAUSAL_CONV1D_TEST_DEVICE", "cuda")


@pytest.fixture
def cc():
    """The package's functions, imported only when a test runs (collection works without torch)."""
    import causal_conv1d
    from causal_conv1d import causal_conv1d_interface as interface

    torch.manual_seed(0)
    return causal_conv1d, interface


def _dtype(name: str):
    return getattr(torch, name)


def backward_and_compare(out, out_ref, dtype: str, **grads) -> None:
    """Back-propagate one random gradient through both outputs and compare the named leaves' grads.

    grads: name=(leaf, reference leaf); pairs whose leaf is None are left out. Weight and bias
    grads are fp32 (their tolerance); the others are in the input dtype.
    """
    grad = torch.randn_like(out)
    out.backward(grad)
    out_ref.backward(grad)
    for name, (tensor, reference) in grads.items():
        if tensor is not None:
            tolerance = WEIGHT_GRAD_TOLERANCE if name in ("dweight", "dbias") else TOLERANCES[dtype]
            assert_close(tensor.grad, reference.grad, *tolerance, name)


def make_x(batch: int, dim: int, seqlen: int, dtype: str, channel_last: bool):
    """x of shape (batch, dim, seqlen) in the given memory layout, a strided view as in real use."""
    if channel_last:
        base = torch.randn(batch, seqlen, dim + 8, device=_device(), dtype=_dtype(dtype))
        return base[:, :, :dim].transpose(1, 2)
    base = torch.randn(batch, dim + 8, seqlen, device=_device(), dtype=_dtype(dtype))
    return base[:, 8:, :]


def leaf(t):
    return None if t is None else t.detach().clone().requires_grad_()


def params(dim: int, width: int, has_bias: bool):
    weight = torch.randn(dim, width, device=_device(), dtype=torch.float32)
    bias = torch.randn(dim, device=_device(), dtype=torch.float32) if has_bias else None
    return weight, bias


# ---------------------------------------------------------------------------------------------
# causal_conv1d_fn


@pytest.mark.parametrize("seqlen", [1, 129])
@pytest.mark.parametrize("silu", [False, True], ids=["linear", "silu"])
@pytest.mark.parametrize("has_bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("layout", ["channel_first", "channel_last"])
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_fwd_bwd(cc, dtype, width, layout, has_bias, silu, seqlen):
    _, interface = cc
    batch, dim = 2, 72
    x = make_x(batch, dim, seqlen, dtype, layout == "channel_last").requires_grad_()
    weight, bias = params(dim, width, has_bias)
    weight, bias = leaf(weight), leaf(bias)
    x_ref, weight_ref, bias_ref = leaf(x), leaf(weight), leaf(bias)
    activation = "silu" if silu else None

    out = interface.causal_conv1d_fn(x, weight, bias, activation=activation)
    out_ref = interface.causal_conv1d_ref(x_ref, weight_ref, bias_ref, activation=activation)
    assert out.shape == (batch, dim, seqlen) and out.dtype == x.dtype
    assert_close(out, out_ref, *TOLERANCES[dtype], "out")

    backward_and_compare(out, out_ref, dtype, dx=(x, x_ref), dweight=(weight, weight_ref), dbias=(bias, bias_ref))


@pytest.mark.parametrize(
    "has_initial, return_final",
    [(True, False), (False, True), (True, True)],
    ids=["initial", "final", "initial+final"],
)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_states(cc, dtype, width, has_initial, return_final):
    """Initial and final states (channel-last only, as upstream supports), grads through both."""
    _, interface = cc
    batch, dim, seqlen = 2, 64, 77
    x = make_x(batch, dim, seqlen, dtype, channel_last=True).requires_grad_()
    weight, bias = params(dim, width, has_bias=True)
    weight, bias = leaf(weight), leaf(bias)
    initial = None
    if has_initial:
        initial = torch.randn(batch, width - 1, dim, device=_device(), dtype=_dtype(dtype))
        initial = initial.transpose(1, 2).requires_grad_()
    x_ref, weight_ref, bias_ref, initial_ref = leaf(x), leaf(weight), leaf(bias), leaf(initial)

    out = interface.causal_conv1d_fn(
        x, weight, bias, initial_states=initial, return_final_states=return_final, activation="silu"
    )
    out_ref = interface.causal_conv1d_ref(
        x_ref, weight_ref, bias_ref, initial_states=initial_ref, return_final_states=return_final,
        activation="silu",
    )
    if return_final:
        (out, final), (out_ref, final_ref) = out, out_ref
        assert final.shape == (batch, dim, width - 1)
        assert_close(final, final_ref, *TOLERANCES[dtype], "final_states")
        # Make the loss depend on the final states, so their gradient flows back too.
        out = out + torch.sigmoid(final).sum(dim=-1, keepdim=True)
        out_ref = out_ref + torch.sigmoid(final_ref).sum(dim=-1, keepdim=True)
    assert_close(out, out_ref, *TOLERANCES[dtype], "out")

    backward_and_compare(out, out_ref, dtype, dx=(x, x_ref), dweight=(weight, weight_ref), dbias=(bias, bias_ref),
                         dinitial_states=(initial, initial_ref))


def _seq_idx(lengths_per_row: list[list[int]], pad_to: int):
    """seq_idx rows: sequence i of a row repeated for its length, then -1 (padding) up to pad_to."""
    rows = []
    for lengths in lengths_per_row:
        row = [i for i, length in enumerate(lengths) for _ in range(length)]
        rows.append(row + [-1] * (pad_to - len(row)))
    return torch.tensor(rows, device=_device(), dtype=torch.int32)


@pytest.mark.parametrize("case", ["segments", "segments+initial", "padding"])
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_seq_idx(cc, dtype, width, case):
    """Several sequences packed in one row (seq_idx): no mixing across sequence borders."""
    _, interface = cc
    batch, dim, seqlen = 2, 64, 40
    x = make_x(batch, dim, seqlen, dtype, channel_last=True).requires_grad_()
    weight, bias = params(dim, width, has_bias=True)
    weight, bias = leaf(weight), leaf(bias)
    if case == "padding":
        seq_idx = _seq_idx([[5, 20, 9], [1, 30]], pad_to=seqlen)  # rows end in padding (-1)
    else:
        seq_idx = _seq_idx([[1, 3, 36], [17, 2, 21]], pad_to=seqlen)
    initial = None
    if case == "segments+initial":
        initial = torch.randn(batch, width - 1, dim, device=_device(), dtype=_dtype(dtype))
        initial = initial.transpose(1, 2).requires_grad_()
    x_ref, weight_ref, bias_ref, initial_ref = leaf(x), leaf(weight), leaf(bias), leaf(initial)

    out = interface.causal_conv1d_fn(x, weight, bias, seq_idx=seq_idx, initial_states=initial, activation="silu")
    out_ref = interface.causal_conv1d_ref(
        x_ref, weight_ref, bias_ref, initial_states=initial_ref, activation="silu", seq_idx=seq_idx
    )
    assert_close(out, out_ref, *TOLERANCES[dtype], "out")
    if case == "padding":
        assert torch.all(out.transpose(1, 2)[seq_idx < 0] == 0), "padded positions must be zero"
        return  # upstream checks padding in the forward pass only

    backward_and_compare(out, out_ref, dtype, dx=(x, x_ref), dweight=(weight, weight_ref), dbias=(bias, bias_ref),
                         dinitial_states=(initial, initial_ref))


# ---------------------------------------------------------------------------------------------
# causal_conv1d_update


def _update_inputs(batch: int, dim: int, seqlen: int, width: int, dtype: str, state_rows: int):
    """x ((batch, dim) when seqlen == 0, else (batch, dim, seqlen)) and a conv_state of state_rows."""
    state_len = width - 1 + 3
    if seqlen == 0:
        x = torch.randn(batch, dim, device=_device(), dtype=_dtype(dtype))
    else:
        x = torch.randn(batch, seqlen, dim, device=_device(), dtype=_dtype(dtype)).transpose(1, 2)
    conv_state = torch.randn(state_rows, state_len, dim, device=_device(), dtype=_dtype(dtype)).transpose(1, 2)
    return x, conv_state


def _cache_seqlens(batch: int):
    return torch.randint(0, 1024, (batch,), dtype=torch.int32, device=_device())


@pytest.mark.parametrize("bias_silu", [False, True], ids=["plain", "bias+silu"])
@pytest.mark.parametrize("has_cache_seqlens", [False, True], ids=["shift", "cache_seqlens"])
@pytest.mark.parametrize("seqlen", [0, 1, 3], ids=["2d", "seqlen1", "seqlen3"])
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_update(cc, dtype, width, seqlen, has_cache_seqlens, bias_silu):
    _, interface = cc
    batch, dim = 4, 64
    x, conv_state = _update_inputs(batch, dim, seqlen, width, dtype, state_rows=batch)
    weight, bias = params(dim, width, has_bias=bias_silu)
    activation = "silu" if bias_silu else None
    cache_seqlens = _cache_seqlens(batch) if has_cache_seqlens else None
    conv_state_ref = conv_state.detach().clone()

    out = interface.causal_conv1d_update(x, conv_state, weight, bias, activation=activation, cache_seqlens=cache_seqlens)
    out_ref = interface.causal_conv1d_update_ref(
        x, conv_state_ref, weight, bias, activation=activation, cache_seqlens=cache_seqlens
    )
    assert out.shape == x.shape
    assert_close(out, out_ref, *TOLERANCES[dtype], "out")
    assert torch.equal(conv_state, conv_state_ref), "conv_state differs from the reference update"


@pytest.mark.parametrize("case", ["gather", "gather+cache_seqlens", "gather+padding"])
@pytest.mark.parametrize("seqlen", [1, 2])
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_update_state_indices(cc, dtype, width, seqlen, case):
    """conv_state_indices picks each row's state from a larger pool; -1 marks a padded row."""
    _, interface = cc
    batch, dim, pool = 6, 64, 20
    x, conv_state = _update_inputs(batch, dim, seqlen, width, dtype, state_rows=pool)
    weight, bias = params(dim, width, has_bias=True)
    indices = torch.randperm(pool, device=_device())[:batch].to(torch.int32)
    if case == "gather+padding":
        indices[1] = PADDING_INDEX
        indices[4] = PADDING_INDEX
    cache_seqlens = _cache_seqlens(batch) if case == "gather+cache_seqlens" else None
    state_before = conv_state.detach().clone()

    out = interface.causal_conv1d_update(
        x, conv_state, weight, bias, activation="silu", cache_seqlens=cache_seqlens, conv_state_indices=indices
    )
    valid = indices != PADDING_INDEX
    rows = indices[valid].long()
    state_ref = state_before[rows].clone()
    out_ref = interface.causal_conv1d_update_ref(
        x[valid], state_ref, weight, bias, activation="silu",
        cache_seqlens=None if cache_seqlens is None else cache_seqlens[valid],
    )
    assert_close(out[valid], out_ref, *TOLERANCES[dtype], "out")
    if not valid.all():
        assert torch.all(out[~valid] == 0), "padded rows must give zeros"
    expected_state = state_before.clone()
    expected_state[rows] = state_ref
    assert torch.equal(conv_state, expected_state), "conv_state: wrong rows updated, or wrongly"
