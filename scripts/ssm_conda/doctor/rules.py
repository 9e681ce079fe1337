"""The doctor's advice as independent rules: each looks at the facts (and the variant files, or the Target) and returns
Findings; rules neither probe nor depend on each other."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal

from ssm_conda.archs import arch_covers, parse_arch_list, version_key
from ssm_conda.channels import DEFAULT_CHANNEL
from ssm_conda.doctor.facts import Facts, major
from ssm_conda.machine import MIN_DRIVER_FOR_MAJOR
from ssm_conda.matrix import VariantFile, build_glob
from ssm_conda.project import PACKAGES


@dataclass(frozen=True)
class Finding:
    level: Literal["warning", "missing", "note"]
    code: str
    message: str
    unpackaged: bool = False  # no packaged build fits: offer only the build command


warning = partial(Finding, "warning")
missing = partial(Finding, "missing")
note = partial(Finding, "note")


@dataclass(frozen=True)
class Target:  # the variant the doctor recommends, and the Python and torch minors it is for
    variant: VariantFile
    python: str  # "3.12"
    torch: str  # "2.13"
    channels: tuple[str, ...] = (DEFAULT_CHANNEL,)  # the ones install commands use


def ours(channels: Sequence[str]) -> list[str]:
    """The channels other than conda-forge: where this project's packages come from."""
    return [c for c in channels if c != DEFAULT_CHANNEL]


def channel_args(channels: Sequence[str]) -> str:
    """conda's -c for each of this project's channels, then conda-forge's, each one shell word."""
    return " ".join(f"-c {shlex.quote(c)}" for c in (*ours(channels), DEFAULT_CHANNEL))


def probe_failed(facts: Facts, files: Sequence[VariantFile]) -> list[Finding]:
    return [missing("interpreter", facts.interpreter.error)] if facts.interpreter.error else []


def driver_missing(facts: Facts, files: Sequence[VariantFile]) -> list[Finding]:
    driver, found = facts.driver, []
    if driver.version is None and driver.cuda is None:
        why = driver.errors[0] if driver.errors else "nvidia-smi not found and py-rattler detects no __cuda"
        found.append(missing("driver", f"NVIDIA driver: {why} (fine for building; the package only runs with a driver)"))
    elif not driver.gpus:
        found.append(missing("gpu", "GPU: the driver reports no GPU"))
    return found + [note("driver-error", error) for error in driver.errors]


def torch_unusable(facts: Facts, files: Sequence[VariantFile]) -> list[Finding]:
    interp, torch = facts.interpreter, facts.interpreter.torch
    if torch is None:
        return [missing("torch", f"torch: not installed for {interp.executable} (the package brings conda-forge pytorch)")]
    if torch.import_error:
        return [warning("torch-import-failed",
                        f"torch {torch.version or ''} is installed but `import torch` fails: {torch.import_error}")]
    if not torch.cuda:
        return [warning("torch-cpu-only",
                        f"torch {torch.version} is a CPU-only build: causal-conv1d needs a CUDA build of pytorch")]
    return []


def own_project_env(facts: Facts, files: Sequence[VariantFile]) -> list[Finding]:
    return [note("own-project-env", "this checked the packaging project's own pixi environment; to check yours pass "
                 "--interpreter /path/to/env/bin/python")] if facts.env.this_project else []


def no_variant_files(facts: Facts, files: Sequence[VariantFile]) -> list[Finding]:
    return [] if files else [missing("variants", "variants/*.yaml: no variant files, nothing to recommend")]


def torch_cuda_not_packaged(facts: Facts, files: Sequence[VariantFile]) -> list[Finding]:
    torch = facts.interpreter.torch
    if torch is None or not torch.cuda or not files or any(major(f.cuda) == major(torch.cuda) for f in files):
        return []
    cudas = sorted((f.cuda for f in files), key=version_key)
    return [warning("no-package-for-torch-cuda",
                    f"torch {torch.version} uses CUDA {torch.cuda}, but packages exist only for CUDA {', '.join(cudas)}: "
                    f"install a torch built for one of those (conda-forge: pytorch=*=cuda{cudas[-1].replace('.', '')}*)")]


def installed_package(facts: Facts, files: Sequence[VariantFile]) -> list[Finding]:
    """An already-installed causal-conv1d: a conda record, or a pip wheel built for another torch."""
    dist, torch = facts.interpreter.causal_conv1d, facts.interpreter.torch
    if dist is None:
        return []
    if dist.from_conda:
        return [note("installed", f"installed: causal-conv1d {dist.version} {dist.conda_build} (conda)")]
    tag = dist.wheel_tag
    if tag is not None and torch is not None:
        # How an upstream wheel's tag (cu12torch2.6cxx11abiTRUE) differs from the torch here: (label, the tag's, here)
        compared = (("torch {}", tag["torch"], torch.minor),
                    ("CUDA {}", tag["cuda_major"], str(major(torch.cuda)) if torch.cuda else None),
                    ("cxx11abi={}", tag["cxx11_abi"], torch.cxx11_abi))
        problems = [f"{label.format(tagged)} (here {here})" for label, tagged, here in compared
                    if here is not None and tagged != here]
        return [warning("pip-wheel-mismatch", f"causal-conv1d {dist.version} (installed by {dist.installer or 'pip'}) is a "
                        f"prebuilt wheel for {', '.join(problems)}: importing it fails with `undefined symbol` or crashes; "
                        "uninstall it and use the command below")] if problems else []
    if dist.installer and facts.env.kind in ("conda", "pixi"):
        return [note("installed-by-pip", f"causal-conv1d {dist.version} was installed by {dist.installer}, not conda: "
                     "uninstall it before installing the conda package")]
    return []


