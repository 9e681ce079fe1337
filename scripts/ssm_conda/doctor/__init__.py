"""Which causal-conv1d package fits this machine, and what will go wrong with the others.

    python scripts/doctor.py [--interpreter PATH] [--channel NAME|URL|DIR] [--json]

Reads the NVIDIA driver (version, highest CUDA it supports), each GPU's compute capability, the
target Python's torch (version, CUDA, C++11 ABI; imported in a subprocess so a broken torch cannot
take the doctor down), nvcc, the active conda/pixi environment and any causal-conv1d already
installed. Prints a table, the command that installs (or builds) the matching package, and the
known traps that apply. Missing pieces (no GPU, no driver, no torch) are reported, never fatal:
the exit status is 0 unless the arguments are wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ssm_conda.archs import arch_covers, parse_arch_list, version_key
from ssm_conda.channels import DEFAULT_CHANNEL
from ssm_conda.console import UsageError, format_table
from ssm_conda.machine import DRIVER_OF_TOOLKIT, MIN_DRIVER_FOR_MAJOR, DriverInfo, GpuInfo, driver_info
from ssm_conda.matrix import VariantFile, load_variant_files
from ssm_conda.paths import RECIPE, REPO_ROOT, VARIANTS_DIR

PACKAGE = "causal-conv1d"
FALLBACK_VERSION = "1.7.0"
SCHEMA = 1
LOCAL_CHANNEL = REPO_ROOT / "output"  # build.py's default --output-dir
WHEEL_TAG_RE = re.compile(r"cu(\d+)torch(\d+\.\d+)cxx11abi(TRUE|FALSE)", re.IGNORECASE)
NVCC_RELEASE_RE = re.compile(r"release (\d+\.\d+)")


# --------------------------------------------------------------------------------------------
# Facts


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


PROBE = r"""
import json, os, sys
if sys.path and sys.path[0] in ("", os.getcwd()):
    sys.path.pop(0)
def emit(**kw):
    print("@@doctor " + json.dumps(kw), flush=True)
emit(stage="python", version="%d.%d.%d" % tuple(sys.version_info[:3]),
     executable=sys.executable, prefix=sys.prefix)
try:
    import importlib.metadata as md
except ImportError:
    md = None
def dist(*names):
    for name in names:
        try:
            d = md.distribution(name)
        except Exception:
            continue
        out = {"version": d.version}
        for key, fname in (("installer", "INSTALLER"), ("direct_url", "direct_url.json")):
            try:
                out[key] = d.read_text(fname)
            except Exception:
                out[key] = None
        return out
    return None
if md is not None:
    emit(stage="dists", torch=dist("torch"), causal_conv1d=dist("causal_conv1d", "causal-conv1d"))
import importlib.util
if importlib.util.find_spec("torch") is None:
    emit(stage="torch", ok=False, missing=True)
    sys.exit(0)
if os.environ.get("DOCTOR_NO_IMPORT") == "1":
    sys.exit(0)
