"""What the doctor knows about the machine and the target environment, and how it finds out.

Gathering never raises for a missing piece (no driver, no torch, a crashing interpreter): the gap
is recorded and the rules report it. Probes holds every source, so tests replace any of them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ssm_conda.archs import version_key
from ssm_conda.machine import DriverInfo, GpuInfo, driver_info
from ssm_conda.paths import REPO_ROOT

PACKAGE = "causal-conv1d"
WHEEL_TAG_RE = re.compile(r"cu(\d+)torch(\d+\.\d+)cxx11abi(TRUE|FALSE)", re.IGNORECASE)
NVCC_RELEASE_RE = re.compile(r"release (\d+\.\d+)")
PROBE_SCRIPT = Path(__file__).with_name("interpreter_probe.py")
PROBE_MARK = "@@doctor "


def major(version: str) -> int:
    return version_key(version)[0]


@dataclass
class NvccInfo:
    path: str
    version: str | None  # "13.0"


@dataclass
class InstalledDist:
    """A Python distribution found in the target environment."""

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
        for text in (self.version, self.url or ""):
            match = WHEEL_TAG_RE.search(text)
            if match:
                return {
                    "cuda_major": match.group(1)[:2] if len(match.group(1)) > 2 else match.group(1),
                    "torch": match.group(2),
                    "cxx11_abi": match.group(3).upper() == "TRUE",
                }
        return None


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
        return f"{match.group(1)}.{match.group(2)}" if match else None


@dataclass
class InterpreterInfo:
    executable: str
    version: str | None = None  # "3.12.4"
    prefix: str | None = None
    torch: TorchInfo | None = None  # None: torch is not installed
    causal_conv1d: InstalledDist | None = None
    extension_error: str | None = None  # why `import causal_conv1d_cuda` failed
    extension_ok: bool | None = None
    error: str | None = None  # the probe itself failed

    @property
    def minor(self) -> str | None:
        return ".".join(self.version.split(".")[:2]) if self.version else None


@dataclass
class EnvInfo:
    kind: str | None  # "pixi", "conda", "venv" or None
    name: str | None = None
    prefix: str | None = None
    manifest: str | None = None
    this_project: bool = False  # the pixi workspace is this packaging repository


@dataclass
class Facts:
    driver: DriverInfo
    interpreter: InterpreterInfo
    env: EnvInfo
    nvcc: NvccInfo | None
    conda_override_cuda: str | None = None

    @property
    def gpus(self) -> list[GpuInfo]:
        return self.driver.gpus

    @property
    def compute_caps(self) -> list[str]:
        """The distinct compute capabilities of the GPUs, sorted."""
        return sorted({g.compute_cap for g in self.gpus if g.compute_cap}, key=version_key)

    @property
    def driver_cuda(self) -> str | None:
        """The CUDA version a solve sees: the driver's, else CONDA_OVERRIDE_CUDA."""
        return self.driver.cuda or self.conda_override_cuda


# --------------------------------------------------------------------------------------------
# The target interpreter, probed in a subprocess (interpreter_probe.py)


def _dist_from_probe(raw: Mapping[str, Any] | None) -> InstalledDist | None:
    if not raw:
        return None
    url = None
    if raw.get("direct_url"):
        try:
            url = json.loads(raw["direct_url"]).get("url")
        except (ValueError, AttributeError):
            url = None
    installer = (raw.get("installer") or "").strip() or None
    return InstalledDist(version=str(raw["version"]), installer=installer, url=url)


def _describe_rc(returncode: int) -> str:
    return f"signal {-returncode}" if returncode < 0 else f"exit status {returncode}"


def _probe_stages(stdout: str) -> dict[str, dict[str, Any]]:
    stages = {}
    for line in stdout.splitlines():
        if line.startswith(PROBE_MARK):
            try:
                record = json.loads(line[len(PROBE_MARK) :])
            except ValueError:
                continue
            stages[record.get("stage", "")] = record
    return stages


def _torch_from_stages(stages: Mapping[str, dict[str, Any]], returncode: int) -> TorchInfo | None:
    torch_dist = _dist_from_probe(stages.get("dists", {}).get("torch"))
    stage = stages.get("torch")
    if stage is not None and stage.get("missing"):
        stage = None
    if torch_dist is None and stage is None:
        return None
    torch = TorchInfo(dist=torch_dist)
    if stage is not None and stage.get("ok"):
        torch.version, torch.cuda, torch.cxx11_abi = stage.get("version"), stage.get("cuda"), stage.get("cxx11_abi")
    elif stage is not None:
        torch.import_error = stage.get("error")
    elif returncode != 0 and torch_dist is not None:
        torch.import_error = f"`import torch` crashed the interpreter ({_describe_rc(returncode)})"
    if torch.version is None and torch_dist is not None:
        torch.version = torch_dist.version
    return torch


def parse_probe_output(executable: str, stdout: str, returncode: int, stderr: str = "") -> InterpreterInfo:
    """Turn the probe's `@@doctor {json}` lines into an InterpreterInfo (tolerates a crash)."""
    stages = _probe_stages(stdout)
    info = InterpreterInfo(executable=executable)
    if "python" in stages:
        info.version = stages["python"].get("version")
        info.prefix = stages["python"].get("prefix")
        info.executable = stages["python"].get("executable") or executable
    else:
        last = (stderr.strip().splitlines() or [f"exit status {returncode}"])[-1]
        info.error = f"could not run {executable}: {last}"
    info.causal_conv1d = _dist_from_probe(stages.get("dists", {}).get("causal_conv1d"))
    info.torch = _torch_from_stages(stages, returncode)
    if "extension" in stages:
        info.extension_ok = bool(stages["extension"].get("ok"))
        info.extension_error = stages["extension"].get("error")
    elif returncode != 0 and stages.get("torch", {}).get("ok"):
        info.extension_ok = False
        info.extension_error = f"`import causal_conv1d_cuda` crashed ({_describe_rc(returncode)})"
    return info