def extension_import_failed(facts: Facts, files: Sequence[VariantFile]) -> list[Finding]:
    """Each installed package's extensions (ssm_conda.project) that do not import."""
    torch, found = facts.interpreter.torch, []
    for name, error in ((n, e) for n, e in facts.interpreter.extensions.items() if e is not None):
        owner = next((p.name for p in PACKAGES if name in p.extensions), name)
        first_line = error.splitlines()[0][:200] if error else "?"
        found.append(warning("extension-undefined-symbol", f"`import {name}` fails: {first_line} -- the installed {owner} "
                             f"was built against another torch ({torch.version if torch else '?'} here); uninstall it "
                             "and install the matching package") if "undefined symbol" in error
                     else warning("extension-import-failed", f"`import {name}` fails: {first_line}"))
    return found


def ssm_pair(facts: Facts, files: Sequence[VariantFile]) -> list[Finding]:
    """mamba-ssm without causal-conv1d, or with one whose version does not fit (mamba #436: the messages say why)."""
    mamba, conv = facts.interpreter.mamba_ssm, facts.interpreter.causal_conv1d
    if mamba is None:
        return []
    if conv is None:
        return [note("mamba-without-causal-conv1d", f"mamba-ssm {mamba.version} is installed without causal-conv1d: Mamba falls "
                     "back to the slower nn.Conv1d path, but Mamba2 (default use_mem_eff_path=True) fails with `'NoneType' "
                     "object is not callable` and its varlen inputs need the package; install causal-conv1d (the mamba-ssm "
                     "package brings it)")]
    new_mamba, new_conv = version_key(mamba.version) >= (2, 3), version_key(conv.version) >= (1, 7)
    pair = f"mamba-ssm {mamba.version} with causal-conv1d {conv.version}"
    if new_mamba and not new_conv:
        return [warning("causal-conv1d-too-old", f"{pair}: mamba-ssm 2.3 needs causal_conv1d.cpp_functions (causal-conv1d >= "
                        "1.7); without it Mamba fails with `AssertionError: causal_conv1d_cuda is not available` and Mamba2 with "
                        "`'NoneType' object is not callable` (older pairs fail with `incompatible function arguments` instead, "
                        "mamba #436); install causal-conv1d >= 1.7 built for the same torch (the mamba-ssm package brings it)")]
    if new_conv and not new_mamba:
        return [warning("mamba-ssm-too-old", f"{pair}: mamba-ssm < 2.3 calls causal_conv1d_cuda with the signature causal-conv1d "
                        "1.7 changed and fails with `causal_conv1d_fwd(): incompatible function arguments` (mamba #436); install "
                        "mamba-ssm >= 2.3 (the mamba-ssm package below) or causal-conv1d < 1.7")]
    return []


MACHINE_RULES: tuple[Callable[[Facts, Sequence[VariantFile]], list[Finding]], ...] = (
    probe_failed, driver_missing, torch_unusable, own_project_env, no_variant_files, torch_cuda_not_packaged, installed_package,
    extension_import_failed, ssm_pair)


def driver_too_old(facts: Facts, target: Target) -> list[Finding]:
    cuda, driver_cuda = target.variant.cuda, facts.driver_cuda
    if driver_cuda and major(cuda) > major(driver_cuda):
        return [warning("driver-too-old", f"the driver supports CUDA {driver_cuda}, the CUDA {cuda} package (and a torch built "
                        f"with it) needs a driver >= {MIN_DRIVER_FOR_MAJOR.get(str(major(cuda)), '?')}: update the driver")]
    return []


def minor_not_packaged(facts: Facts, target: Target) -> list[Finding]:
    """The Python and the torch minor here, each where the variant has no package for it."""
    python, torch, vfile, found = facts.interpreter.minor, facts.interpreter.torch, target.variant, []
    if python and version_key(python) < version_key(vfile.pythons[0]):
        found.append(note("python-not-packaged", f"no package for Python {python} (packaged: {vfile.pythons[0]} and later): "
                          "use a later Python", unpackaged=True))
    if torch is not None and torch.minor and torch.minor not in vfile.torches:
        found.append(note("torch-not-packaged", f"no package for torch {torch.minor} with CUDA {vfile.cuda} (packaged: "
                          f"{', '.join(vfile.torches)}): build one, or install a packaged torch", unpackaged=True))
    return found


