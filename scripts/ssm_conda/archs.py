"""GPU architectures: the one parser of TORCH_CUDA_ARCH_LIST values ("8.0;9.0+PTX") in the tooling, and which code
runs on which GPU (recipe/shared/tests/check_arch.py ships in the packages with its own)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ssm_conda.console import UsageError


def version_key(version: str) -> tuple[int, ...]:
    """ "12.10" sorts after "12.9"; non-numeric parts count as 0."""
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


class ArchListError(ValueError):
    def __init__(self, entry: str) -> None:
        super().__init__(f"architecture {entry!r} is not X.Y or X.Y+PTX (e.g. '8.0;9.0+PTX')")
        self.entry = entry


@dataclass(frozen=True)
class ArchEntry:
    """One entry of TORCH_CUDA_ARCH_LIST: a compute capability, with PTX for "+PTX"."""

    cap: str  # "9.0"
    ptx: bool = False

    @property
    def key(self) -> tuple[int, ...]:
        return version_key(self.cap)

    def __str__(self) -> str:
        return self.cap + ("+PTX" if self.ptx else "")


def parse_arch_list(value: str) -> list[ArchEntry]:
    """ "8.0;9.0+PTX" (';', ',' or spaces between entries) -> [ArchEntry("8.0"), ArchEntry("9.0", True)]."""
    entries = []
    for raw in filter(None, re.split(r"[;,\s]+", value.strip())):
        if (match := re.fullmatch(r"(\d+)\.(\d+)(\+PTX)?", raw)) is None:
            raise ArchListError(raw)
        entries.append(ArchEntry(f"{int(match[1])}.{int(match[2])}", bool(match[3])))
    return entries


def lowest_arch(arch_list: str) -> str:
    """ "9.0+PTX;8.0" -> "8.0": the compute capability a package built for arch_list needs at least."""
    return min(parse_arch_list(arch_list), key=lambda e: e.key).cap


def arch_covers(cap: str, arch_list: str) -> str | None:
    """How code built for arch_list runs on a GPU of compute capability cap, or None if it can't: a cubin for
    X.y runs on X.z with z >= y (same major); PTX for V JIT-compiles on any cap >= V."""
    entries, key = parse_arch_list(arch_list), version_key(cap)
    if any(e.cap == cap for e in entries):
        return f"sm_{cap.replace('.', '')} code"
    if same_major := [e for e in entries if e.key[0] == key[0] and e.key <= key]:
        return f"sm_{max(same_major, key=lambda e: e.key).cap.replace('.', '')} code (binary compatible)"
    if ptx := [e for e in entries if e.ptx and e.key <= key]:
        return f"compute_{max(ptx, key=lambda e: e.key).cap.replace('.', '')} PTX (JIT-compiled at first use)"
    return None


def resolve_arch_option(value: str, cuda: str, default: str, supported: Sequence[str], detect: Callable[[], list[str]]) -> str:
    """--arch (all: `default`; native: what `detect` finds; or "8.0;9.0+PTX") as a TORCH_CUDA_ARCH_LIST of CUDA `cuda`."""
    accepted = f"accepted: all, native, or ';'-separated from {', '.join(supported)} (append +PTX for PTX)"
    if value == "all":
        return default
    if value == "native":
        if not (caps := detect()):
            raise UsageError("--arch native found no GPU (neither nvidia-smi nor the driver reports one); "
                             "name the architectures instead, e.g. --arch 9.0")
        value = ";".join(caps)
    try:
        entries = parse_arch_list(value)
    except ArchListError as exc:
        raise UsageError(f"unknown architecture {exc.entry!r} for CUDA {cuda}; {accepted}") from None
    if not entries:
        raise UsageError(f"--arch is empty; {accepted}")
    if unknown := next((entry for entry in entries if entry.cap not in supported), None):
        raise UsageError(f"unknown architecture {str(unknown)!r} for CUDA {cuda}; {accepted}")
    return ";".join(str(e) for e in sorted(entries, key=lambda e: e.key))  # ascending: the recipes read the lowest first