try:
    import torch
    emit(stage="torch", ok=True, version=str(torch.__version__), cuda=torch.version.cuda,
         cxx11_abi=bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", False)))
except BaseException as exc:
    emit(stage="torch", ok=False, error="%s: %s" % (type(exc).__name__, exc))
    sys.exit(0)
if importlib.util.find_spec("causal_conv1d_cuda") is not None:
    try:
        import causal_conv1d_cuda
        emit(stage="extension", ok=True)
    except BaseException as exc:
        emit(stage="extension", ok=False, error="%s: %s" % (type(exc).__name__, exc))
"""


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


def parse_probe_output(executable: str, stdout: str, returncode: int, stderr: str = "") -> InterpreterInfo:
    """Turn the probe's `@@doctor {json}` lines into an InterpreterInfo (tolerates a crash)."""
    info = InterpreterInfo(executable=executable)
    stages: dict[str, dict[str, Any]] = {}
    for line in stdout.splitlines():
        if line.startswith("@@doctor "):
            try:
                record = json.loads(line[len("@@doctor ") :])
            except ValueError:
                continue
            stages[record.get("stage", "")] = record
    if "python" in stages:
        info.version = stages["python"].get("version")
        info.prefix = stages["python"].get("prefix")
        info.executable = stages["python"].get("executable") or executable
    dists = stages.get("dists", {})
    info.causal_conv1d = _dist_from_probe(dists.get("causal_conv1d"))
    torch_dist = _dist_from_probe(dists.get("torch"))
    torch_stage = stages.get("torch")
    if torch_stage is not None and torch_stage.get("missing"):
        torch_stage = None
    if torch_dist is not None or torch_stage is not None:
        info.torch = TorchInfo(dist=torch_dist)
        if torch_stage is not None and torch_stage.get("ok"):
            info.torch.version = torch_stage.get("version")
            info.torch.cuda = torch_stage.get("cuda")
            info.torch.cxx11_abi = torch_stage.get("cxx11_abi")
        elif torch_stage is not None:
            info.torch.import_error = torch_stage.get("error")
        elif returncode != 0 and torch_dist is not None:
            info.torch.import_error = f"`import torch` crashed the interpreter ({_describe_rc(returncode)})"
        if info.torch.version is None and torch_dist is not None:
            info.torch.version = torch_dist.version
    if "extension" in stages:
        info.extension_ok = bool(stages["extension"].get("ok"))
        info.extension_error = stages["extension"].get("error")
    elif returncode != 0 and torch_stage is not None and torch_stage.get("ok"):
        info.extension_ok = False
        info.extension_error = f"`import causal_conv1d_cuda` crashed ({_describe_rc(returncode)})"
    if "python" not in stages:
        last = (stderr.strip().splitlines() or [f"exit status {returncode}"])[-1]
        info.error = f"could not run {executable}: {last}"
    return info


def _describe_rc(returncode: int) -> str:
    return f"signal {-returncode}" if returncode < 0 else f"exit status {returncode}"


def probe_interpreter(executable: str, import_torch: bool = True, timeout: float = 180) -> InterpreterInfo:
    """Ask the target interpreter about itself, torch and causal-conv1d, in a subprocess."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if not import_torch:
        env["DOCTOR_NO_IMPORT"] = "1"
    try:
        result = subprocess.run(
            [executable, "-c", PROBE],
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
        if not os.access(path, os.X_OK):
            continue
        try:
            runner = run or (lambda cmd: subprocess.run(cmd, capture_output=True, text=True, timeout=60))
            out = runner([path, "--version"]).stdout
        except (OSError, subprocess.SubprocessError):
            return NvccInfo(path, None)
        match = NVCC_RELEASE_RE.search(out)
        return NvccInfo(path, match.group(1) if match else None)
    return None


@dataclass
class Probes:
    """Where facts come from; tests replace any of these."""

    driver: Callable[[], DriverInfo] = driver_info
    interpreter: Callable[[str, bool], InterpreterInfo] = probe_interpreter
    nvcc: Callable[[Mapping[str, str]], NvccInfo | None] = find_nvcc
    conda_records: Callable[[str | None], dict[str, tuple[str, str]]] = conda_records
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


def gather_facts(executable: str, probes: Probes | None = None, import_torch: bool = True) -> Facts:
    probes = probes or Probes()
    interp = probes.interpreter(executable, import_torch)
    env = detect_env(probes.environ, interp.prefix)
    records = probes.conda_records(interp.prefix or env.prefix)
    if "pytorch" in records and interp.torch is not None and interp.torch.dist is not None:
        interp.torch.dist.conda_build = records["pytorch"][1]
    if interp.causal_conv1d is not None and PACKAGE in records:
        interp.causal_conv1d.conda_build = records[PACKAGE][1]
    elif interp.causal_conv1d is None and PACKAGE in records:
        version, build = records[PACKAGE]
        interp.causal_conv1d = InstalledDist(version, "conda", conda_build=build)
    return Facts(
        driver=probes.driver(),
        interpreter=interp,
        env=env,
        nvcc=probes.nvcc(probes.environ),
        conda_override_cuda=probes.environ.get("CONDA_OVERRIDE_CUDA") or None,
    )


# --------------------------------------------------------------------------------------------
# Advice


@dataclass
class Finding:
    code: str
    message: str


@dataclass
class Advice:
    cuda: str | None = None  # the variant's CUDA version
    variant_file: str | None = None
    python: str | None = None
    torch: str | None = None
    reason: str = ""
    build_string: str | None = None  # glob, e.g. cuda130_py312_torch213_*
    install: list[str] = field(default_factory=list)  # commands, run in order
    build: list[str] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def warn(self, code: str, message: str) -> None:
        self.warnings.append(Finding(code, message))

    @property
    def codes(self) -> list[str]:
        return [w.code for w in self.warnings]


def default_channel() -> str:
    """build.py's output channel once it holds an index, else the public channel."""
    if any(LOCAL_CHANNEL.glob("*/repodata.json")):
        return str(LOCAL_CHANNEL)
    return DEFAULT_CHANNEL


def package_version(recipe: Path = RECIPE) -> str:
    try:
        return str(yaml.safe_load(recipe.read_text())["context"]["version"])
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        return FALLBACK_VERSION


def _major(version: str) -> int:
    return version_key(version)[0]


def choose_variant(facts: Facts, files: Sequence[VariantFile], advice: Advice) -> VariantFile | None:
    """The variant file (CUDA version) that fits torch's CUDA first, then the driver."""
    if not files:
        return None
    torch = facts.interpreter.torch
    driver_cuda = facts.driver.cuda or facts.conda_override_cuda
    by_version = sorted(files, key=lambda f: version_key(f.cuda))
    if torch is not None and torch.cuda:
        same = [f for f in by_version if _major(f.cuda) == _major(torch.cuda)]
        if same:
            not_newer = [f for f in same if version_key(f.cuda) <= version_key(torch.cuda)]
            chosen = (not_newer or same)[-1 if not_newer else 0]
            advice.reason = f"torch {torch.version} was built with CUDA {torch.cuda}"
            return chosen
        advice.warn(
            "no-package-for-torch-cuda",
            f"torch {torch.version} uses CUDA {torch.cuda}, but packages exist only for CUDA "
            f"{', '.join(f.cuda for f in by_version)}: install a torch built for one of those "
            f"(conda-forge: pytorch=*=cuda{by_version[-1].cuda.replace('.', '')}*)",
        )
    if driver_cuda:
        usable = [f for f in by_version if _major(f.cuda) <= _major(driver_cuda)]
        if usable:
            full = [f for f in usable if version_key(f.cuda) <= version_key(driver_cuda)]
            chosen = (full or usable)[-1]
            advice.reason = advice.reason or f"the newest CUDA the driver supports ({driver_cuda})"
            return chosen
        advice.reason = advice.reason or "the oldest CUDA packaged (the driver is too old for all)"
        return by_version[0]
    advice.reason = advice.reason or "no driver or torch CUDA to match: the newest CUDA packaged"
    return by_version[-1]


def build_arch_arg(caps: Sequence[str], vfile: VariantFile) -> str:
    """--arch for build.py: native when nvcc can target every GPU here, else an explicit list."""
    if not caps:
        return "all"
    cuda13 = _major(vfile.cuda) >= 13
    if all(c in vfile.arch_supported for c in caps) and not (cuda13 and "10.3" in caps):
        return "native"
    chosen = []
    for cap in caps:
        if cap in vfile.arch_supported and not (cuda13 and cap == "10.3"):
            chosen.append(cap)
            continue
        lower = [a for a in vfile.arch_supported if _major(a) == _major(cap) and version_key(a) < version_key(cap)]
        older = [a for a in vfile.arch_supported if version_key(a) < version_key(cap)]
        if lower:
            chosen.append(max(lower, key=version_key))
        elif older:
            chosen.append(max(older, key=version_key) + "+PTX")
    unique = sorted(set(chosen), key=version_key)
    return ";".join(unique) if unique else "all"


def _conda_spec(version: str, build: str) -> str:
    return f'"{PACKAGE}={version}={build}"'


def install_commands(facts: Facts, cuda: str, build: str, channel: str, version: str, python: str) -> list[str]:
    spec = _conda_spec(version, build)
    # Without a driver there is no __cuda virtual package and CUDA builds of pytorch do not solve.
    override = "" if facts.driver.cuda or facts.conda_override_cuda else f"CONDA_OVERRIDE_CUDA={cuda} "
    channels = f"-c {channel}" + ("" if channel == "conda-forge" else " -c conda-forge")
    commands = []
    wheel = facts.interpreter.causal_conv1d
    if wheel is not None and not wheel.from_conda:
        commands.append(f"{shlex.quote(facts.interpreter.executable)} -m pip uninstall -y causal-conv1d")
    if facts.env.kind == "pixi" and not facts.env.this_project:
        if channel != "conda-forge":
            commands.append(f"pixi workspace channel add {channel}")
        commands.append(f"{override}pixi add {spec}")
    elif facts.env.kind == "conda":
        commands.append(f"{override}conda install {channels} {spec}")
    else:
        commands.append(f"{override}conda create -n causal-conv1d {channels} python={python} {spec}")
    return commands


def advise(
    facts: Facts,
    files: Sequence[VariantFile],
    channel: str = DEFAULT_CHANNEL,
    version: str = FALLBACK_VERSION,
) -> Advice:
    """Turn facts into a recommendation, commands and warnings (pure: no probing here)."""
    advice = Advice()
    interp, torch, driver, nvcc = facts.interpreter, facts.interpreter.torch, facts.driver, facts.nvcc
    caps = sorted({g.compute_cap for g in facts.gpus if g.compute_cap}, key=version_key)

    # What is missing
    if interp.error:
        advice.missing.append(interp.error)
    if driver.version is None and driver.cuda is None:
        why = driver.errors[0] if driver.errors else "nvidia-smi not found and libcuda.so.1 not loadable"
        advice.missing.append(f"NVIDIA driver: {why} (fine for building; the package only runs with a driver)")
    elif not facts.gpus:
        advice.missing.append("GPU: the driver reports no GPU")
    for err in driver.errors:
        advice.notes.append(err)
    if torch is None:
        advice.missing.append(f"torch: not installed for {interp.executable} (the package brings conda-forge pytorch)")
    elif torch.import_error:
        advice.warn(
            "torch-import-failed",
            f"torch {torch.version or ''} is installed but `import torch` fails: {torch.import_error}",
        )
    elif not torch.cuda:
        advice.warn(
            "torch-cpu-only",
            f"torch {torch.version} is a CPU-only build: causal-conv1d needs a CUDA build of pytorch",
        )
    if facts.env.this_project:
        advice.notes.append(
            "this checked the packaging project's own pixi environment; to check yours run "
            "`python scripts/doctor.py` inside it, or pass --interpreter /path/to/env/bin/python"
        )
    if nvcc is None:
        advice.missing.append("nvcc: not found (only needed to build from source outside build.py)")

    vfile = choose_variant(facts, files, advice)
    if vfile is None:
        advice.missing.append("variants/*.yaml: no variant files, nothing to recommend")
        return advice
    advice.cuda, advice.variant_file = vfile.cuda, vfile.display_path

    # Driver against the chosen CUDA
    driver_cuda = driver.cuda or facts.conda_override_cuda
    if driver_cuda and _major(vfile.cuda) > _major(driver_cuda):
        advice.warn(
            "driver-too-old",
            f"the driver supports CUDA {driver_cuda}, the CUDA {vfile.cuda} package (and a torch "
            f"built with it) needs a driver >= {MIN_DRIVER_FOR_MAJOR.get(str(_major(vfile.cuda)), '?')}: "
            "update the driver",
        )
    elif driver_cuda and version_key(vfile.cuda) > version_key(driver_cuda):
        advice.notes.append(
            f"the driver supports CUDA {driver_cuda} < {vfile.cuda}: it runs through minor-version "
            f"compatibility; driver >= {DRIVER_OF_TOOLKIT.get(vfile.cuda, '?')} avoids PTX JIT failures"
        )
    # Python and torch minors against what is packaged
    python = interp.minor or vfile.pythons[-1]
    torch_minor = torch.minor if torch is not None else None
    advice.python = python
    advice.torch = torch_minor or vfile.torches[-1]
    packaged = True
    if interp.minor and interp.minor not in vfile.pythons:
        packaged = False
        advice.notes.append(f"no package for Python {interp.minor} (packaged: {', '.join(vfile.pythons)}): build one")
    if torch_minor and torch_minor not in vfile.torches:
        packaged = False
        advice.notes.append(
            f"no package for torch {torch_minor} with CUDA {vfile.cuda} (packaged: {', '.join(vfile.torches)}): "
            "build one, or install a packaged torch"
        )
    if (
        torch is not None
        and torch.dist is not None
        and not torch.dist.from_conda
        and facts.env.kind in ("conda", "pixi")
    ):
        advice.warn(
            "pip-torch-in-conda-env",
            f"torch {torch.version} was installed by {torch.dist.installer or 'pip'}, not conda: the conda "
            "package depends on conda-forge pytorch and would install a second torch over it; "
            f"replace it (`pip uninstall torch`, then install "
            f"pytorch={advice.torch}=cuda{vfile.cuda.replace('.', '')}* from conda-forge) or build from source",
        )

    # GPU architectures against the package's arch list
    for gpu in facts.gpus:
        if not gpu.compute_cap:
            continue
        how = arch_covers(gpu.compute_cap, vfile.arch_list)
        if how is None:
            packaged_archs = vfile.arch_list
            newer = all(version_key(gpu.compute_cap) > e.key for e in parse_arch_list(packaged_archs))
            advice.warn(
                "arch-not-packaged",
                f"GPU {gpu.index} ({gpu.name}, {gpu.sm}) is {'newer than every' if newer else 'not among the'} "
                f"architecture{'s' if newer else ''} in the CUDA {vfile.cuda} package ({packaged_archs}) and "
                "no PTX covers it: expect `no kernel image is available for execution on the device`; "
                "build with --arch native"
                + (
                    ""
                    if gpu.compute_cap in vfile.arch_supported
                    else f" (nvcc {vfile.cuda} cannot target it either: use a newer CUDA)"
                ),
            )
            packaged = False
        elif "PTX" in how:
            advice.notes.append(f"GPU {gpu.index} ({gpu.sm}) runs {how}; a --arch native build avoids the JIT")

    # sm_103 and nvcc 13 (upstream #105)
    nvcc13 = nvcc is not None and nvcc.version is not None and _major(nvcc.version) >= 13
    if "10.3" in caps and (nvcc13 or _major(vfile.cuda) >= 13):
        where = f"nvcc {nvcc.version} at {nvcc.path}" if nvcc13 and nvcc else f"CUDA {vfile.cuda}"
        advice.warn(
            "sm103-nvcc13",
            f"sm_103 GPU (B300/GB300) with {where}: nvcc 13.x compiles wrong sm_103 code for the forward "
            "and update kernels (upstream causal-conv1d #105). The packages ship sm_100 code, which runs "
            "correctly there; never build with --arch 10.3 (or `pip install` from source, which adds "
            "sm_103) using nvcc 13",
        )
        wheel = interp.causal_conv1d
        tag = wheel.wheel_tag if wheel is not None else None
        if wheel is not None and not wheel.from_conda and (tag is None or int(tag["cuda_major"]) >= 13):
            advice.warn(
                "sm103-pip-build",
                f"causal-conv1d {wheel.version} was installed by {wheel.installer or 'pip'}: if it was compiled "
                "with nvcc 13 it carries the broken sm_103 code; replace it with the conda package",
            )

    # torch's CUDA against nvcc's (source builds)
    if torch is not None and torch.cuda and nvcc is not None and nvcc.version:
        if _major(torch.cuda) != _major(nvcc.version):
            advice.warn(
                "torch-nvcc-cuda-mismatch",
                f"torch uses CUDA {torch.cuda} but {nvcc.path} is CUDA {nvcc.version}: a source build "
                "(`pip install causal-conv1d`) fails with 'The detected CUDA version mismatches the "
                "version that was used to compile PyTorch'; use the conda package, or build.py (which "
                f"brings its own nvcc), or point CUDA_HOME at a CUDA {_major(torch.cuda)}.x toolkit",
            )
        elif torch.cuda != nvcc.version:
            advice.notes.append(f"torch CUDA {torch.cuda}, nvcc {nvcc.version}: same major, source builds work")

    _check_installed(facts, advice, vfile)

    # Commands
    cuda_tag, py_tag = vfile.cuda.replace(".", ""), python.replace(".", "")
    if channel == "conda-forge":
        # conda-forge's own builds are cuda130py312h<hash>_<n>, one pytorch pin per release
        build_string = f"cuda{cuda_tag}*py{py_tag}*"
        advice.notes.append(
            "conda-forge's causal-conv1d builds carry only conda-forge's current pytorch pin; for "
            "another torch minor use this project's channel (--channel) or build"
        )
    else:
        build_string = f"cuda{cuda_tag}_py{py_tag}_torch{advice.torch.replace('.', '')}_*"
        local = Path(channel)
        if packaged and local.is_dir():
            pattern = f"{PACKAGE}-{version}-{build_string}.conda"
            if not any(local.glob(f"*/{pattern}")):
                advice.notes.append(f"{channel} has no {pattern} yet: build it first (command below)")
    advice.build_string = build_string
    if packaged:
        advice.install = install_commands(facts, vfile.cuda, build_string, channel, version, python)
    advice.build = [
        f"python scripts/build.py --cuda {vfile.cuda} --python {python} --torch {advice.torch} "
        f"--arch {shlex.quote(build_arch_arg(caps, vfile))}"
    ]
    return advice


def _check_installed(facts: Facts, advice: Advice, vfile: VariantFile) -> None:
    """An already-installed causal-conv1d: a conda record, or a pip wheel built for another torch."""
    interp, torch = facts.interpreter, facts.interpreter.torch
    dist = interp.causal_conv1d
    if dist is None:
        return
    if dist.from_conda:
        advice.notes.append(f"installed: causal-conv1d {dist.version} {dist.conda_build} (conda)")
    else:
        tag = dist.wheel_tag
        if tag is not None and torch is not None:
            problems = []
            if torch.minor and tag["torch"] != torch.minor:
                problems.append(f"torch {tag['torch']} (here {torch.minor})")
            if torch.cuda and str(tag["cuda_major"]) != str(_major(torch.cuda)):
                problems.append(f"CUDA {tag['cuda_major']} (here {_major(torch.cuda)})")
            if torch.cxx11_abi is not None and tag["cxx11_abi"] != torch.cxx11_abi:
                problems.append(f"cxx11abi={tag['cxx11_abi']} (here {torch.cxx11_abi})")
            if problems:
                advice.warn(
                    "pip-wheel-mismatch",
                    f"causal-conv1d {dist.version} (installed by {dist.installer or 'pip'}) is a prebuilt wheel "
                    f"for {', '.join(problems)}: importing it fails with `undefined symbol` or crashes; "
                    "uninstall it and use the command below",
                )
        elif dist.installer and facts.env.kind in ("conda", "pixi"):
            advice.notes.append(
                f"causal-conv1d {dist.version} was installed by {dist.installer}, not conda: "
                "uninstall it before installing the conda package"
            )
    error = interp.extension_error or ""
    if "undefined symbol" in error:
        advice.warn(
            "extension-undefined-symbol",
            f"`import causal_conv1d_cuda` fails: {error.splitlines()[0][:200]} -- the installed "
            f"causal-conv1d was built against another torch ({torch.version if torch else '?'} here); "
            "uninstall it and install the matching package",
        )
    elif interp.extension_ok is False:
        advice.warn(
            "extension-import-failed",
            f"`import causal_conv1d_cuda` fails: {error.splitlines()[0][:200] if error else '?'}",
        )


# --------------------------------------------------------------------------------------------
# Output


def facts_rows(facts: Facts) -> list[tuple[str, str]]:
    driver, interp, torch = facts.driver, facts.interpreter, facts.interpreter.torch
    rows = []
    if driver.version or driver.cuda:
        rows.append(("NVIDIA driver", f"{driver.version or '?'} (supports CUDA {driver.cuda or '?'})"))
    else:
        rows.append(("NVIDIA driver", "not found"))
    if facts.conda_override_cuda:
        rows.append(("CONDA_OVERRIDE_CUDA", facts.conda_override_cuda))
    for gpu in facts.gpus:
        rows.append((f"GPU {gpu.index}", f"{gpu.name}, compute capability {gpu.compute_cap or '?'} ({gpu.sm})"))
    if not facts.gpus:
        rows.append(("GPU", "none visible"))
    rows.append(("Python", f"{interp.version or '?'} ({interp.executable})"))
    if torch is None:
        rows.append(("torch", "not installed"))
    else:
        origin = "conda" if torch.dist and torch.dist.from_conda else (torch.dist.installer if torch.dist else None)
        detail = [f"CUDA {torch.cuda}" if torch.cuda else "CPU-only" if not torch.import_error else "import fails"]
        if torch.cxx11_abi is not None:
            detail.append(f"cxx11 ABI {'yes' if torch.cxx11_abi else 'no'}")
        if origin:
            detail.append(f"from {origin}")
        rows.append(("torch", f"{torch.version or '?'} ({', '.join(detail)})"))
    rows.append(("nvcc", f"{facts.nvcc.version or '?'} ({facts.nvcc.path})" if facts.nvcc else "not found"))
    env = facts.env
    rows.append(
        ("Environment", f"{env.kind}: {env.name} ({env.prefix or env.manifest or '-'})" if env.kind else "none active")
    )
    dist = interp.causal_conv1d
    if dist is None:
        rows.append(("causal-conv1d", "not installed"))
    else:
        how = ", ".join(filter(None, ["conda", dist.conda_build])) if dist.from_conda else dist.installer or "pip"
        rows.append(("causal-conv1d", f"{dist.version} ({how})"))
    return rows


def render_text(facts: Facts, advice: Advice) -> str:
    lines = ["causal-conv1d doctor", "", format_table(("Item", "Value"), facts_rows(facts)), ""]
    if advice.cuda:
        lines.append(
            f"Variant: CUDA {advice.cuda} ({advice.variant_file}), Python {advice.python}, "
            f"torch {advice.torch}: {advice.reason}."
        )
        lines.append("")
    if advice.install:
        lines += ["Install:"] + [f"  {c}" for c in advice.install] + ["", "Or build it:"]
    elif advice.build:
        lines.append("No package fits; build it:")
    lines += [f"  {c}" for c in advice.build]
    for title, items in (
        ("Warnings", [f"[{w.code}] {w.message}" for w in advice.warnings]),
        ("Missing", advice.missing),
        ("Notes", advice.notes),
    ):
        if items:
            lines += ["", f"{title}:"] + [f"  - {item}" for item in items]
    return "\n".join(lines)


def to_json(facts: Facts, advice: Advice) -> dict[str, Any]:
    return {"schema": SCHEMA, "facts": asdict(facts), "advice": asdict(advice)}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--interpreter",
        default=sys.executable,
        metavar="PATH",
        help="Python of the environment to check (default: the one running this script)",
    )
    parser.add_argument(
        "--channel",
        default=None,
        help=f"channel to install from (default: {LOCAL_CHANNEL.name}/ when build.py has filled it, "
        f"else {DEFAULT_CHANNEL})",
    )
    parser.add_argument("--variants-dir", type=Path, default=VARIANTS_DIR, help="variant files (default: variants/)")
    parser.add_argument("--no-import", action="store_true", help="read torch's metadata only, do not import it")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def run(args: argparse.Namespace, probes: Probes | None = None) -> int:

    interpreter = args.interpreter
    if os.sep not in interpreter:
        interpreter = shutil.which(interpreter) or interpreter
    if not Path(interpreter).exists():
        raise UsageError(f"--interpreter {args.interpreter!r}: no such file")
    if not args.variants_dir.is_dir():
        raise UsageError(f"--variants-dir {str(args.variants_dir)!r}: no such directory")
    files = load_variant_files(args.variants_dir)
    facts = gather_facts(interpreter, probes, import_torch=not args.no_import)
    advice = advise(facts, files, args.channel or default_channel(), package_version())
    if args.json:
        print(json.dumps(to_json(facts, advice), indent=2))
    else:
        print(render_text(facts, advice))
    return 0
