import importlib.util
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conda_client import Conda, conda_python

REPO_ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--slow", action="store_true", help="also run the end-to-end build")
    parser.addoption("--aarch64-mamba", action="store_true",
                     help="with --slow: also cross-build mamba-ssm for linux-aarch64 and construct it under qemu "
                          "(about 13 minutes more, beyond what CI's time holds)")
    parser.addoption("--torch-next", action="store_true",
                     help="with --slow: also build both packages against PyPI's next pytorch minor in a stand-in of its "
                          "own (tests/test_end_to_end_torch_next.py, about 25 minutes more)")
    parser.addoption("--python314", action="store_true",
                     help="with --slow: also import the built packages on CPython 3.14, Debian sid's, with torch's "
                          "cp314 wheel (tests/python314.py: about 1.2 GB of downloads, 5 GB on disk, a minute more)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skips = {"slow": (not config.getoption("--slow"), "end-to-end build: run with --slow"),
             "aarch64_mamba": (not config.getoption("--aarch64-mamba"),
                               "mamba-ssm's linux-aarch64 build (about 13 min): run with --slow --aarch64-mamba"),
             "torch_next": (not config.getoption("--torch-next"),
                            "the next pytorch minor (about 25 min): run with --slow --torch-next"),
             "python314": (not config.getoption("--python314"),
                           "CPython 3.14 from Debian sid and torch's cp314 wheel (1.2 GB): run with --slow --python314")}
    for item in items:
        for marker, (skipped, reason) in skips.items():
            if skipped and marker in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def sdist() -> Path:
    """The pinned upstream sdist, downloaded once into the cache and sha-checked."""
    from ssm_conda_dev.sdist import fetch_sdist

    return fetch_sdist()


@pytest.fixture(scope="session")
def cpu_causal_conv1d(tmp_path_factory, sdist) -> list[Path]:
    """sys.path entries giving upstream's causal_conv1d package on the CPU stand-in extension.

    Upstream's Python interface comes from the pinned sdist; tests/recipe/causal_conv1d/cpu_kernel replaces
    the compiled causal_conv1d_cuda (first on the path: the patched sdist has its own causal_conv1d_cuda.py, which
    loads the compiled kernels). The kernel tests and the benchmark run on it without a GPU.
    """
    from ssm_conda_dev.sdist import unpack_patched

    # Not a skip: without torch these checks would silently never run (requirements-dev.txt has it).
    assert importlib.util.find_spec("torch"), "the CPU stand-in needs torch: pip install -r requirements-dev.txt"
    del sdist  # downloaded by its fixture; unpack_patched reads it from the cache
    root = unpack_patched(tmp_path_factory.mktemp("sdist"))
    assert (root / "causal_conv1d" / "cpp_functions.py").is_file()
    return [REPO_ROOT / "tests" / "recipe" / "causal_conv1d" / "cpu_kernel", root]


@pytest.fixture(scope="session")
def python_b() -> tuple[str, Path]:
    """A second CPython (X.Y, prefix) with a shared libpython, for the variant that differs in Python alone."""
    from tests.standin_channel import second_python

    return second_python()


@pytest.fixture(scope="session")
def standin(python_b) -> Path:
    """The offline stand-in channel (this Python's and Python B's packages), built once per session."""
    from tests.standin_channel import build_standin

    return build_standin(python_b)


@pytest.fixture(scope="session")
def standin_aarch64(standin) -> Path:
    """The stand-in channel with linux-aarch64's packages added, for the cross builds."""
    from tests.standin_channel import add_aarch64

    return add_aarch64(standin)


@pytest.fixture(autouse=True, scope="session")
def workspace_is_this_checkout():
    """In-process commands find this checkout wherever a test runs them from (a temporary folder, too)."""
    from ssm_conda.cli import WORKSPACE_ENV
    from ssm_conda.paths import choose_workspace

    os.environ[WORKSPACE_ENV] = str(REPO_ROOT)  # and the commands tests run as subprocesses
    choose_workspace(REPO_ROOT)


@pytest.fixture(autouse=True)
def workspace_chosen_per_test(workspace_is_this_checkout: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another checkout a test's command line chose (--workspace, SSM_CONDA_WORKSPACE) ends with the test: the choice
    is the process's (ssm_conda.paths), made once per command line."""
    from ssm_conda import paths

    monkeypatch.setattr(paths, "_chosen", paths._chosen)  # restored afterwards


@pytest.fixture(scope="module")
def conda(tmp_path_factory) -> Iterator[Conda]:
    """Real conda (tests/conda_client.py) with a root of its own, removed with the module: its package
    cache holds GBs of extracted packages."""
    client = Conda(conda_python(), tmp_path_factory.mktemp("conda"))
    yield client
    shutil.rmtree(client.root, ignore_errors=True)
