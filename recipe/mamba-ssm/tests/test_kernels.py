"""The installed mamba-ssm kernels against upstream's pure-torch references.

* selective_scan_fn (selective_scan_cuda) vs selective_scan_ref: forward, last state and every
  gradient, fp32/fp16/bf16 at upstream's tolerances (tests/ops/test_selective_scan.py), fixed and
  variable B and C (one and two groups), with and without D, z, delta_bias, delta_softplus and
  return_last_state, and one sequence of two 2048-step chunks;
* mamba_inner_fn (selective_scan_cuda with causal_conv1d.cpp_functions) vs mamba_inner_ref run on
  the references (selective_scan_ref, causal_conv1d_ref): output and every gradient;
* a Mamba block, fast path (mamba_inner_fn) and kernel slow path (causal_conv1d_fn and
  selective_scan_fn), each vs the block on the references (nn.Conv1d, selective_scan_ref);
* Triton kernels: selective_state_update vs selective_state_update_ref, and a Mamba2 block (fused
  mem-efficient path vs the unfused path, and vs mamba_split_conv1d_scan_ref);
* test_construct_without_optional_kernels (marked cpu): Mamba, Mamba2 and Mamba3 (SISO) import and
  construct without tilelang, quack, cutlass or tvm-ffi (the MIMO and CuTe kernels' packages).

Shapes are small: the whole file takes seconds on one GPU. Without a usable GPU, conftest.py skips
every test not marked cpu with the reason (or fails them when a GPU is required).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from compare import assert_close  # shared/tests, on sys.path through conftest.py

try:
    import torch
except ImportError:  # collected anyway, so that conftest can report why nothing runs
    torch = None

DTYPES = ["float32", "float16", "bfloat16"]


def _device() -> str:
    return os.environ.get("MAMBA_SSM_TEST_DEVICE", "cuda")


def _dtype(name: str):
    return getattr(torch, name)


def tolerances(dtype: str, has_z: bool = True):
    """Upstream's (rtol, atol) for activations and (rtolw, atolw) for weights (test_selective_scan.py)."""
    rtol, atol = (6e-4, 2e-3) if dtype == "float32" else (3e-3, 5e-3)
    if dtype == "bfloat16":
        rtol, atol = 3e-2, 5e-2
    rtolw, atolw = 1e-3, 1e-3
    if has_z:  # "If we have z, the errors on the weights seem higher"
        rtolw, atolw = max(rtolw, rtol), max(atolw, atol)
    return (rtol, atol), (rtolw, atolw)


def leaf(t):
    return None if t is None else t.detach().clone().requires_grad_()


@pytest.fixture
def ssm():
    """The package's modules, imported only when a test runs (collection works without torch)."""
    from mamba_ssm.ops import selective_scan_interface

    torch.manual_seed(0)
    return selective_scan_interface


# ---------------------------------------------------------------------------------------------
# selective_scan_fn

# Each case's id lists what it has: varB/fixedB, varC/fixedC, g2 (two groups of B and C), D, z,
# bias (delta_bias), softplus, last (return_last_state), then the sequence length.
SCAN_CASES = [
    dict(B="var", C="var", groups=1, D=True, z=True, bias=True, softplus=True, last=True, seqlen=64),
    dict(B="var", C="var", groups=1, D=False, z=False, bias=False, softplus=False, last=False, seqlen=64),
    dict(B="fixed", C="fixed", groups=1, D=True, z=True, bias=True, softplus=True, last=False, seqlen=64),
    dict(B="fixed", C="var", groups=1, D=True, z=False, bias=False, softplus=True, last=True, seqlen=33),
    dict(B="var", C="var", groups=2, D=True, z=True, bias=False, softplus=True, last=True, seqlen=64),
    # Two chunks of the kernel (2048 steps each): the state carried across a chunk border.
    dict(B="var", C="var", groups=1, D=True, z=True, bias=True, softplus=True, last=True, seqlen=2100),
]


def scan_case_id(case: dict) -> str:
    words = [f"{case['B']}B", f"{case['C']}C"] + (["g2"] if case["groups"] > 1 else [])
    words += [w for w in ("D", "z", "bias", "softplus", "last") if case[w]]
    return "-".join(words + [f"L{case['seqlen']}"])


