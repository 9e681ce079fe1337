"""What the doctor knows about the machine and the target environment, and how it finds out. Gathering never
raises for a missing piece (no driver, no torch, a crashing interpreter): the gap is recorded and the rules report it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ssm_conda.archs import version_key
from ssm_conda.console import UsageError
from ssm_conda.machine import DriverInfo, driver_info
from ssm_conda.matrix import TARGET_PLATFORM
from ssm_conda.paths import is_workspace
from ssm_conda.project import PACKAGES

TORCH_BUILD_RE = re.compile(r"_torch(\d)(\d+)_")  # this project's build strings: cuda130_py312_torch213_h<hash>_0
WHEEL_TAG_RE = re.compile(r"cu(\d+)torch(\d+\.\d+)cxx11abi(TRUE|FALSE)", re.IGNORECASE)
PROBE_SCRIPT = Path(__file__).with_name("interpreter_probe.py")
PROBE_MARK = "@@doctor "


def major(version: str) -> int:
    return version_key(version)[0]


@dataclass
class InstalledDist:  # a Python distribution found in the target environment
    version: str
    installer: str | None = None  # INSTALLER file: "pip", "uv", "conda", ...
    url: str | None = None  # direct_url.json's url, when pip installed from a URL/file
    conda_build: str | None = None  # build string when conda-meta holds a record of it

    @property
    def from_conda(self) -> bool:
        return self.conda_build is not None or (self.installer or "").lower() == "conda"

    @property
    def wheel_tag(self) -> dict[str, Any] | None:
        """Upstream release wheels carry cu12torch2.6cxx11abiTRUE in the version or URL."""
        match = WHEEL_TAG_RE.search(self.version) or WHEEL_TAG_RE.search(self.url or "")
        return {"cuda_major": match[1][:2], "torch": match[2], "cxx11_abi": match[3].upper() == "TRUE"} if match else None

    @property
    def torch_minor(self) -> str | None:
        """The torch minor it was built for, from this project's build string or an upstream wheel's tag."""
        match, tag = TORCH_BUILD_RE.search(self.conda_build or ""), self.wheel_tag
        return f"{match[1]}.{match[2]}" if match else tag["torch"] if tag else None


@dataclass
class TorchInfo:
    version: str | None = None  # "2.13.0+cu130" or "2.13.0"
    cuda: str | None = None  # torch.version.cuda; None for a CPU build
    cxx11_abi: bool | None = None
    dist: InstalledDist | None = None
    import_error: str | None = None  # why `import torch` failed

    @property
    def minor(self) -> str | None:
        match = re.match(r"(\d+)\.(\d+)", self.version or (self.dist.version if self.dist else ""))
        return f"{match[1]}.{match[2]}" if match else None


@dataclass
class InterpreterInfo:
    executable: str
    version: str | None = None  # "3.12.4"
    prefix: str | None = None
    torch: TorchInfo | None = None  # None: torch is not installed
    causal_conv1d: InstalledDist | None = None  # one field per package of ssm_conda.project, named by its module
    mamba_ssm: InstalledDist | None = None
    extensions: dict[str, str | None] = field(default_factory=dict)  # each one found: None, or why `import` failed
    error: str | None = None  # the probe itself failed

    @property
    def minor(self) -> str | None:
        return ".".join(self.version.split(".")[:2]) if self.version else None

    def dist(self, package: str) -> InstalledDist | None:
        return getattr(self, next(p.module for p in PACKAGES if p.name == package))


@dataclass
class EnvInfo:
    kind: str | None  # "pixi", "conda", "venv" or None
    name: str | None = None
    prefix: str | None = None
    manifest: str | None = None
    this_project: bool = False  # the pixi workspace is this packaging repository


@dataclass(frozen=True)
class CondaInfo:  # the conda on PATH: what `conda info --json` reports
    version: str
    virtual: dict[str, str]  # virtual package -> version: __cuda 13.0, __cuda_arch 9.0 (the plugin's)


@dataclass
class Facts:
    driver: DriverInfo
    interpreter: InterpreterInfo
    env: EnvInfo
    conda_override_cuda: str | None = None
    platform: str = TARGET_PLATFORM  # conda's name of this machine's platform: whose packages it installs
    conda: CondaInfo | None = None  # None: no conda found

    @property
    def driver_cuda(self) -> str | None:
        """The CUDA version a solve sees: the driver's, else CONDA_OVERRIDE_CUDA."""
        return self.driver.cuda or self.conda_override_cuda


def parse_probe_output(executable: str, stdout: str, returncode: int, stderr: str = "") -> InterpreterInfo:
    """Turn the probe's `@@doctor {json}` lines into an InterpreterInfo (tolerates a crash)."""
    stages: dict[str, dict[str, Any]] = {}
    for line in stdout.splitlines():
        if line.startswith(PROBE_MARK):
            with contextlib.suppress(ValueError):  # a line cut short by a crash
                record = json.loads(line[len(PROBE_MARK) :])
                stage = record.pop("stage", "")
                stages[f"{stage} {record['name']}" if stage == "extension" else stage] = record
    crash = f"signal {-returncode}" if returncode < 0 else f"exit status {returncode}"
    python = stages.get("python", {})
    dists = {name: InstalledDist(**raw) for name, raw in stages.get("dists", {}).items() if raw}
    info = InterpreterInfo(python.get("executable") or executable, python.get("version"), python.get("prefix"),
                           **{package.module: dists.get(package.module) for package in PACKAGES})
    if "python" not in stages:
        info.error = f"could not run {executable}: {(stderr.strip().splitlines() or [crash])[-1]}"
    torch_dist = dists.get("torch")
    torch = stages.get("torch")  # absent: not importable, not imported (--no-import), or the import crashed
    if torch is not None or torch_dist is not None:
        info.torch = TorchInfo(**(torch or {}), dist=torch_dist)
        if torch is None and returncode != 0:
            info.torch.import_error = f"`import torch` crashed the interpreter ({crash})"
        info.torch.version = info.torch.version or (torch_dist.version if torch_dist else None)
    info.extensions = {name: f"`import {name}` crashed the interpreter ({crash})" if record.get("crashed") else record["error"]
                       for name, record in ((k.split()[1], v) for k, v in stages.items() if k.startswith("extension "))}
    return info