def pip_torch_in_conda_env(facts: Facts, target: Target) -> list[Finding]:
    torch = facts.interpreter.torch
    if torch is None or torch.dist is None or torch.dist.from_conda or facts.env.kind not in ("conda", "pixi"):
        return []
    return [warning("pip-torch-in-conda-env", f"torch {torch.version} was installed by {torch.dist.installer or 'pip'}, not "
                    "conda: the conda package depends on conda-forge pytorch and would install a second torch over it; replace "
                    f"it (`pip uninstall torch`, then install pytorch={target.torch}=cuda{target.variant.cuda.replace('.', '')}* "
                    "from conda-forge) or build from source")]


def gpu_not_covered(facts: Facts, target: Target) -> list[Finding]:
    """Each GPU against the package's architecture list (archs.arch_covers: cubin or PTX)."""
    vfile, found = target.variant, []
    for gpu in (g for g in facts.driver.gpus if g.compute_cap):
        how = arch_covers(gpu.compute_cap, vfile.arch_list)
        if how is None:
            newer = all(version_key(gpu.compute_cap) > e.key for e in parse_arch_list(vfile.arch_list))
            nvcc_too = "" if gpu.compute_cap in vfile.arch_supported else (
                f" (nvcc {vfile.cuda} cannot target it either: use a newer CUDA)")
            found.append(warning(
                "arch-not-packaged", f"GPU {gpu.index} ({gpu.name}, {gpu.sm}) is "
                f"{'newer than every' if newer else 'not among the'} architecture{'s' if newer else ''} in the CUDA {vfile.cuda} "
                f"package ({vfile.arch_list}) and no PTX covers it: expect `no kernel image is available for execution on the "
                f"device`; build with --arch native{nvcc_too}", unpackaged=True))
        elif "PTX" in how:
            found.append(note("arch-ptx", f"GPU {gpu.index} ({gpu.sm}) runs {how}; a --arch native build avoids the JIT"))
    return found


def sm103_nvcc13(facts: Facts, target: Target) -> list[Finding]:
    """nvcc 13.x compiles wrong sm_103 code (upstream causal-conv1d #105)."""
    if "10.3" not in facts.driver.compute_caps or major(target.variant.cuda) < 13:
        return []
    return [warning("sm103-nvcc13", f"sm_103 GPU (B300/GB300) with CUDA {target.variant.cuda}: nvcc 13.x compiles wrong sm_103 "
                    "code for the forward and update kernels (upstream causal-conv1d #105). The packages ship sm_100 code, which "
                    "runs correctly there; never build with --arch 10.3 (or `pip install` from source, which adds sm_103) using "
                    "nvcc 13")]


def sm103_pip_build(facts: Facts, target: Target) -> list[Finding]:
    """A pip-installed causal-conv1d on sm_103 may carry nvcc 13's broken sm_103 code."""
    wheel = facts.interpreter.causal_conv1d
    if (wheel is None or wheel.from_conda or "10.3" not in facts.driver.compute_caps
            or wheel.wheel_tag is not None and int(wheel.wheel_tag["cuda_major"]) < 13):
        return []
    return [warning("sm103-pip-build", f"causal-conv1d {wheel.version} was installed by {wheel.installer or 'pip'}: if it was "
                    "compiled with nvcc 13 it carries the broken sm_103 code; replace it with the conda package")]


def ssm_torch_mismatch(facts: Facts, target: Target) -> list[Finding]:
    """mamba-ssm and causal-conv1d built for different torch minors, or for another torch than the one here."""
    interp = facts.interpreter
    dists = [(p.name, d) for p in reversed(PACKAGES) if (d := interp.dist(p.name))]
    built = {n: d.torch_minor for n, d in dists if d.torch_minor}
    here = interp.torch.minor if interp.torch is not None else None
    if interp.mamba_ssm is None or not built or (len(set(built.values())) == 1 and here in (None, *built.values())):
        return []
    which = ", ".join(f"{n} {d.version} for torch {built.get(n, '?')} ({d.conda_build or d.installer or 'pip'})"
                      for n, d in dists)
    pip = " ".join(n for n, d in dists if not d.from_conda)
    build = build_glob(target.variant, target.torch)
    return [warning("ssm-torch-mismatch", f"torch builds disagree: {which}; torch here is {here or '?'}: their extensions fail "
                    "with `undefined symbol` or crash; install the matching pair from this project's channel: "
                    + (f"`{shlex.quote(interp.executable)} -m pip uninstall -y {pip}`, then " if pip else "")
                    + f'`conda install {channel_args(target.channels)} "mamba-ssm=*={build}" "causal-conv1d=*={build}"`')]


TARGET_RULES: tuple[Callable[[Facts, Target], list[Finding]], ...] = (
    driver_too_old, minor_not_packaged, pip_torch_in_conda_env, gpu_not_covered, sm103_nvcc13, sm103_pip_build,
    ssm_torch_mismatch)