def _bc(kind: str, groups: int, batch: int, dim: int, dstate: int, seqlen: int, dtype: str):
    if kind == "fixed":
        return torch.randn(dim, dstate, device=_device(), dtype=torch.float32, requires_grad=True)
    shape = (batch, dstate, seqlen) if groups == 1 else (batch, groups, dstate, seqlen)
    return torch.randn(*shape, device=_device(), dtype=_dtype(dtype), requires_grad=True)


@pytest.mark.parametrize("case", SCAN_CASES, ids=[scan_case_id(c) for c in SCAN_CASES])
@pytest.mark.parametrize("dtype", DTYPES)
def test_selective_scan(ssm, dtype, case):
    batch, dim, dstate, seqlen = 2, 4, 8, case["seqlen"]
    (rtol, atol), (rtolw, atolw) = tolerances(dtype, case["z"])
    itype, dev = _dtype(dtype), _device()
    A = (-0.5 * torch.rand(dim, dstate, device=dev)).requires_grad_()
    B = _bc(case["B"], case["groups"], batch, dim, dstate, seqlen, dtype)
    C = _bc(case["C"], case["groups"], batch, dim, dstate, seqlen, dtype)
    D = torch.randn(dim, device=dev, requires_grad=True) if case["D"] else None
    z = torch.randn(batch, dim, seqlen, device=dev, dtype=itype, requires_grad=True) if case["z"] else None
    delta_bias = (0.5 * torch.rand(dim, device=dev)).requires_grad_() if case["bias"] else None
    u = torch.randn(batch, dim, seqlen, device=dev, dtype=itype, requires_grad=True)
    delta = (0.5 * torch.rand(batch, dim, seqlen, device=dev, dtype=itype)).requires_grad_()
    inputs = dict(u=u, delta=delta, A=A, B=B, C=C, D=D, z=z, delta_bias=delta_bias)
    refs = {name: leaf(t) for name, t in inputs.items()}
    flags = dict(delta_softplus=case["softplus"], return_last_state=case["last"])

    out = ssm.selective_scan_fn(**inputs, **flags)
    out_ref = ssm.selective_scan_ref(**refs, **flags)
    if case["last"]:
        (out, state), (out_ref, state_ref) = out, out_ref
        assert state.shape == (batch, dim, dstate)
        assert_close(state, state_ref, rtol, atol, "last_state")
    assert out.shape == (batch, dim, seqlen) and out.dtype == itype
    assert_close(out, out_ref, rtol, atol, "out")

    g = torch.randn_like(out)
    out_ref.backward(g)
    out.backward(g)
    grad = {name: (t.grad, refs[name].grad) for name, t in inputs.items() if t is not None}
    assert_close(*grad["u"], rtol * 2, atol * 2, "du")
    assert_close(*grad["delta"], rtol * 5, atol * 10, "ddelta")
    assert_close(*grad["A"], rtolw, atolw * 5, "dA")
    for name in ("B", "C"):
        variable = case[name] == "var"
        assert_close(*grad[name], rtol if variable else rtolw, atol if variable else atolw, f"d{name}")
    for name in ("D", "z", "delta_bias"):
        if name in grad:
            assert_close(*grad[name], rtolw, atolw, f"d{name}")


# ---------------------------------------------------------------------------------------------
# mamba_inner_fn

INNER_CASES = [(True, True), (False, True), (True, False), (False, False)]


@pytest.fixture
def references(ssm, monkeypatch):
    """mamba_inner_ref on the pure-torch references (upstream's runs selective_scan_fn and causal_conv1d_fn)."""
    from causal_conv1d.causal_conv1d_interface import causal_conv1d_ref

    monkeypatch.setattr(ssm, "selective_scan_fn", ssm.selective_scan_ref)
    monkeypatch.setattr(ssm, "causal_conv1d_fn", causal_conv1d_ref)
    return ssm.mamba_inner_ref


