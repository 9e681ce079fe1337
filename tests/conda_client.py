"""Real conda for the tests: conda, conda-build and the `__cuda_arch` plugin (nvidia-virtual-packages), with
conda-workspaces (a second client of pixi.toml) and conda-rattler-solver (resolvo, pixi's solver, as conda's).

conda's wheels are not on PyPI: ../shared/clients/ holds them beside a checkout (CI has it); they go into a
virtual environment of their own under the cache (their pins are not ours: conda-rattler-solver 0.2.0 needs
py-rattler 0.26, the tooling 0.28), with the py-rattler-build this tooling uses, so conda-build renders with the
same rattler-build. SSM_CONDA_CONDA names another conda's Python instead (`python -m conda` must run with it,
conda-build and the plugins importable). conda runs with the classic solver (libmamba is not on PyPI) unless a
test asks for the rattler one, and writes only into the folder it is given.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.cached_venv import cached_venv
from tests.repo import REPO_ROOT

CLIENTS = REPO_ROOT.parent / "shared" / "clients"
CONDA_ENV = "SSM_CONDA_CONDA"
FINALIZING = "Python runtime state: finalizing"


def venv_from_wheels() -> Path:
    """The cached environment of ../shared/clients' wheels; made on first use (about a minute)."""
    requirements = [*map(str, sorted(CLIENTS.glob("*.whl"))), "conda-index", f"py-rattler-build=={version('py-rattler-build')}",
                    "conda-workspaces==0.12.0", "conda-rattler-solver==0.2.0"]
    return cached_venv("conda-venv", requirements) / "bin" / "python"


def conda_python() -> Path:
    """The Python that runs conda: SSM_CONDA_CONDA's, else the wheels' environment; else the test skips."""
    named = os.environ.get(CONDA_ENV)
    if named:
        return Path(named)
    if list(CLIENTS.glob("conda-*.whl")):
        return venv_from_wheels()
    pytest.skip(f"no conda: neither {CLIENTS} (conda's wheels) nor {CONDA_ENV} (a Python that runs `python -m conda`)")


@dataclass(frozen=True)
class Conda:
    """conda kept away from the machine: its configuration, caches, environments and HOME in `root`."""

    python: Path
    root: Path
    solver: str = "classic"  # or "rattler" (conda-rattler-solver), which enforces constrains on virtual packages

    def environment(self, cuda: str | None = "13.0", cuda_arch: str | None = None,
                    base: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in (base or os.environ).items() if not k.startswith(("CONDA", "_CONDA"))}
        # conda-build's rattler-build shares the user's package cache rather than filling a second one in HOME.
        env.setdefault("RATTLER_CACHE_DIR", str(Path.home() / ".cache" / "rattler" / "cache"))
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "condarc").write_text("channels: []\n")
        env.update(CONDARC=str(self.root / "condarc"), CONDA_PKGS_DIRS=str(self.root / "pkgs"),
                   CONDA_ENVS_DIRS=str(self.root / "envs"), CONDA_ROOT_PREFIX=str(self.root / "base"),
                   HOME=str(self.root / "home"), CONDA_SOLVER=self.solver, CONDA_ALWAYS_YES="true")
        env.update({name: value for name, value in (("CONDA_OVERRIDE_CUDA", cuda),
                                                    ("CONDA_OVERRIDE_CUDA_ARCH", cuda_arch)) if value})
        return env

    def run(self, *args: str, plugins: bool = True, check: bool = True, cwd: Path | None = None,
            env: dict[str, str] | None = None, **machine: str | None) -> subprocess.CompletedProcess:
        command = [str(self.python), "-m", "conda", *([] if plugins else ["--no-plugins"]), *args]
        print("$", f"CONDA_SOLVER={self.solver}", " ".join(command), flush=True)
        result = subprocess.run(command, env=self.environment(**machine, base=env), cwd=cwd, text=True, capture_output=True)
        if result.returncode == -signal.SIGABRT and FINALIZING in result.stderr and "--json" in args:
            # conda-rattler-solver's py-rattler aborts now and then as the interpreter finalizes (about 1 run in 20),
            # after conda has written its whole answer: the status is the answer's
            result.returncode = 0 if json.loads(result.stdout).get("success") else 1
        if check and result.returncode:
            raise AssertionError(f"{' '.join(args)} exited {result.returncode}:\n{result.stdout[-3000:]}\n"
                                 f"{result.stderr[-3000:]}")
        return result

    def json(self, *args: str, **kwargs) -> dict:
        """A command's --json answer; a refusal is an answer too (its exception_name and message)."""
        return json.loads(self.run(*args, "--json", check=False, **kwargs).stdout)


def linked(answer: dict, *names: str) -> dict[str, str]:
    """name -> build string of what a --json create/install would link (or linked), for `names`."""
    return {p["name"]: p["build_string"] for p in answer.get("actions", {}).get("LINK", []) if p["name"] in names}