def probe_interpreter(executable: str, import_torch: bool = True, timeout: float = 180) -> InterpreterInfo:
    """Ask the target interpreter about itself, torch and this project's packages, in a subprocess."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    asked = json.dumps({"import_torch": import_torch, "packages": [asdict(p) for p in PACKAGES]})
    try:
        result = subprocess.run([executable, "-c", PROBE_SCRIPT.read_text(), asked], capture_output=True, text=True,
                                timeout=timeout, env=env, cwd=Path(executable).parent if Path(executable).is_absolute() else None)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return replace(parse_probe_output(executable, out, 1), error=f"probing {executable} timed out after {timeout:.0f}s")
    except OSError as exc:
        return InterpreterInfo(executable=executable, error=f"could not run {executable}: {exc}")
    return parse_probe_output(executable, result.stdout, result.returncode, result.stderr)


def conda_records(prefix: str | None) -> dict[str, tuple[str, str]]:
    """name -> (version, build) for every package recorded in PREFIX/conda-meta."""
    stems = (path.stem.rsplit("-", 2) for path in Path(prefix, "conda-meta").glob("*.json")) if prefix else ()
    return {parts[0]: (parts[1], parts[2]) for parts in stems if len(parts) == 3}


def _same_prefix(active: str | None, interpreter_prefix: str | None) -> bool:
    return not active or not interpreter_prefix or Path(active).resolve() == Path(interpreter_prefix).resolve()


def detect_env(environ: Mapping[str, str], interpreter_prefix: str | None) -> EnvInfo:
    """The environment the target interpreter lives in, named by pixi/conda/venv activation."""
    prefix, pixi_root = environ.get("CONDA_PREFIX"), environ.get("PIXI_PROJECT_ROOT")
    active_here = _same_prefix(prefix, interpreter_prefix)
    if (pixi_root or environ.get("PIXI_ENVIRONMENT_NAME")) and active_here:
        this_project = bool(pixi_root) and is_workspace(Path(pixi_root))
        return EnvInfo("pixi", environ.get("PIXI_ENVIRONMENT_NAME", "default"), prefix,
                       environ.get("PIXI_PROJECT_MANIFEST") or pixi_root, this_project)
    if prefix and active_here:
        return EnvInfo("conda", environ.get("CONDA_DEFAULT_ENV") or Path(prefix).name, prefix)
    if interpreter_prefix and Path(interpreter_prefix, "conda-meta").is_dir():
        return EnvInfo("conda", Path(interpreter_prefix).name + " (not activated)", interpreter_prefix)
    venv = environ.get("VIRTUAL_ENV")
    if venv and _same_prefix(venv, interpreter_prefix):
        return EnvInfo("venv", Path(venv).name, venv)
    if interpreter_prefix and Path(interpreter_prefix, "pyvenv.cfg").is_file():
        return EnvInfo("venv", Path(interpreter_prefix).name + " (not activated)", interpreter_prefix)
    return EnvInfo(None)


def conda_info(environ: Mapping[str, str]) -> CondaInfo | None:
    """The conda on PATH (or $CONDA_EXE), asked for its virtual packages; None where there is none or it fails."""
    executable = environ.get("CONDA_EXE") or (shutil.which("conda", path=environ["PATH"]) if environ.get("PATH") else None)
    try:
        data = json.loads(subprocess.run([executable, "info", "--json"], capture_output=True, text=True, timeout=60,
                                         env=dict(environ)).stdout) if executable else None
        return CondaInfo(str(data["conda_version"]), {v[0]: v[1] for v in data["virtual_pkgs"]}) if data else None
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError, IndexError):
        return None


@dataclass
class Probes:  # where facts come from; tests replace any of these
    driver: Callable[[], DriverInfo] = driver_info
    interpreter: Callable[[str, bool], InterpreterInfo] = probe_interpreter
    conda_records: Callable[[str | None], dict[str, tuple[str, str]]] = conda_records
    conda: Callable[[Mapping[str, str]], CondaInfo | None] = conda_info
    platform: str = TARGET_PLATFORM
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


def gather_facts(executable: str, probes: Probes | None = None, import_torch: bool = True) -> Facts:
    probes = probes or Probes()
    if (override := probes.environ.get("CONDA_OVERRIDE_CUDA")) and not re.fullmatch(r"\d+(\.\d+)*", override):
        raise UsageError(f"CONDA_OVERRIDE_CUDA={override} is not a CUDA version; accepted: 12.9, 13.0 and so on, or empty")
    interp = probes.interpreter(executable, import_torch)
    env = detect_env(probes.environ, interp.prefix)
    records = probes.conda_records(interp.prefix or env.prefix)  # which of torch and our packages conda installed, and builds
    if "pytorch" in records and interp.torch is not None and interp.torch.dist is not None:
        interp.torch.dist.conda_build = records["pytorch"][1]
    for package in (p for p in PACKAGES if p.name in records):
        version, build = records[package.name]
        setattr(interp, package.module, replace(interp.dist(package.name) or InstalledDist(version, "conda"), conda_build=build))
    return Facts(probes.driver(), interp, env, override or None, probes.platform, probes.conda(probes.environ))
