"""transformers' Mamba and Mamba2 models on this package's kernels (transformers >= 5.25).

transformers binds the installed packages once, when it imports its modeling module: each kernel
is a module global (modeling_mamba.mamba_selective_scan, modeling_mamba2.mamba2_chunk_scan, ...)
whose dispatcher holds the package's function (mamba_ssm's selective_scan_fn, ...) and sends it
the CUDA inputs; everything else (other devices, a package that failed to import) takes
transformers' own torch reference function, with no more than a log line. So a package that
loads wrongly does not fail a model: it makes it silently slow. These tests show which path runs.

* GPU (skipped without one, as the other GPU tests): a tiny MambaForCausalLM and Mamba2ForCausalLM
  built from a config (no Hub download, USE_HUB_KERNELS=0), on CUDA in fp32: a forward, a cached
  decode (prefill, then token by token) and a training step. A spy on each transformers global
  counts transformers' calls, and a spy put in place of the package's function inside its
  dispatcher counts the calls that reached the package: each path must call its kernels, and
  every call transformers made must have reached the package (none took the torch path, no Hub
  kernel replaced it). The logits (and the loss and every gradient of the training step) must
  match the same model run on transformers' torch reference functions.
* CPU (marked cpu, run everywhere): the CUDA extensions import, and mamba_ssm found causal_conv1d's
  (it swallows a failed import); each transformers dispatcher holds the package's own function,
  not its torch fallback; a forward, decode and training step on CPU tensors go through every
  dispatcher and never reach a package (transformers 5.15 to 5.24 sent them CPU tensors).

MAMBA_SSM_TEST_DEVICE=cpu (tests/recipe/mamba_ssm/test_transformers_dry_run.py) runs the GPU tests
on CPU stand-ins of the extensions, with transformers made to send them CPU tensors; those going
through Triton kernels skip there.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import types
from collections import Counter

import pytest
from compare import assert_close  # shared/tests, on sys.path through conftest.py

try:
    import torch
except ImportError:  # collected anyway, so that conftest can report why nothing runs
    torch = None

MODELING = {"mamba": "transformers.models.mamba.modeling_mamba", "mamba2": "transformers.models.mamba2.modeling_mamba2"}
CONV = "causal_conv1d.causal_conv1d_interface"
SCAN = "mamba_ssm.ops.selective_scan_interface"
STATE_UPDATE = "mamba_ssm.ops.triton.selective_state_update"
SSD = "mamba_ssm.ops.triton.ssd_combined"
# model -> {transformers global: (package module, function it must hold)}
DISPATCH = {
    "mamba": {
        "causal_conv1d_fn": (CONV, "causal_conv1d_fn"),
        "causal_conv1d_update": (CONV, "causal_conv1d_update"),
        "mamba_inner_fn": (SCAN, "mamba_inner_fn"),
        "mamba_selective_scan": (SCAN, "selective_scan_fn"),
        "mamba_selective_state_update": (STATE_UPDATE, "selective_state_update"),
    },
    "mamba2": {
        "causal_conv1d_fn": (CONV, "causal_conv1d_fn"),
        "causal_conv1d_update": (CONV, "causal_conv1d_update"),
        "mamba2_selective_state_update": (STATE_UPDATE, "selective_state_update"),
        "mamba2_chunk_scan": (SSD, "mamba_chunk_scan_combined"),
        "mamba2_split_conv1d_scan_combined": (SSD, "mamba_split_conv1d_scan_combined"),
    },
}
# (model, path) -> the transformers globals the path calls on CUDA
PATHS = {
    ("mamba", "forward"): {"causal_conv1d_fn", "mamba_selective_scan"},
    ("mamba", "decode"): {"causal_conv1d_fn", "mamba_selective_scan", "causal_conv1d_update",
                          "mamba_selective_state_update"},
    ("mamba", "train"): {"mamba_inner_fn"},  # the fused path: the conv and the scan in one call
    ("mamba2", "forward"): {"causal_conv1d_fn", "mamba2_chunk_scan"},
    ("mamba2", "decode"): {"causal_conv1d_fn", "mamba2_chunk_scan", "causal_conv1d_update",
                           "mamba2_selective_state_update"},
    ("mamba2", "train"): {"mamba2_split_conv1d_scan_combined"},  # fused; only without a cache
}
TRITON_PATHS = {("mamba", "decode"), ("mamba2", "forward"), ("mamba2", "decode"), ("mamba2", "train")}
# (rtol, atol) of the logits, relative tolerance of the loss and of each gradient's norm. Mamba2's
# Triton kernels run their fp32 matmuls in TF32 (as test_kernels.py's MAMBA2_TOLERANCE).
TOLERANCE = {"mamba": ((1e-3, 1e-3), 5e-3), "mamba2": ((1e-2, 1e-2), 2e-2)}
BATCH, SEQLEN, PREFILL, VOCAB = 2, 40, 36, 128


def _device() -> str:
    return os.environ.get("MAMBA_SSM_TEST_DEVICE", "cuda")


@pytest.fixture(autouse=True)
def no_hub_kernels(monkeypatch):
    """Nothing from the Hub: a model built from a config is never kernelized (transformers 5.25), and
    these keep it so should that change."""
    monkeypatch.setenv("USE_HUB_KERNELS", "0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def modeling(model: str) -> types.ModuleType:
    """transformers' modeling module (imported here, not at collection: it binds the packages)."""
    return importlib.import_module(MODELING[model])


