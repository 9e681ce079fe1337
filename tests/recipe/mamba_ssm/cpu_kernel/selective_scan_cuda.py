"""A pure-torch CPU stand-in for mamba-ssm's compiled `selective_scan_cuda` extension, for testing the tests.

recipe/mamba-ssm/tests/test_kernels.py compares the CUDA kernels with upstream's references. No
GPU is here, so tests/recipe/mamba_ssm/test_kernels_dry_run.py runs it on the CPU with this module
in place of the extension, beneath upstream's real Python package (mamba_ssm/*.py from the sdist).
It has the C++ entry points' signatures and results (csrc/selective_scan/selective_scan.cpp):

    fwd(u, delta, A, B, C, D, z, delta_bias, delta_softplus) -> [out, x(, out_z)]
    bwd(u, delta, A, B, C, D, z, delta_bias, dout, x, out, dz, delta_softplus, recompute_out_z)
        -> [du, ddelta, dA, dB, dC, dD, ddelta_bias(, dz)(, out_z)]

x is (batch, dim, n_chunks, 2 * dstate), chunks of 2048 steps, the state at each chunk's end in
the odd slots (selective_scan_fn reads x[:, :, -1, 1::2] as the last state); dz is written into
the dz given. The scan is an explicit loop over time in fp32, not the references' einsums; the
backward is autograd through that same loop. Real weights only (no complex A).

MAMBA_SSM_CPU_KERNEL_BUG=<name> plants one bug (see BUGS).
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

CHUNK = 2048
BUGS = {
    "D_dropped": "the skip term D * u is left out",
    "softplus_ignored": "delta_softplus has no effect",
    "z_gate_missing": "out_z is out, not out * silu(z)",
    "last_state_wrong": "the state stored for a chunk's end is one step early",
    "dB_scale": "the gradient of B is 1% too large",
}


def _bug(name: str) -> bool:
    planted = os.environ.get("MAMBA_SSM_CPU_KERNEL_BUG", "")
    if planted and planted not in BUGS:
        raise ValueError(f"unknown MAMBA_SSM_CPU_KERNEL_BUG {planted!r}; accepted: {', '.join(BUGS)}")
    return planted == name


def _per_channel(M: torch.Tensor, batch: int, dim: int, seqlen: int) -> torch.Tensor:
    """B or C as (batch, dim, dstate, seqlen) in fp32: a fixed (dim, dstate) or (batch, groups, dstate, seqlen)."""
    if M.dim() == 2:
        return M.float()[None, :, :, None].expand(batch, dim, M.shape[1], seqlen)
    if M.dim() == 3:
        M = M.unsqueeze(1)
    return M.float().repeat_interleave(dim // M.shape[1], dim=1)


def _scan(u, delta, A, B, C, D, z, delta_bias, delta_softplus):
    """(out, out_z or None, chunk-end states (batch, dim, n_chunks, 2 * dstate)), all fp32."""
    if A.is_complex():
        raise NotImplementedError("the CPU stand-in has real weights only")
    batch, dim, seqlen = u.shape
    dt = delta.float()
    if delta_bias is not None:
        dt = dt + delta_bias.float()[:, None]
    if delta_softplus and not _bug("softplus_ignored"):
        dt = torch.where(dt <= 20.0, F.softplus(dt), dt)  # the kernel's softplus
    uf, Af = u.float(), A.float()
    Bs, Cs = _per_channel(B, batch, dim, seqlen), _per_channel(C, batch, dim, seqlen)
    state = u.new_zeros(batch, dim, A.shape[1], dtype=torch.float32)
    decay = torch.ones_like(state)
    ys, ends = [], []
    late = 0 if _bug("last_state_wrong") else 1  # which step's state is stored at a chunk's end
    previous = state
    for t in range(seqlen):
        dA = torch.exp(dt[:, :, t, None] * Af)
        previous, state = state, dA * state + (dt[:, :, t] * uf[:, :, t])[..., None] * Bs[..., t]
        decay = decay * dA
        ys.append((state * Cs[..., t]).sum(-1))
        if t % CHUNK == CHUNK - 1 or t == seqlen - 1:
            ends.append(torch.stack([decay, state if late else previous], dim=-1).flatten(-2))
            decay = torch.ones_like(decay)
    out = torch.stack(ys, dim=-1)
    if D is not None and not _bug("D_dropped"):
        out = out + uf * D.float()[:, None]
    out_z = None
    if z is not None:
        out_z = out if _bug("z_gate_missing") else out * F.silu(z.float())
    return out, out_z, torch.stack(ends, dim=2)


def fwd(u, delta, A, B, C, D, z, delta_bias, delta_softplus):
    with torch.no_grad():
        out, out_z, x = _scan(u, delta, A, B, C, D, z, delta_bias, delta_softplus)
    result = [out.to(delta.dtype), x.to(A.dtype)]
    if z is not None:
        result.append(out_z.to(z.dtype))
    return result


def bwd(u, delta, A, B, C, D, z, delta_bias, dout, x, out, dz, delta_softplus, recompute_out_z):
    names = ["u", "delta", "A", "B", "C", "D", "z", "delta_bias"]
    given = dict(zip(names, (u, delta, A, B, C, D, z, delta_bias), strict=True))
    leaves = {k: v.detach().float().requires_grad_() for k, v in given.items() if v is not None}
    with torch.enable_grad():
        out_f, out_z, _ = _scan(*(leaves.get(k) for k in names), delta_softplus)
        target = out_z if z is not None else out_f
        grads = torch.autograd.grad(target, list(leaves.values()), dout.float(), allow_unused=True)
    grads = {k: (torch.zeros_like(v) if g is None else g) for (k, v), g in zip(leaves.items(), grads, strict=True)}
    if _bug("dB_scale"):
        grads["B"] = grads["B"] * 1.01
    result = [grads["u"].to(u.dtype), grads["delta"].to(delta.dtype), grads["A"], grads["B"].to(B.dtype),
              grads["C"].to(C.dtype), grads.get("D"), grads.get("delta_bias")]
    if z is not None:
        if dz is None:
            dz = torch.empty_like(z)
        dz.copy_(grads["z"])
        result.append(dz)
    if recompute_out_z and z is not None:
        result.append(out_z.detach().to(z.dtype))
    return result