def probe_interpreter(executable: str, import_torch: bool = True, timeout: float = 180) -> InterpreterInfo:
    """Ask the target interpreter about itself, torch and causal-conv1d, in a subprocess."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if not import_torch:
        env["DOCTOR_NO_IMPORT"] = "1"
    try:
        result = subprocess.run(
            [executable, "-c", PROBE_SCRIPT.read_text()],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=Path(executable).parent if Path(executable).is_absolute() else None,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        info = parse_probe_output(executable, out, 1)
        info.error = f"probing {executable} timed out after {timeout:.0f}s"
        return info
    except OSError as exc:
        return InterpreterInfo(executable=executable, error=f"could not run {executable}: {exc}")
    return parse_probe_output(executable, result.stdout, result.returncode, result.stderr)


# --------------------------------------------------------------------------------------------
# The environment around it, and nvcc


def conda_records(prefix: str | None) -> dict[str, tuple[str, str]]:
    """name -> (version, build) for every package recorded in PREFIX/conda-meta."""
    if not prefix:
        return {}
    records = {}
    for path in Path(prefix, "conda-meta").glob("*.json"):
        parts = path.stem.rsplit("-", 2)
        if len(parts) == 3:
            records[parts[0]] = (parts[1], parts[2])
    return records


def _same_prefix(active: str | None, interpreter_prefix: str | None) -> bool:
    if not active or not interpreter_prefix:
        return True
    return Path(active).resolve() == Path(interpreter_prefix).resolve()


def detect_env(environ: Mapping[str, str], interpreter_prefix: str | None) -> EnvInfo:
    """The environment the target interpreter lives in, named by pixi/conda/venv activation."""
    prefix = environ.get("CONDA_PREFIX")
    active_here = _same_prefix(prefix, interpreter_prefix)
    pixi_root = environ.get("PIXI_PROJECT_ROOT")
    if (pixi_root or environ.get("PIXI_ENVIRONMENT_NAME")) and active_here:
        return EnvInfo(
            "pixi",
            environ.get("PIXI_ENVIRONMENT_NAME", "default"),
            prefix,
            environ.get("PIXI_PROJECT_MANIFEST") or pixi_root,
            this_project=bool(pixi_root) and Path(pixi_root).resolve() == REPO_ROOT.resolve(),
        )
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


def _nvcc_version(path: str, run: Callable[[list[str]], subprocess.CompletedProcess[str]] | None) -> str | None:
    runner = run or (lambda cmd: subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False))
    try:
        out = runner([path, "--version"]).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = NVCC_RELEASE_RE.search(out)
    return match.group(1) if match else None


def find_nvcc(
    environ: Mapping[str, str],
    which: Callable[[str], str | None] = shutil.which,
    run: Callable[[list[str]], subprocess.CompletedProcess[str]] | None = None,
) -> NvccInfo | None:
    """The nvcc torch's cpp_extension would use: $CUDA_HOME, $CUDA_PATH, PATH, /usr/local/cuda."""
    candidates = [str(Path(environ[var], "bin", "nvcc")) for var in ("CUDA_HOME", "CUDA_PATH") if environ.get(var)]
    found = which("nvcc")
    candidates += [found] if found else []
    candidates.append("/usr/local/cuda/bin/nvcc")
    for path in candidates:
        if os.access(path, os.X_OK):
            return NvccInfo(path, _nvcc_version(path, run))
    return None


@dataclass
class Probes:
    """Where facts come from; tests replace any of these."""

    driver: Callable[[], DriverInfo] = driver_info
    interpreter: Callable[[str, bool], InterpreterInfo] = probe_interpreter
    nvcc: Callable[[Mapping[str, str]], NvccInfo | None] = find_nvcc
    conda_records: Callable[[str | None], dict[str, tuple[str, str]]] = conda_records
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


def _mark_conda_installs(interp: InterpreterInfo, records: Mapping[str, tuple[str, str]]) -> None:
    """conda-meta records say which of torch and causal-conv1d conda installed (and their builds)."""
    if "pytorch" in records and interp.torch is not None and interp.torch.dist is not None:
        interp.torch.dist.conda_build = records["pytorch"][1]
    if PACKAGE not in records:
        return
    version, build = records[PACKAGE]
    if interp.causal_conv1d is None:
        interp.causal_conv1d = InstalledDist(version, "conda", conda_build=build)
    else:
        interp.causal_conv1d.conda_build = build


def gather_facts(executable: str, probes: Probes | None = None, import_torch: bool = True) -> Facts:
    probes = probes or Probes()
    interp = probes.interpreter(executable, import_torch)
    env = detect_env(probes.environ, interp.prefix)
    _mark_conda_installs(interp, probes.conda_records(interp.prefix or env.prefix))
    return Facts(
        driver=probes.driver(),
        interpreter=interp,
        env=env,
        nvcc=probes.nvcc(probes.environ),
        conda_override_cuda=probes.environ.get("CONDA_OVERRIDE_CUDA") or None,
    )
