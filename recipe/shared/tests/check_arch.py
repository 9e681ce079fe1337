"""Which GPU code an installed kernel library carries (causal_conv1d/_C, mamba_ssm/_C), and whether
this GPU can run it. Shared by the packages' test sections (shipped through their path source).

The extension's ELF file holds a `.nv_fatbin` section: one fat binary per CUDA translation unit,
each a list of images, either SASS (a cubin for one real architecture, sm_XY) or PTX (compute_XY,
compiled by the driver at load time). This module reads those headers itself (no cuobjdump, no
CUDA, no torch needed), then applies CUDA's compatibility rules:

* SASS sm_XY runs on a GPU of the same major version whose minor is >= Y (sm_80 runs on 8.6 and
  8.9, never on 9.0). An arch-specific image (sm_90a) runs only on exactly 9.0.
* PTX compute_XY is JIT-compiled for any GPU >= X.Y; arch-specific PTX (compute_90a) only for
  exactly that GPU, family PTX (compute_100f) for the same major with minor >= Y.

Instead of CUDA's "no kernel image is available for execution on the device", `check` says which
architectures the extension has and how to rebuild it for this GPU.

Usable three ways: imported (by the recipe's tests and by scripts), or as a command:

    python check_arch.py                      # the installed extension vs this machine's GPUs
    python check_arch.py --so FILE --gpu 12.0 # any file, any compute capability
    python check_arch.py --expect "8.0;9.0+PTX"   # exactly these images, else exit 1
    python check_arch.py --module mamba_ssm._C  # mamba-ssm's library

Exit status: 0 fine, 1 a GPU that cannot run the extension (or --expect differs), 2 bad input.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
FATBIN_SECTION = ".nv_fatbin"
_FATBIN_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of what follows
# Entry header, first 40 bytes: kind, format version, header size, payload size, payload size
# before padding, offset of options, format minor, format major, arch (e.g. 90), name offset,
# name size, then the flags (a 64-bit word).
_ENTRY_HEADER = struct.Struct("<HHIQIIHHIIIQ")
KIND_PTX = 1
KIND_CUBIN = 2
# Flag bits of an entry: image for one arch only ("a", e.g. sm_90a) or for a family ("f",
# e.g. sm_100f). Read off nvcc 13.0 output (see tests/recipe/test_check_arch.py).
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY_SPECIFIC = 0x200000
# The image is compressed: nvcc 13's default compresses PTX, --compress-mode=size SASS too.
FLAG_COMPRESSED = 0x8000
# Source-line tables (nvcc -lineinfo) leave two marks in the entry headers, which nvcc never
# compresses: a SASS image names its source file, and a PTX image's ptxas options ask for them.
PTX_LINE_INFO_OPTION = b"--generate-line-info"

REBUILD_HINT = "ssm-conda build --arch native"


class FatbinError(Exception):
    """The file is not something we can read GPU code from."""


@dataclass(frozen=True, order=True)
class Image:
    """One image of a fat binary: SASS or PTX for one architecture."""

    arch: int  # 80 for sm_80 / compute_80, 121 for sm_121
    kind: str  # "sass", "ptx" or "other"
    variant: str = ""  # "", "a" or "f"
    compressed: bool = field(default=False, compare=False)
    line_info: bool = field(default=False, compare=False)  # built with nvcc -lineinfo

    @property
    def cc(self) -> tuple[int, int]:
        return divmod(self.arch, 10)

    @property
    def version(self) -> str:
        """The compute capability in torch's notation: "9.0", "9.0a"."""
        major, minor = self.cc
        return f"{major}.{minor}{self.variant}"

    @property
    def name(self) -> str:
        prefix = {"sass": "sm", "ptx": "compute"}.get(self.kind, "image")
        return f"{prefix}_{self.arch}{self.variant}"

    def runs_on(self, gpu: tuple[int, int]) -> bool:
        """Whether CUDA can run this image on a GPU of compute capability `gpu`."""
        major, minor = self.cc
        if self.variant == "a":
            return gpu == (major, minor)
        if self.kind == "sass" or self.variant == "f":
            return gpu[0] == major and gpu[1] >= minor
        if self.kind == "ptx":
            return gpu >= (major, minor)
        return False


@dataclass
class Fatbin:
    """One fat binary (one translation unit's device code)."""

    offset: int
    images: list[Image] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Reading