def tiny_model(model: str, seed: int = 0):
    """A two-layer model from a config, fp32, random weights. causal_conv1d wants a width of 2 to 4, and
    channel counts and strides (transformers passes channel-last views of the projection) that are
    multiples of 8: Mamba's 2 x 128, Mamba2's 2 x 256 + 2 x 16 + 8 heads."""
    module = modeling(model)
    torch.manual_seed(seed)
    if model == "mamba":
        config = module.MambaConfig(vocab_size=VOCAB, hidden_size=64, state_size=16, num_hidden_layers=2, expand=2,
                                    conv_kernel=4)
        return module.MambaForCausalLM(config)
    # SEQLEN 40 is one full chunk of 32 and a padded one
    config = module.Mamba2Config(vocab_size=VOCAB, hidden_size=128, expand=2, num_heads=8, head_dim=32, n_groups=1,
                                 state_size=16, chunk_size=32, num_hidden_layers=2, conv_kernel=4)
    return module.Mamba2ForCausalLM(config)


def _closure(obj, depth: int = 4, seen: set[int] | None = None):
    """(function, cell) for every closure cell reachable from a transformers global: the dispatcher's
    own closure, and with `kernels` installed that of the nn.Module the dispatcher was wrapped in."""
    seen = set() if seen is None else seen
    if depth < 0 or id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, types.FunctionType):
        functions = [obj]
    elif torch is not None and isinstance(obj, torch.nn.Module):
        functions = [type(obj).forward]
    else:
        return
    for function in functions:
        for cell in function.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            yield function, cell
            yield from _closure(value, depth - 1, seen)


class Dispatch:
    """One transformers global and the package function its dispatcher must hold."""

    def __init__(self, model: str, name: str) -> None:
        import transformers

        self.module, self.name = modeling(model), name
        package_module, function = DISPATCH[model][name]
        self.package_function = getattr(importlib.import_module(package_module), function)
        self.what = f"transformers {transformers.__version__}: {self.module.__name__}.{name} -> {package_module}.{function}"
        dispatcher = getattr(self.module, name, None)
        assert dispatcher is not None, f"{self.what}: no such global (transformers before 5.15 had none)"
        found = [(f, cell) for f, cell in _closure(dispatcher) if cell.cell_contents is self.package_function]
        assert found, f"{self.what}: the dispatcher does not hold the package's function (it fell back to torch)"
        self.dispatcher, self.cell = found[0]
        # functools.wraps(torch_function): the reference the dispatcher falls back to
        self.torch_reference = inspect.unwrap(self.dispatcher)
        assert self.torch_reference is not self.dispatcher and self.torch_reference.__module__ == self.module.__name__, (
            f"{self.what}: no torch reference behind the dispatcher ({self.torch_reference!r})")