@pytest.mark.parametrize(
    "variable_B, variable_C", INNER_CASES, ids=[f"{'var' if b else 'fixed'}B-{'var' if c else 'fixed'}C" for b, c in INNER_CASES]
)
@pytest.mark.parametrize("dtype", ["float32"])  # upstream's test_mamba_inner_fn: fp32 only
def test_mamba_inner_fn(ssm, references, dtype, variable_B, variable_C):
    batch, dim, dstate, dt_rank, width, seqlen = 2, 48, 8, 6, 4, 64
    (rtol, atol), (rtolw, atolw) = tolerances(dtype, has_z=True)
    itype, dev = _dtype(dtype), _device()

    def weight(*shape, dtype=itype, scale=None):
        w = torch.randn(*shape, device=dev, dtype=torch.float32) * (scale or shape[-1] ** -0.5)
        return w.to(dtype).requires_grad_()

    n_proj = dt_rank + (variable_B + variable_C) * dstate
    inputs = dict(
        xz=torch.randn(batch, 2 * dim, seqlen, device=dev, dtype=itype, requires_grad=True),
        conv1d_weight=weight(dim, 1, width, dtype=torch.float32, scale=width**-0.5),
        conv1d_bias=weight(dim, dtype=torch.float32, scale=0.5),
        x_proj_weight=weight(n_proj, dim),
        delta_proj_weight=weight(dim, dt_rank),
        out_proj_weight=weight(dim // 2, dim),
        # None as upstream's test and Mamba (bias=False): with a bias, 2.3.2's MambaInnerFn.backward
        # returns a scalar for its gradient (dout.sum over both dims of the (e, b*l) dout) and fails.
        out_proj_bias=None,
        A=(-0.5 * torch.rand(dim, dstate, device=dev)).requires_grad_(),
        B=None if variable_B else weight(dim, dstate, dtype=torch.float32, scale=1.0),
        C=None if variable_C else weight(dim, dstate, dtype=torch.float32, scale=1.0),
        D=weight(dim, dtype=torch.float32, scale=1.0),
        delta_bias=(0.5 * torch.rand(dim, device=dev)).requires_grad_(),
    )
    refs = {name: leaf(t) for name, t in inputs.items()}

    out = ssm.mamba_inner_fn(**inputs, delta_softplus=True)
    out_ref = references(**refs, delta_softplus=True)
    assert out.shape == (batch, seqlen, dim // 2)
    assert_close(out, out_ref, rtol, atol, "out")

    g = torch.randn_like(out)
    out_ref.backward(g)
    out.backward(g)
    for name, t in inputs.items():
        if t is not None:
            rt, at = (rtol * 2, atol * 2) if name == "xz" else (rtolw, atolw * 5 if name == "A" else atolw)
            assert_close(t.grad, refs[name].grad, rt, at, f"d{name}")


# ---------------------------------------------------------------------------------------------
# Mamba block


@pytest.mark.parametrize("path", ["fast", "slow"])
def test_mamba_block(ssm, monkeypatch, path):
    """Mamba's fast path (mamba_inner_fn) or slow path (the kernels one by one) vs the block on references."""
    from mamba_ssm.modules import mamba_simple

    (rtol, atol), (rtolw, atolw) = tolerances("float32", has_z=True)
    batch, seqlen, d_model = 2, 64, 32
    block = mamba_simple.Mamba(d_model=d_model, d_state=8, d_conv=4, expand=2, use_fast_path=path == "fast",
                               device=_device())
    x = torch.randn(batch, seqlen, d_model, device=_device(), requires_grad=True)
    out = block(x)
    g = torch.randn_like(out)
    out.backward(g)
    grads = {name: p.grad.clone() for name, p in block.named_parameters()}
    block.zero_grad()

    x_ref = leaf(x)
    with monkeypatch.context() as patch:
        patch.setattr(mamba_simple, "selective_scan_fn", ssm.selective_scan_ref)
        patch.setattr(mamba_simple, "causal_conv1d_fn", None)  # nn.Conv1d
        block.use_fast_path = False
        out_ref = block(x_ref)
        out_ref.backward(g)
    assert_close(out, out_ref, rtol, atol, "out")
    assert_close(x.grad, x_ref.grad, rtol * 2, atol * 2, "dx")
    for name, p in block.named_parameters():
        assert_close(grads[name], p.grad, rtolw, atolw * 5 if name == "A_log" else atolw, f"d{name}")


# ---------------------------------------------------------------------------------------------
# Triton kernels (GPU only, even in a CPU dry run)


@pytest.mark.triton
@pytest.mark.parametrize("has_z", [False, True], ids=["noz", "z"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_selective_state_update(dtype, has_z):
    from mamba_ssm.ops.triton.selective_state_update import selective_state_update, selective_state_update_ref

    # Upstream's test_selective_state_update at one size, with its tolerances.
    rtol, atol = (3e-4, 1e-3) if dtype == "float32" else (5e-3, 1e-2)
    if dtype == "bfloat16":
        rtol, atol = 1e-2, 5e-2
    torch.manual_seed(0)
    dev, itype, batch, dim, dstate = _device(), _dtype(dtype), 2, 2048 + 16, 16
    state = torch.randn(batch, dim, dstate, dtype=itype, device=dev)
    x = torch.randn(batch, dim, device=dev, dtype=itype)
    dt = torch.randn(batch, dim, device=dev, dtype=itype)
    dt_bias = torch.rand(dim, device=dev) - 4.0
    A = -torch.rand(dim, dstate, device=dev) - 1.0
    B = torch.randn(batch, dstate, device=dev)
    C = torch.randn(batch, dstate, device=dev)
    D = torch.randn(dim, device=dev)
    z = torch.randn_like(x) if has_z else None
    state_ref = state.detach().clone()
    out = selective_state_update(state, x, dt, A, B, C, D=D, z=z, dt_bias=dt_bias, dt_softplus=True)
    out_ref = selective_state_update_ref(state_ref, x, dt, A, B, C, D=D, z=z, dt_bias=dt_bias, dt_softplus=True)
    assert_close(state, state_ref, rtol, atol, "state")
    assert_close(out, out_ref, rtol, atol, "out")


# Triton's fp32 matmuls run in TF32: looser than the CUDA kernels' fp32 (a choice, not upstream's).
MAMBA2_TOLERANCE = (1e-2, 1e-2)


@pytest.mark.triton
def test_mamba2_block():
    from mamba_ssm.modules.mamba2 import Mamba2
    from mamba_ssm.ops.triton.ssd_combined import mamba_split_conv1d_scan_ref

    torch.manual_seed(0)
    rtol, atol = MAMBA2_TOLERANCE
    batch, seqlen, d_model = 2, 128, 64
    block = Mamba2(d_model=d_model, d_state=16, d_conv=4, expand=2, headdim=32, chunk_size=32, device=_device())
    x = torch.randn(batch, seqlen, d_model, device=_device(), requires_grad=True)
    runs = []
    for mem_eff in (True, False):
        block.use_mem_eff_path = mem_eff
        xi = leaf(x)
        out = block(xi)
        out.backward(torch.ones_like(out) / out.numel() ** 0.5)
        runs.append((out, xi.grad, {n: p.grad.clone() for n, p in block.named_parameters()}))
        block.zero_grad()
    (out, dx, grads), (out_unfused, dx_unfused, grads_unfused) = runs
    assert_close(out, out_unfused, rtol, atol, "out (fused vs unfused path)")
    assert_close(dx, dx_unfused, rtol, atol, "dx (fused vs unfused path)")
    for name in grads:
        assert_close(grads[name], grads_unfused[name], rtol, atol, f"d{name} (fused vs unfused path)")
    with torch.no_grad():
        out_ref = mamba_split_conv1d_scan_ref(
            block.in_proj(x), block.conv1d.weight.squeeze(1), block.conv1d.bias, block.dt_bias,
            -torch.exp(block.A_log.float()), block.D, block.chunk_size, activation=block.activation,
            rmsnorm_weight=block.norm.weight, rmsnorm_eps=block.norm.eps, outproj_weight=block.out_proj.weight,
            outproj_bias=block.out_proj.bias, headdim=block.headdim, ngroups=block.ngroups,
            norm_before_gate=block.norm_before_gate,
        )
    assert_close(out, out_ref, rtol, atol, "out (vs mamba_split_conv1d_scan_ref)")


# ---------------------------------------------------------------------------------------------
# Optional kernels

OPTIONAL_KERNEL_PACKAGES = ("tilelang", "quack", "cutlass", "tvm_ffi")
CONSTRUCT = f"""
import sys
for name in {OPTIONAL_KERNEL_PACKAGES!r}:
    sys.modules[name] = None  # importing it raises ImportError, as if it were not installed
from mamba_ssm.modules.mamba_simple import Mamba
from mamba_ssm.modules.mamba2 import Mamba2
from mamba_ssm.modules.mamba3 import Mamba3
Mamba(d_model=64, d_state=16)
Mamba2(d_model=64, d_state=16, headdim=32)
Mamba3(d_model=64, d_state=16, headdim=32, is_mimo=False)
print("constructed Mamba, Mamba2, Mamba3 (SISO)")
"""


@pytest.mark.cpu
def test_construct_without_optional_kernels():
    """The MIMO/CuTe kernels' packages are optional: without them every block still imports and builds (CPU)."""
    result = subprocess.run([sys.executable, "-c", CONSTRUCT], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "constructed Mamba, Mamba2, Mamba3 (SISO)" in result.stdout
