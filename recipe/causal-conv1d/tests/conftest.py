"""GPU gating for the package's kernel tests, and the bounded subset of upstream's tests.

Every test in this folder needs a GPU except those marked `cpu`. Without one they are skipped,
with the reason in the header and the summary (no NVIDIA driver, torch not a CUDA build, torch
sees no CUDA device). The skip becomes a failure when a GPU is required:

* CAUSAL_CONV1D_REQUIRE_GPU=1 requires one, =0 never does;
* unset, a GPU is required where the NVIDIA driver reports one (nvidia-smi lists a GPU, or
  /proc/driver/nvidia/gpus is not empty): there, a torch that cannot use it is a broken install.
  rattler-build runs package tests in a clean environment that does not pass variables through,
  so this is what makes `rattler-build test` on a GPU machine strict.

Upstream's tests/test_causal_conv1d.py (copied here from the source by the recipe) has about
10,000 parametrizations and a 10,000-iteration race test; only UPSTREAM_SUBSET runs, unless
CAUSAL_CONV1D_UPSTREAM=full (everything but the race test).

CAUSAL_CONV1D_TEST_DEVICE=cpu runs the tests on the CPU: only useful against a stand-in extension,
for checking the tests themselves without a GPU.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

UPSTREAM_FILE = "test_causal_conv1d.py"
SKIP_MARKER = "causal-conv1d GPU tests skipped:"
REQUIRED_MARKER = "causal-conv1d GPU required but unusable:"

# Upstream test -> {parameter: allowed values} and groups of parameters that move together
# (only combinations where they are all equal). Values compare as strings ("torch.float16").
_F = "__tie__"
UPSTREAM_SUBSET: dict[str, dict[str, object]] = {
    "test_causal_conv1d": {
        "dim": {4096 + 32}, "seqlen": {1, 130, 1134},
        _F: [("has_bias", "silu_activation"), ("has_initial_states", "return_final_states")],
    },
    "test_causal_conv1d_update": {"dim": {2048 + 16}, "seqlen": {1, 5}, _F: [("has_bias", "silu_activation")]},
    "test_causal_conv1d_update_with_batch_gather": {
        "dim": {2048 + 16}, "seqlen": {1, 5}, _F: [("has_bias", "silu_activation")],
    },
    "test_causal_conv1d_update_with_padding": {
        "dim": {2048 + 16}, "seqlen": {1, 5}, _F: [("has_bias", "silu_activation")],
    },
    "test_causal_conv1d_get_states": {"dim": {2048 + 16}},
    "test_causal_conv1d_varlen": {"dim": {4096 + 32}, "seqlen": {8, 151, 1134}, _F: [("has_bias", "silu_activation")]},
    "test_causal_conv1d_ref_varlen_initial_states": {},
    "test_causal_conv1d_varlen_initial_states": {_F: [("has_bias", "silu_activation")]},
    "test_causal_conv1d_varlen_padding": {"dim": {4096 + 32}, "seqlen": {128, 1024}, _F: [("has_bias", "silu_activation")]},
    "test_causal_conv1d_bwd_deterministic_reproducible": {},
    "test_causal_conv1d_bwd_deterministic_close_to_default": {},
    "test_causal_conv1d_bwd_default_mode_is_not_reproducible": {},
    # test_causal_conv1d_race_condition (10,000 iterations) never runs here.
}
UPSTREAM_NEVER = {"test_causal_conv1d_race_condition"}


def test_device() -> str:
    return os.environ.get("CAUSAL_CONV1D_TEST_DEVICE", "cuda")


def driver_gpus() -> list[str]:
    """GPUs the NVIDIA driver reports ([] without a driver)."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60).stdout
            return [line.strip() for line in out.splitlines() if line.startswith("GPU ")]
        except (OSError, subprocess.SubprocessError):
            return []
    gpus = Path("/proc/driver/nvidia/gpus")
    return sorted(p.name for p in gpus.iterdir()) if gpus.is_dir() else []


