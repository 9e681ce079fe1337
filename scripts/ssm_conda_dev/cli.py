"""ssm-conda-dev: the tools for developing causal-conv1d-conda, apart from what a channel maintainer runs
(ssm-conda). Parsed and run as ssm-conda's commands are: -v and --workspace anywhere, `ssm-conda-dev
COMMAND --help`, bad input one line with exit status 2.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ssm_conda import cli
from ssm_conda.cli import Command
from ssm_conda.console import exit_without_finalizing

COMMANDS = (
    Command("ci-matrix", "ssm_conda_dev.ci_matrix", "the GitHub Actions jobs from variants/ (one per CUDA, pytorch minor "
            "and GPU generation) and their expected times"),
    Command("sync-matrix", "ssm_conda_dev.sync_matrix", "set the pytorch minors in variants/ to those a channel "
            "(conda-forge) builds with each CUDA version, and add or drop CUDA lines (the weekly workflow's pull request)"),
    Command("standin", "ssm_conda_dev.standin.command", "build the offline stand-in channel (conda-forge names, this "
            "machine's binaries) for machines without conda-forge"),
    Command("bench-build", "ssm_conda_dev.benchmarks.build_times", "time real builds: the compiler cache across "
            "Pythons, all architectures against one"),
    Command("bench-zstd", "ssm_conda_dev.benchmarks.package_compression", "re-pack built packages at several zstd "
            "levels: what a higher level buys in size, against its time"),
    Command("gpu-test", "ssm_conda_dev.gpu_check", "re-run built packages' test sections on this machine's GPU "
            "(rattler-build test)"),
    Command("gpu-bundle", "ssm_conda_dev.gpu_bundle.command", "one file that tests and benchmarks a variant's packages on a "
            "GPU node with pip's torch (no conda, no network)"),
    Command("bench-kernels", "ssm_conda_dev.benchmarks.kernels", "time the installed kernels against the reference "
            "and a device-to-device copy (GPU needed)"),
)
SSM_CONDA_DEV = cli.Tool("ssm-conda-dev", __doc__ or "", COMMANDS)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse and run one subcommand; returns the exit status (tests call this)."""
    return cli.main(argv, SSM_CONDA_DEV)


def entry() -> None:
    """The console script, ending as ssm-conda's does."""
    exit_without_finalizing(main(sys.argv[1:]))