def dispatchers(model: str) -> dict[str, Dispatch]:
    return {name: Dispatch(model, name) for name in DISPATCH[model]}


class Spies:
    """Counts, per transformers global, transformers' calls and the calls that reached the package."""

    def __init__(self, package_calls_allowed: bool) -> None:
        self.package_calls_allowed = package_calls_allowed
        self.transformers: Counter[str] = Counter()
        self.package: Counter[str] = Counter()

    def on_global(self, dispatch: Dispatch):
        original = getattr(dispatch.module, dispatch.name)

        def spy(*args, **kwargs):
            self.transformers[dispatch.name] += 1
            return original(*args, **kwargs)

        return spy

    def on_package(self, dispatch: Dispatch):
        def spy(*args, **kwargs):
            self.package[dispatch.name] += 1
            devices = sorted({str(a.device) for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)})
            assert self.package_calls_allowed, f"{dispatch.what}: reached the package with tensors on {devices}"
            return dispatch.package_function(*args, **kwargs)

        return spy


@contextlib.contextmanager
def spied(dispatches: dict[str, Dispatch], monkeypatch, *, package_calls_allowed: bool):
    """Spies on every dispatcher: on the transformers global (the model calls it by name) and in the
    dispatcher's closure, in place of the package function. Without package_calls_allowed, a call
    that reaches a package fails the test."""
    spies = Spies(package_calls_allowed)
    with monkeypatch.context() as patch:
        for name, dispatch in dispatches.items():
            patch.setattr(dispatch.module, name, spies.on_global(dispatch))
            patch.setattr(dispatch.cell, "cell_contents", spies.on_package(dispatch))
        yield spies


@contextlib.contextmanager
def torch_path(dispatches: dict[str, Dispatch], monkeypatch):
    """Every transformers global replaced by its dispatcher's torch reference."""
    with monkeypatch.context() as patch:
        for name, dispatch in dispatches.items():
            patch.setattr(dispatch.module, name, dispatch.torch_reference)
        yield


def run(model, path: str, ids) -> dict[str, object]:
    """The path's outputs: logits, and for a training step the loss and every parameter's gradient."""
    if path == "train":
        model.train()
        out = model(ids, labels=ids, use_cache=False)
        out.loss.backward()
        grads = {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}
        model.zero_grad(set_to_none=True)
        return {"logits": out.logits.detach(), "loss": out.loss.detach(), "grads": grads}
    model.eval()
    with torch.no_grad():
        if path == "forward":
            return {"logits": model(ids, use_cache=False).logits}
        out = model(ids[:, :PREFILL], use_cache=True)
        logits, cache = [out.logits], out.cache
        for i in range(PREFILL, ids.shape[1]):  # one token at a time on the cache
            out = model(ids[:, i:i + 1], cache=cache, use_cache=True)
            logits.append(out.logits)
            cache = out.cache
    return {"logits": torch.cat(logits, dim=1)}


def assert_relatively_close(actual, expected, rtol: float, what: str) -> None:
    """|actual - expected| <= rtol |expected| in norm: gradients span orders of magnitude."""
    err, scale = (actual - expected).norm().item(), expected.norm().item()
    assert err <= rtol * scale, f"{what}: off by {err:.3g} in norm, {err / max(scale, 1e-30):.3g} of its norm {scale:.3g}"


# ---------------------------------------------------------------------------------------------
# GPU: the models through the packaged kernels


