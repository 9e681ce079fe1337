"""A pure-torch CPU stand-in for the compiled `causal_conv1d_cuda` extension, for testing the tests.

recipe/causal-conv1d/tests/test_kernels.py compares the CUDA kernels with upstream's references. No GPU is
here, so tests/recipe/test_kernels_dry_run.py runs that file on the CPU with this module in
place of the extension, beneath upstream's real Python interface (causal_conv1d/*.py from the
sdist). It has the C++ entry points' signatures and semantics (write into the given outputs,
fp32 accumulation, weight/bias grads in fp32), written as explicit sums over the kernel width,
not with conv1d as the references are.

CAUSAL_CONV1D_CPU_KERNEL_BUG=<name> plants one bug (see BUGS), so the dry run can show that the
tests catch each kind of wrong kernel.
"""

from __future__ import annotations

import os

import torch

BUGS = {
    "flipped_weight": "forward applies the filter taps in reverse order",
    "silu_grad": "backward uses sigmoid(x) for the derivative of SiLU",
    "dweight_scale": "weight gradient 1% too large",
    "dbias_missing": "bias gradient left at zero",
    "dinitial_missing": "initial-state gradient left at zero",
    "final_states_shift": "final states taken one step too early",
    "seq_idx_ignored": "seq_idx does not stop the filter at sequence borders",
    "padding_not_zeroed": "positions with seq_idx -1 keep their values",
    "state_not_written": "update leaves conv_state as it was",
    "cache_seqlens_ignored": "update treats a circular conv_state as a shift register",
    "padded_row_computed": "update runs padded rows (index -1) on state row 0",
}


def _bug(name: str) -> bool:
    planted = os.environ.get("CAUSAL_CONV1D_CPU_KERNEL_BUG", "")
    if planted and planted not in BUGS:
        raise ValueError(f"unknown CAUSAL_CONV1D_CPU_KERNEL_BUG {planted!r}; accepted: {', '.join(BUGS)}")
    return planted == name


def _taps(weight: torch.Tensor) -> torch.Tensor:
    weight = weight.float()
    return weight.flip(-1) if _bug("flipped_weight") else weight


def _window(x, weight, initial_states, seq_idx):
    """x with its width-1 history in front (fp32), and the mask of taps inside t's own sequence."""
    width = weight.shape[-1]
    batch, dim, seqlen = x.shape
    if initial_states is None:
        history = torch.zeros(batch, dim, width - 1, dtype=torch.float32, device=x.device)
    else:
        history = initial_states.float()
    xs = torch.cat([history, x.float()], dim=-1)  # (batch, dim, seqlen + width - 1)
    if seq_idx is None or _bug("seq_idx_ignored"):
        masks = [None] * width
    else:
        # The history belongs to the row's first sequence (it carries on from the initial state).
        ids = torch.cat([seq_idx[:, :1].expand(-1, width - 1), seq_idx], dim=-1)
        masks = [(ids[:, k:k + seqlen] == seq_idx).unsqueeze(1) for k in range(width)]
    return xs, masks


def _preactivation(xs, taps, bias, masks, seqlen):
    pre = torch.zeros(xs.shape[0], xs.shape[1], seqlen, dtype=torch.float32, device=xs.device)
    for k, mask in enumerate(masks):
        term = taps[:, k, None] * xs[..., k:k + seqlen]
        pre += term if mask is None else term * mask
    if bias is not None:
        pre += bias.float()[:, None]
    return pre


def _valid(seq_idx):
    if seq_idx is None or _bug("padding_not_zeroed"):
        return None
    return (seq_idx >= 0).unsqueeze(1)


def causal_conv1d_fwd(x, weight, bias, seq_idx, initial_states, out, final_states_out, silu_activation):
    seqlen = x.shape[-1]
    width = weight.shape[-1]
    xs, masks = _window(x, weight, initial_states, seq_idx)
    result = _preactivation(xs, _taps(weight), bias, masks, seqlen)
    if silu_activation:
        result = torch.nn.functional.silu(result)
    valid = _valid(seq_idx)
    if valid is not None:
        result = result * valid
    out.copy_(result.to(out.dtype))
    if final_states_out is not None:
        end = xs.shape[-1] - (1 if _bug("final_states_shift") else 0)
        final_states_out.copy_(xs[..., end - (width - 1):end].to(final_states_out.dtype))


def causal_conv1d_bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight, dbias,
                      dinitial_states, silu_activation):
    seqlen = x.shape[-1]
    width = weight.shape[-1]
    taps = _taps(weight)
    xs, masks = _window(x, weight, initial_states, seq_idx)
    grad = dout.float()
    if silu_activation:
        pre = _preactivation(xs, taps, bias, masks, seqlen)
        sig = torch.sigmoid(pre)
        grad = grad * (sig if _bug("silu_grad") else sig * (1 + pre * (1 - sig)))
    valid = _valid(seq_idx)
    if valid is not None:
        grad = grad * valid
    dxs = torch.zeros_like(xs)
    for k, mask in enumerate(masks):
        g = grad if mask is None else grad * mask
        dxs[..., k:k + seqlen] += taps[:, k, None] * g
        dweight[:, k] += (g * xs[..., k:k + seqlen]).sum(dim=(0, 2)) * (1.01 if _bug("dweight_scale") else 1.0)
    if dbias is not None and not _bug("dbias_missing"):
        dbias += grad.sum(dim=(0, 2))
    if dfinal_states is not None:
        dxs[..., xs.shape[-1] - (width - 1):] += dfinal_states.float()
    dx.copy_(dxs[..., width - 1:].to(dx.dtype))
    if dinitial_states is not None:
        history_grad = dxs[..., :width - 1]
        dinitial_states.copy_((history_grad * 0 if _bug("dinitial_missing") else history_grad).to(dinitial_states.dtype))


def causal_conv1d_update(x, conv_state, weight, bias, out, silu_activation, cache_seqlens, conv_state_indices):
    batch, _, seqlen = x.shape
    width = weight.shape[-1]
    state_len = conv_state.shape[-1]
    taps = _taps(weight)
    for b in range(batch):
        row = b if conv_state_indices is None else int(conv_state_indices[b])
        if row < 0:
            if not _bug("padded_row_computed"):
                out[b].zero_()
                continue
            row = 0
        state = conv_state[row]
        if cache_seqlens is None or _bug("cache_seqlens_ignored"):
            history = state[:, state_len - (width - 1):]
            new_state = torch.cat([state, x[b]], dim=-1)[:, -state_len:]
        else:
            start = int(cache_seqlens[b])
            history = state[:, [(start - (width - 1) + j) % state_len for j in range(width - 1)]]
            new_state = state.clone()
            new_state[:, [(start + t) % state_len for t in range(seqlen)]] = x[b]
        window = torch.cat([history.float(), x[b].float()], dim=-1)
        result = sum(taps[:, k, None] * window[:, k:k + seqlen] for k in range(width))
        if bias is not None:
            result = result + bias.float()[:, None]
        if silu_activation:
            result = torch.nn.functional.silu(result)
        out[b].copy_(result.to(out.dtype))
        if not _bug("state_not_written"):
            conv_state[row].copy_(new_state)