def parse_fatbins(blob: bytes) -> list[Fatbin]:
    """All fat binaries in `blob` (a `.nv_fatbin` section, or any bytes holding them)."""
    fatbins = []
    magic = struct.pack("<I", FATBIN_MAGIC)
    pos = blob.find(magic)
    while pos != -1:
        if pos + _FATBIN_HEADER.size > len(blob):
            break
        _, version, header_size, body_size = _FATBIN_HEADER.unpack_from(blob, pos)
        end = pos + header_size + body_size
        if version != 1 or header_size < _FATBIN_HEADER.size or end > len(blob):
            pos = blob.find(magic, pos + 4)  # a stray match of the magic number
            continue
        fatbin = Fatbin(offset=pos)
        entry = pos + header_size
        while entry + _ENTRY_HEADER.size <= end:
            (kind, _, entry_header_size, payload_size, _, options_offset, _, _, arch, _, name_size,
             flags) = _ENTRY_HEADER.unpack_from(blob, entry)
            if entry_header_size < _ENTRY_HEADER.size:
                raise FatbinError(f"corrupt fat binary entry at byte {entry}")
            variant = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY_SPECIFIC else ""
            kind_name = {KIND_CUBIN: "sass", KIND_PTX: "ptx"}.get(kind, "other")
            line_info = name_size > 0 if kind == KIND_CUBIN else PTX_LINE_INFO_OPTION in _options(blob, entry, options_offset)
            fatbin.images.append(Image(arch=arch, kind=kind_name, variant=variant,
                                       compressed=bool(flags & FLAG_COMPRESSED), line_info=line_info))
            entry += entry_header_size + payload_size
        fatbins.append(fatbin)
        pos = blob.find(magic, max(end, pos + 4))
    return fatbins


def _options(blob: bytes, entry: int, options_offset: int) -> bytes:
    """The compiler options an entry header records: at options_offset, the options' own offset and
    length (both from the entry's start)."""
    if options_offset == 0 or entry + options_offset + 8 > len(blob):
        return b""
    start, length = struct.unpack_from("<II", blob, entry + options_offset)
    return blob[entry + start:entry + start + length]


