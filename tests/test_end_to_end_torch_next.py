"""Both recipes against the next pytorch minor, which PyPI has and conda-forge does not yet (issue 43): a stand-in
channel of its own (`ssm-conda-dev standin --torch 2.14`), then `ssm-conda build --torch 2.14` (a selector outside
variants/ is an override: variants/ lists a minor only once conda-forge builds it), causal-conv1d and then mamba-ssm,
each with its test section (import, the arch checks, pip check) after the build. torch 2.14's headers refuse C++
below 20: the compiles must get torch's -std=c++20 and no hard-coded -std=c++17 (mamba-ssm's patch 0006).

About 25 minutes on 2 cores beyond the rest, which CI's time does not hold: it runs with --slow --torch-next."""

import subprocess
import sys

import pytest
from ssm_conda.paths import cache_dir

from tests.standin_channel import CUDA, GENERATION, RUNNING, without_system_cuda

TORCH_NEXT = "2.14"  # PyPI's newest minor with CUDA 13.0 wheels; conda-forge's newest is 2.13


@pytest.mark.slow
@pytest.mark.torch_next
def test_both_recipes_build_against_the_next_pytorch(tmp_path):
    channel = cache_dir() / f"standin-torch-{TORCH_NEXT}"
    subprocess.run([sys.executable, "-m", "ssm_conda_dev", "standin", "--torch", TORCH_NEXT, "--output-dir", str(channel)],
                   check=True)
    env = {**without_system_cuda(), "SSM_CONDA_BUILD_ROOT": str(cache_dir() / "torch-next-build-root"),
           "SSM_CONDA_CCACHE_DIR": str(cache_dir() / "ccache")}
    build = subprocess.run([sys.executable, "-m", "ssm_conda", "build", "--channel", str(channel), "--cuda", CUDA,
                            "--python", RUNNING, "--torch", TORCH_NEXT, "--generation", GENERATION, "--output-dir",
                            str(tmp_path / "out")], env=env, text=True, capture_output=True)
    print(build.stdout[-6000:], build.stderr, sep="\n")
    assert build.returncode == 0, build.stderr
    torch = TORCH_NEXT.replace(".", "")
    for name in ("causal-conv1d", "mamba-ssm"):
        (package,) = (tmp_path / "out" / "linux-64").glob(f"{name}-*_torch{torch}_{GENERATION}_*.conda")
        log = next((tmp_path / "out" / "build-logs").glob(f"{name}-*_torch{torch}_*.log")).read_text(errors="replace")
        compiles = [line for line in log.splitlines() if " -c " in line and ("nvcc" in line or "c++" in line)]
        assert compiles and all("-std=c++20" in line and "-std=c++17" not in line for line in compiles), name
        assert "GPU tests skipped" in log, f"{name}'s test section did not run to its GPU gate"
        print(f"{package.name}: {package.stat().st_size / 1e6:.1f} MB", file=sys.stderr)