@pytest.fixture
def fp32():
    """No TF32 in the torch reference run's matmuls and cuDNN convolutions (torch's switches)."""
    if _device() != "cuda":
        yield
        return
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@pytest.mark.parametrize(("model_name", "path"), [
    pytest.param(model, path, id=f"{model}-{path}", marks=[pytest.mark.triton] if (model, path) in TRITON_PATHS else [])
    for model, path in PATHS
])
def test_model_runs_on_the_packaged_kernels(model_name, path, monkeypatch, fp32):
    """The path calls its kernels, every dispatched call reaches the package, and the outputs match
    the torch reference functions' on the same weights and inputs."""
    dispatches = dispatchers(model_name)
    model = tiny_model(model_name).to(_device())
    ids = torch.randint(0, VOCAB, (BATCH, SEQLEN)).to(_device())
    with spied(dispatches, monkeypatch, package_calls_allowed=True) as spies:
        out = run(model, path, ids)
        called = {name for name, n in spies.transformers.items() if n}
        assert PATHS[model_name, path] <= called, f"not called: {sorted(PATHS[model_name, path] - called)}"
        assert spies.package == spies.transformers, (
            f"transformers' calls {dict(spies.transformers)}, of which reached the package {dict(spies.package)}")
        reached = spies.package.copy()
        with torch_path(dispatches, monkeypatch):
            ref = run(model, path, ids)
        assert spies.package == reached, "the torch reference run reached the package"

    (rtol, atol), rel = TOLERANCE[model_name]
    assert torch.isfinite(out["logits"]).all()
    assert_close(out["logits"], ref["logits"], rtol, atol, f"{model_name} {path} logits vs the torch path")
    if path == "train":
        assert_relatively_close(out["loss"], ref["loss"], rel, "loss vs the torch path")
        assert out["grads"].keys() == ref["grads"].keys()
        for name, grad in out["grads"].items():
            assert_relatively_close(grad, ref["grads"][name], rel, f"d{name} vs the torch path")


# ---------------------------------------------------------------------------------------------
# CPU: what transformers bound, and that CPU tensors take the torch path


@pytest.mark.cpu
def test_extensions_import():
    """The CUDA extensions load (mamba_ssm needs selective_scan_cuda), and mamba_ssm found causal_conv1d's
    kernels: it swallows a failed import of causal_conv1d, then asserts in mamba_inner_fn and
    mamba_split_conv1d_scan_combined, transformers' fused training paths."""
    import causal_conv1d_cuda  # noqa: F401
    import selective_scan_cuda  # noqa: F401
    from causal_conv1d import cpp_functions

    for name in (SCAN, SSD):
        module = importlib.import_module(name)
        assert module.causal_conv1d_fwd_function is cpp_functions.causal_conv1d_fwd_function, name
        assert module.causal_conv1d_bwd_function is cpp_functions.causal_conv1d_bwd_function, name


@pytest.mark.cpu
@pytest.mark.parametrize(("model_name", "name"), [(m, n) for m, names in DISPATCH.items() for n in names],
                         ids=[f"{m}-{n}" for m, names in DISPATCH.items() for n in names])
def test_transformers_binds_the_packaged_function(model_name, name):
    """The dispatcher holds the package's own function, and behind it transformers' torch reference."""
    Dispatch(model_name, name)  # asserts both


@pytest.mark.cpu
@pytest.mark.parametrize("model_name", list(DISPATCH))
def test_cpu_tensors_take_the_torch_path(model_name, monkeypatch):
    """A forward, a cached decode and a training step on CPU call every dispatcher, and none reaches
    its package (CUDA kernels: transformers 5.15 to 5.24 sent them CPU tensors, and failed). The
    decode's logits are the forward's: run()'s decode, which the GPU test uses, is sound."""
    dispatches = dispatchers(model_name)
    model = tiny_model(model_name)
    ids = torch.randint(0, VOCAB, (BATCH, SEQLEN))
    with spied(dispatches, monkeypatch, package_calls_allowed=False) as spies:
        outs = [run(model, path, ids) for path in ("forward", "decode", "train")]
    assert set(spies.transformers) == set(DISPATCH[model_name]), dict(spies.transformers)
    assert not spies.package, dict(spies.package)
    assert all(torch.isfinite(out["logits"]).all() for out in outs)
    assert_close(outs[1]["logits"], outs[0]["logits"], 1e-4, 1e-4, "cached decode vs forward")