def elf_section(data: bytes, name: str) -> bytes | None:
    """The contents of section `name` of an ELF file (32/64-bit, either byte order); None if absent."""
    if data[:4] != b"\x7fELF":
        raise FatbinError("not an ELF file")
    is64 = data[4] == 2
    endian = "<" if data[5] == 1 else ">"
    try:
        if is64:
            shoff, = struct.unpack_from(endian + "Q", data, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from(endian + "HHH", data, 0x3A)
            fmt = endian + "IIQQQQIIQQ"
        else:
            shoff, = struct.unpack_from(endian + "I", data, 0x20)
            shentsize, shnum, shstrndx = struct.unpack_from(endian + "HHH", data, 0x2E)
            fmt = endian + "IIIIIIIIII"
        if shoff == 0 or shnum == 0:
            return None
        headers = [struct.unpack_from(fmt, data, shoff + i * shentsize) for i in range(shnum)]
        strtab = headers[shstrndx][4]
        for sh_name, sh_type, _, _, sh_offset, sh_size, *_ in headers:
            end = data.index(b"\0", strtab + sh_name)
            if data[strtab + sh_name:end].decode("ascii", "replace") == name:
                if sh_type == 8:  # SHT_NOBITS
                    return b""
                return data[sh_offset:sh_offset + sh_size]
    except (struct.error, IndexError, ValueError) as exc:
        raise FatbinError(f"corrupt ELF section table ({exc})") from exc
    return None


def python_references(data: bytes) -> list[str]:
    """What of Python a little-endian 64-bit ELF library uses (Linux's): libpython or libtorch_python among the
    libraries it needs, and the Python C API symbols (Py*, _Py*) it leaves for them to define."""
    dynstr, dynsym, dynamic = (elf_section(data, name) or b"" for name in (".dynstr", ".dynsym", ".dynamic"))

    def string(offset: int) -> str:
        return dynstr[offset:dynstr.index(b"\0", offset)].decode("ascii", "replace")

    needed = [string(value) for tag, value in struct.iter_unpack("<qQ", dynamic) if tag == 1]  # DT_NEEDED
    undefined = [string(name) for name, _, _, section, _, _ in struct.iter_unpack("<IBBHQQ", dynsym) if name and section == 0]
    return ([n for n in needed if n.startswith(("libpython", "libtorch_python"))]
            + [u for u in undefined if u.startswith(("Py", "_Py"))])


def read_fatbins(path: str | os.PathLike[str]) -> list[Fatbin]:
    """The fat binaries of a shared object: its ELF .nv_fatbin section, else a scan of the whole file (a Windows
    extension, a PE file, holds them in a .nv_fatbin section too: the scan finds them there)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FatbinError(f"cannot read {path}: {exc.strerror}") from exc
    if data[:2] == b"MZ":  # PE (a .pyd)
        return parse_fatbins(data)
    try:
        section = elf_section(data, FATBIN_SECTION)
    except FatbinError as exc:
        raise FatbinError(f"{path}: {exc} (nor a PE file)") from exc
    return parse_fatbins(section if section is not None else data)


def all_images(fatbins: Iterable[Fatbin]) -> list[Image]:
    return sorted({image for fb in fatbins for image in fb.images})


def describe(images: Iterable[Image]) -> str:
    """Images in TORCH_CUDA_ARCH_LIST notation: "8.0;9.0;12.0+PTX" (PTX-only: "12.0 (PTX only)")."""
    images = list(images)
    sass = {i.version for i in images if i.kind == "sass"}
    ptx = {i.version for i in images if i.kind == "ptx"}
    parts = []
    for version in sorted(sass | ptx, key=_version_key):
        if version in sass and version in ptx:
            parts.append(f"{version}+PTX")
        elif version in sass:
            parts.append(version)
        else:
            parts.append(f"{version} (PTX only)")
    return ";".join(parts) if parts else "nothing (no SASS or PTX found)"


def _version_key(version: str) -> tuple[int, int, str]:
    match = re.fullmatch(r"(\d+)\.(\d+)([af]?)", version)
    if match is None:
        return (0, 0, version)
    return (int(match.group(1)), int(match.group(2)), match.group(3))


def parse_arch_list(value: str) -> set[Image]:
    """TORCH_CUDA_ARCH_LIST ("7.5;8.0;9.0a;12.1+PTX") as the images it asks nvcc for."""
    images = set()
    for entry in (e for e in re.split(r"[;,\s]+", value.strip()) if e):
        match = re.fullmatch(r"(\d+)\.(\d)([af]?)(\+PTX)?", entry)
        if match is None:
            raise ValueError(f"not an architecture: {entry!r} (expected e.g. 8.0, 9.0a, 12.1+PTX)")
        arch = int(match.group(1)) * 10 + int(match.group(2))
        images.add(Image(arch, "sass", match.group(3)))
        if match.group(4):
            images.add(Image(arch, "ptx", match.group(3)))
    return images


# ---------------------------------------------------------------------------------------------
# Deciding


@dataclass
class Verdict:
    ok: bool
    gpu: tuple[int, int]
    image: Image | None  # what CUDA will load on this GPU
    message: str

    @property
    def gpu_version(self) -> str:
        return f"{self.gpu[0]}.{self.gpu[1]}"


def parse_cc(value: str) -> tuple[int, int]:
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", value)
    if match is None:
        raise ValueError(f"not a compute capability: {value!r} (expected e.g. 9.0)")
    return int(match.group(1)), int(match.group(2))


def check(fatbins: Sequence[Fatbin], gpu: tuple[int, int], what: str = "causal_conv1d_cuda") -> Verdict:
    """Can a GPU of compute capability `gpu` run the code in `fatbins`? The message says why."""
    gpu_version = f"{gpu[0]}.{gpu[1]}"
    images = all_images(fatbins)
    built = describe(images)
    # The driver prefers the newest SASS that runs; without one it JIT-compiles the newest PTX.
    sass = [i for i in images if i.kind == "sass" and i.runs_on(gpu)]
    ptx = [i for i in images if i.kind == "ptx" and i.runs_on(gpu)]
    if sass:
        image = max(sass)
        how = "native SASS" if image.cc == gpu else f"SASS of {image.version} (binary compatible)"
        verdict = Verdict(True, gpu, image, f"{what}: built for {built}; this GPU ({gpu_version}) runs {image.name} ({how})")
    elif ptx:
        image = max(ptx)
        verdict = Verdict(
            True, gpu, image,
            f"{what}: built for {built}; this GPU ({gpu_version}) has no SASS and JIT-compiles "
            f"{image.name} PTX (slow first call; the driver must support that PTX version); "
            f"for native code rebuild with --arch {gpu_version} ({REBUILD_HINT})",
        )
    else:
        return Verdict(
            False, gpu, None,
            f"{what} is built for {built}, this GPU is {gpu_version}: no kernel image can run "
            f"here (CUDA would fail with 'no kernel image is available for execution on the "
            f"device'); rebuild with --arch {gpu_version} ({REBUILD_HINT})",
        )
    # Each translation unit needs its own image: flag a unit lacking what another has.
    if len(fatbins) > 1:
        sass_sets = {frozenset(i for i in fb.images if i.kind == "sass") for fb in fatbins}
        if len(sass_sets) > 1:
            short = [fb for fb in fatbins if not any(i.runs_on(gpu) for i in fb.images)]
            if short:
                verdict.ok = False
                verdict.message = (
                    f"{what} is built for {built}, but {len(short)} of its {len(fatbins)} fat "
                    f"binaries have no image for this GPU ({gpu_version}): some kernels would fail "
                    f"with 'no kernel image is available'; rebuild with --arch {gpu_version} "
                    f"({REBUILD_HINT})"
                )
    return verdict


def compare_expected(fatbins: Sequence[Fatbin], expected: str) -> list[str]:
    """Differences between the images present and those TORCH_CUDA_ARCH_LIST `expected` asks for."""
    want = parse_arch_list(expected)
    have = {i for i in all_images(fatbins) if i.kind != "other"}
    problems = []
    missing = sorted(want - have)
    extra = sorted(have - want)
    if missing:
        problems.append("missing " + ", ".join(i.name for i in missing))
    if extra:
        problems.append("unexpected " + ", ".join(i.name for i in extra))
    return problems


# ---------------------------------------------------------------------------------------------
# The installed extension and this machine's GPUs


def find_extension(module: str = "causal_conv1d._C") -> Path:
    """The file of an installed extension or kernel library (a dotted name: causal_conv1d._C), found on sys.path
    as the import system would, without importing it or its package."""
    *package, name = module.split(".")
    for entry in sys.path:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:  # .abi3.so, .cpython-312-...so; .pyd on Windows
            if (path := Path(entry or ".", *package, name + suffix)).is_file():
                return path
    raise FatbinError(f"the extension module {module} is not installed in this Python ({sys.executable})")


def gpu_capabilities() -> list[tuple[int, int]]:
    """Distinct compute capabilities of this machine's GPUs: torch first, then nvidia-smi; [] if none."""
    caps: list[tuple[int, int]] = []
    try:
        import torch  # noqa: PLC0415

        if torch.cuda.is_available():
            caps = [torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())]
    except Exception:  # no torch, or a broken CUDA setup: try the driver's tool
        caps = []
    if not caps:
        smi = shutil.which("nvidia-smi")
        if smi:
            try:
                out = subprocess.run(
                    [smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
                    capture_output=True, text=True, timeout=60, check=True,
                ).stdout
                caps = [parse_cc(line) for line in out.splitlines() if line.strip()]
            except (OSError, subprocess.SubprocessError, ValueError):
                caps = []
    return sorted(set(caps))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="check_arch.py",
        description="Which SASS/PTX an extension carries, and whether this GPU can run it.",
    )
    parser.add_argument("--module", default="causal_conv1d._C",
                        help="the installed kernel library to read (default: causal_conv1d._C)")
    parser.add_argument("--so", help="the shared object to read instead of an installed module")
    parser.add_argument("--gpu", action="append", metavar="X.Y",
                        help="compute capability to check against (repeatable; default: this machine's GPUs)")
    parser.add_argument("--expect", metavar="ARCH_LIST",
                        help='fail unless the images are exactly this TORCH_CUDA_ARCH_LIST, e.g. "8.0;9.0+PTX"')
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)

    try:
        path = Path(args.so) if args.so else find_extension(args.module)
        if args.so and not path.is_file():
            raise FatbinError(f"no such file: {path}")
        fatbins = read_fatbins(path)
        gpus = [parse_cc(g) for g in args.gpu] if args.gpu else gpu_capabilities()
        expected_problems = compare_expected(fatbins, args.expect) if args.expect else []
    except (FatbinError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    images = all_images(fatbins)
    verdicts = [check(fatbins, gpu, what=path.name) for gpu in gpus]
    ok = all(v.ok for v in verdicts) and not expected_problems and bool(images)
    if args.json:
        print(json.dumps({
            "file": str(path),
            "fatbins": len(fatbins),
            "built_for": describe(images),
            "images": [i.name for i in images],
            "gpus": [{"gpu": v.gpu_version, "ok": v.ok, "image": v.image.name if v.image else None,
                      "message": v.message} for v in verdicts],
            "expected": args.expect,
            "expected_problems": expected_problems,
            "ok": ok,
        }, indent=2))
    else:
        print(f"{path}: {len(fatbins)} fat binaries, built for {describe(images)}")
        if not gpus:
            print("no GPU found (no CUDA device for torch, no nvidia-smi): nothing to check against")
        for verdict in verdicts:
            print(("ok: " if verdict.ok else "error: ") + verdict.message)
        if args.expect:
            if expected_problems:
                print(f"error: expected exactly {args.expect}: " + "; ".join(expected_problems))
            else:
                print(f"ok: images match the expected list {args.expect}")
        if not images:
            print("error: no SASS or PTX found in this file")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