@functools.cache
def gpu_status() -> tuple[bool, str]:
    """(usable, description): why GPU tests can or cannot run here."""
    if test_device() == "cpu":
        return True, "CAUSAL_CONV1D_TEST_DEVICE=cpu (a dry run of the tests on the CPU)"
    try:
        import torch
    except ImportError as exc:
        return False, f"torch is not importable ({exc})"
    if torch.version.cuda is None:
        return False, f"torch {torch.__version__} is not a CUDA build"
    gpus = driver_gpus()
    if not gpus and not Path("/dev/nvidiactl").exists():
        return False, (
            f"no NVIDIA driver on this machine (no nvidia-smi GPU, no /proc/driver/nvidia/gpus); "
            f"torch {torch.__version__} is a CUDA {torch.version.cuda} build"
        )
    try:
        available = torch.cuda.is_available() and torch.cuda.device_count() > 0
    except Exception as exc:  # a broken driver raises here
        return False, f"torch {torch.__version__} cannot initialise CUDA: {exc}"
    if not available:
        return False, (
            f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device although the "
            f"driver reports {len(gpus) or 'a'} GPU(s): driver too old for this CUDA, or "
            f"CUDA_VISIBLE_DEVICES hides them"
        )
    major, minor = torch.cuda.get_device_capability(0)
    return True, f"{torch.cuda.get_device_name(0)} (compute capability {major}.{minor}), torch {torch.__version__}"


def gpu_required() -> bool:
    flag = os.environ.get("CAUSAL_CONV1D_REQUIRE_GPU", "").strip()
    if flag in ("1", "true", "TRUE", "yes"):
        return True
    if flag in ("0", "false", "FALSE", "no"):
        return False
    return bool(driver_gpus())


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cpu: runs without a GPU")


def pytest_report_header(config: pytest.Config) -> list[str]:
    usable, why = gpu_status()
    mode = "required" if gpu_required() else "optional"
    lines = [f"causal-conv1d GPU ({mode}): {'usable: ' if usable else 'NOT usable: '}{why}"]
    if usable and test_device() != "cpu":
        lines.append(_arch_line())
    return lines


def _arch_line() -> str:
    """Whether the extension has code for this GPU, said before hundreds of kernel tests fail."""
    try:
        import check_arch
        import torch

        path = check_arch.find_extension()
        verdict = check_arch.check(check_arch.read_fatbins(path), torch.cuda.get_device_capability(0), path.name)
        return ("causal-conv1d arch: " if verdict.ok else "causal-conv1d arch ERROR: ") + verdict.message
    except Exception as exc:  # reported, and test_arch.py fails with the details
        return f"causal-conv1d arch: could not check ({exc})"


def _upstream_missing() -> str:
    """Modules upstream's test file imports that are absent ('' when all import)."""
    missing = [m for m in ("torch", "einops", "triton") if importlib.util.find_spec(m) is None]
    return ", ".join(missing)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    # Without its imports upstream's file cannot even be collected; on a machine that needs no
    # GPU that is a skip, said in the summary; where a GPU is required, the import error shows.
    if collection_path.name == UPSTREAM_FILE and _upstream_missing() and not gpu_required():
        return True
    return None


def _upstream_selected(item: pytest.Item) -> bool:
    name = item.originalname if isinstance(item, pytest.Function) else item.name
    if name in UPSTREAM_NEVER:
        return False
    if os.environ.get("CAUSAL_CONV1D_UPSTREAM") == "full":
        return True
    rules = UPSTREAM_SUBSET.get(name)
    if rules is None:
        return False
    params = item.callspec.params if hasattr(item, "callspec") else {}
    for key, allowed in rules.items():
        if key == _F:
            for group in allowed:  # type: ignore[union-attr]
                if len({str(params[p]) for p in group if p in params}) > 1:
                    return False
        elif key in params and str(params[key]) not in {str(v) for v in allowed}:  # type: ignore[union-attr]
            return False
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, dropped = [], []
    for item in items:
        if item.path.name == UPSTREAM_FILE and not _upstream_selected(item):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    usable, why = gpu_status()
    if usable:
        return
    if gpu_required():
        return  # pytest_runtest_setup fails them instead
    for item in items:
        if not item.get_closest_marker("cpu"):
            item.add_marker(pytest.mark.skip(reason=f"no usable GPU: {why}"))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Upstream's own skipif(not torch.cuda.is_available()) must not hide a missing GPU either.
    if gpu_required() and not gpu_status()[0] and not item.get_closest_marker("cpu"):
        pytest.fail(f"{REQUIRED_MARKER} {gpu_status()[1]}", pytrace=False)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ANN001
    usable, why = gpu_status()
    if _upstream_missing() and (Path(str(config.rootpath)) / "tests" / UPSTREAM_FILE).exists():
        terminalreporter.write_line(f"upstream {UPSTREAM_FILE} not collected: missing {_upstream_missing()}")
    if not usable:
        word = REQUIRED_MARKER if gpu_required() else SKIP_MARKER
        terminalreporter.write_line(f"{word} {why}")
