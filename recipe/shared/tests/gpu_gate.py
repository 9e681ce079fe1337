"""GPU gating shared by the packages' kernel tests (recipe/<package>/tests/conftest.py).

Every test of a package's test folder needs a GPU except those marked `cpu`. Without one they are
skipped, with the reason in the header and the summary (no NVIDIA driver, torch not a CUDA build,
torch sees no CUDA device). The skip becomes a failure when a GPU is required:

* <PREFIX>_REQUIRE_GPU=1 requires one, =0 never does;
* unset, a GPU is required where the NVIDIA driver reports one (nvidia-smi lists a GPU, or
  /proc/driver/nvidia/gpus is not empty): there, a torch that cannot use it is a broken install.
  rattler-build runs package tests in a clean environment that does not pass variables through,
  so this is what makes `rattler-build test` on a GPU machine strict.

<PREFIX>_TEST_DEVICE=cpu runs the tests on the CPU: only useful against a stand-in extension, for
checking the tests themselves without a GPU.

A package's conftest makes one Gate("causal-conv1d") (prefix CAUSAL_CONV1D_) and calls it from
its pytest hooks. The packages ship this file through a path source (recipe.yaml: source
`path: shared`, a link to ../shared, target_directory `shared`; test files `source: [shared/tests/]`), so in the
test folder it lies in shared/tests/ beside the package's tests/, as recipe/shared/tests lies
beside recipe/<package>/tests here.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest


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


class Gate:
    """The GPU gate of one package: its variables (<PREFIX>_*), messages and pytest hook bodies."""

    def __init__(self, package: str) -> None:
        self.package = package
        self.prefix = package.upper().replace("-", "_") + "_"
        self.skip_marker = f"{package} GPU tests skipped:"
        self.required_marker = f"{package} GPU required but unusable:"

    def test_device(self) -> str:
        return os.environ.get(f"{self.prefix}TEST_DEVICE", "cuda")

    @functools.cache  # noqa: B019 (one Gate per package and process)
    def gpu_status(self) -> tuple[bool, str]:
        """(usable, description): why GPU tests can or cannot run here."""
        if self.test_device() == "cpu":
            return True, f"{self.prefix}TEST_DEVICE=cpu (a dry run of the tests on the CPU)"
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

    def gpu_required(self) -> bool:
        flag = os.environ.get(f"{self.prefix}REQUIRE_GPU", "").strip()
        if flag in ("1", "true", "TRUE", "yes"):
            return True
        if flag in ("0", "false", "FALSE", "no"):
            return False
        return bool(driver_gpus())

    # -- pytest hook bodies ------------------------------------------------------------------

    def configure(self, config: pytest.Config) -> None:
        config.addinivalue_line("markers", "cpu: runs without a GPU")

    def header_line(self) -> str:
        usable, why = self.gpu_status()
        mode = "required" if self.gpu_required() else "optional"
        return f"{self.package} GPU ({mode}): {'usable: ' if usable else 'NOT usable: '}{why}"

    def skip_without_gpu(self, items: list[pytest.Item]) -> None:
        """Mark every test not marked `cpu` skipped, with the reason, when no GPU is usable (and none required)."""
        usable, why = self.gpu_status()
        if usable or self.gpu_required():
            return  # when required, runtest_setup fails them instead
        for item in items:
            if not item.get_closest_marker("cpu"):
                item.add_marker(pytest.mark.skip(reason=f"no usable GPU: {why}"))

    def runtest_setup(self, item: pytest.Item) -> None:
        # A test's own skipif(not torch.cuda.is_available()) must not hide a missing GPU either.
        if self.gpu_required() and not self.gpu_status()[0] and not item.get_closest_marker("cpu"):
            pytest.fail(f"{self.required_marker} {self.gpu_status()[1]}", pytrace=False)

    def summary_line(self) -> str | None:
        usable, why = self.gpu_status()
        if usable:
            return None
        return f"{self.required_marker if self.gpu_required() else self.skip_marker} {why}"
