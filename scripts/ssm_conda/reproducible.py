"""Byte-reproducible packages: rattler-build builds in one fixed folder, then the archive is written again
with the source's time (SOURCE_DATE_EPOCH, from recipe/shared/build-extension.sh) in place of the build's."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import re
import shutil
import stat
import struct
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn

import zstandard
from filelock import AcquireReturnProxy, FileLock, Timeout

from ssm_conda.channels import writable_dir
from ssm_conda.console import UsageError

BUILD_ROOT_ENV = "SSM_CONDA_BUILD_ROOT"
# Recorded in every package (its rendered recipe's host_prefix, work_dir): a rebuild uses the same folder, so
# it must be one that any user on any machine can make.
DEFAULT_BUILD_ROOT = Path("C:/bld/ssm-conda-build" if os.name == "nt" else "/tmp/ssm-conda-build")  # C:\bld: conda-forge's
EPOCH_FILE = "source-date-epoch"  # what build-extension.sh writes beside the work folder
ZSTD_LEVEL = 19  # conda-forge's; measured with `ssm-conda-dev bench-zstd`
# rattler-build's build time: index.json (milliseconds) and the rendered recipe's build_configuration
INDEX_TIME = re.compile(rb'"timestamp": \d+')
RECIPE_TIME = re.compile(rb"^  timestamp: \S+$", re.MULTILINE)
RUN_EXPORT = re.compile(rb"^( *)- spec: .*\n\1  from: .*\n\1  run_export: .*\n", re.MULTILINE)
RUN_EXPORTS = re.compile(rb"(?:%s)+" % RUN_EXPORT.pattern, re.MULTILINE)  # a run of consecutive ones
RESOLVED = re.compile(rb"^( *)resolved:\n((?:\1- .*\n(?:\1  .*\n)*)+)", re.MULTILINE)  # a list of package records
BUILD_ID_NOTE = struct.pack("<III", 4, 20, 3) + b"GNU\0"  # an ELF note: name size, SHA-1 size, NT_GNU_BUILD_ID


def chosen_root(environ: Mapping[str, str]) -> Path:
    """The build root of this machine: $SSM_CONDA_BUILD_ROOT, else the default; checked writable, not created."""
    return writable_dir(Path(environ.get(BUILD_ROOT_ENV) or DEFAULT_BUILD_ROOT).absolute(), BUILD_ROOT_ENV)


def _refuse(root: Path, why: str) -> NoReturn:
    raise UsageError(f"{BUILD_ROOT_ENV}={root}: {why}; set {BUILD_ROOT_ENV} to a folder of yours alone (packages record "
                     "it: a rebuild needs the same path, docs/reproducible.md)")


def _held(root: Path) -> AcquireReturnProxy:
    """`root` made (0700) or checked: this user's, no link on its path, no other user may write in it; its lock, held."""
    if root.resolve() != root:  # a link anywhere on the path: another user may point it elsewhere later
        _refuse(root, f"a symbolic link is on its path (it leads to {root.resolve()})")
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        if os.name == "posix" and (owner := root.lstat()).st_uid != os.geteuid():  # Windows keeps owners in ACLs
            _refuse(root, f"it belongs to another user (uid {owner.st_uid})")
        if os.name == "posix" and owner.st_mode & 0o022:
            _refuse(root, f"other users may write in it (mode {stat.S_IMODE(owner.st_mode):o})")
        root.chmod(0o700)  # nobody else reads what is built
        if (root / ".lock").is_symlink():  # planted before the root was private: a lock would open what it points to
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
        lock = FileLock(root / ".lock", mode=0o600)  # flock, or msvcrt's lock on Windows
        try:
            return lock.acquire(timeout=0)
        except Timeout:
            print(f"waiting for another build or verify to finish with {root} ...", flush=True)
            return lock.acquire()
    except OSError as exc:
        _refuse(root, f"cannot build there ({exc.strerror})")


def clear(root: Path, keep: tuple[str, ...] = (".lock", "tmp")) -> None:
    """Everything in the build root `root` but `keep` removed, links themselves (never what they point to): before a
    build, what rattler-build left of the one before (its build folder, its output channel)."""
    for entry in (entry for entry in root.iterdir() if entry.name not in keep):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


@contextlib.contextmanager
def build_root(root: Path) -> Iterator[Path]:
    """`root` held by this process alone (its build folder has a fixed name), emptied before and after; every temporary
    file of the build (rattler-build's, ours) goes to its tmp/."""
    with _held(root):
        clear(root, keep=(".lock",))
        (root / "tmp").mkdir()
        saved = os.environ.get("TMPDIR"), tempfile.tempdir
        os.environ["TMPDIR"] = tempfile.tempdir = str(root / "tmp")
        try:
            yield root
        finally:
            clear(root, keep=(".lock",))
            tempfile.tempdir = saved[1]
            if saved[0] is None:
                del os.environ["TMPDIR"]
            else:
                os.environ["TMPDIR"] = saved[0]


def build_in(root: Path, rendered: Any, output_dir: Path, **run_build: Any) -> Path:
    """rattler-build's build of a rendered variant in `root` (a folder build_root holds), its archive written into
    `output_dir` reproducibly; needs ToolConfiguration(keep_build=True) among `run_build` (the source's time is there)."""
    result = rendered.run_build(output_dir=str(root), no_build_id=True, package_format="conda:1", **run_build)
    built = Path(result.packages[0])
    (output_dir / built.parent.name).mkdir(exist_ok=True)
    epoch = int((root / "bld" / f"rattler-build_{rendered.recipe.package.name}" / EPOCH_FILE).read_text())
    return repack(built, output_dir / built.parent.name / built.name, epoch)


def _sorted_runs(data: bytes) -> bytes:
    """Each run of consecutive run-export entries of a rendered recipe (spec, from, run_export) in sorted order."""
    return RUN_EXPORTS.sub(lambda run: b"".join(sorted(entry[0] for entry in RUN_EXPORT.finditer(run[0]))), data)


def _sorted_resolved(data: bytes) -> bytes:
    """The records of each environment's packages (`resolved:`) by name: the solver's order changes from run to run."""
    def by_name(found: re.Match[bytes]) -> bytes:
        records = re.findall(rb"^%s- .*\n(?:%s  .*\n)*" % (found[1], found[1]), found[2], re.MULTILINE)
        ordered = sorted(records, key=lambda r: (re.findall(rb"^ *name: (.*)$", r, re.MULTILINE), r))
        return found[0][:found.start(2) - found.start()] + b"".join(ordered)
    return RESOLVED.sub(by_name, data)


def canonical(member: str, data: bytes, epoch: int) -> bytes:
    """index.json and the rendered recipe with the source's time, and their run exports and package records sorted
    (rattler-build lists them in another order each run: a hash map's, the solver's); other members as they are."""
    if member == "info/index.json":
        index = json.loads(data) | {"timestamp": epoch * 1000}
        index.update({key: sorted(index[key]) for key in ("depends", "constrains") if key in index})
        return json.dumps(index, indent=2, ensure_ascii=False).encode()
    if member == "info/recipe/rendered_recipe.yaml":
        stamp = time.strftime("  timestamp: %Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch)).encode()
        return _sorted_resolved(_sorted_runs(RECIPE_TIME.sub(stamp, data, count=1)))
    return data


def _retimed_tar(compressed: bytes, epoch: int) -> bytes:
    out = io.BytesIO()
    with (tarfile.open(fileobj=zstandard.ZstdDecompressor().stream_reader(io.BytesIO(compressed)), mode="r|") as old,
          tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as new):
        for member in old:
            data = canonical(member.name, old.extractfile(member).read(), epoch) if member.isfile() else None
            member.mtime, member.size = epoch, len(data) if data is not None else 0
            new.addfile(member, io.BytesIO(data) if data is not None else None)
    # several threads give the same bytes as one (zstd's promise for any number of workers from 1 up)
    return zstandard.ZstdCompressor(level=ZSTD_LEVEL, threads=-1, write_content_size=True).compress(out.getvalue())


def repack(source: Path, destination: Path, epoch: int) -> Path:
    """`source` written to `destination` with `epoch` as its build time and every member's time."""
    partial = destination.with_name(f".{destination.name}.partial")
    try:
        with zipfile.ZipFile(source) as old, zipfile.ZipFile(partial, "w", zipfile.ZIP_STORED) as new:
            for name in old.namelist():
                info = zipfile.ZipInfo(name, date_time=time.gmtime(max(epoch, 315532800))[:6])  # zip's times start in 1980
                info.create_system, info.external_attr = 3, 0o644 << 16
                data = old.read(name)
                new.writestr(info, _retimed_tar(data, epoch) if name.endswith(".tar.zst") else data)
        partial.chmod(0o644)  # servable: rattler-build writes 0600
        return partial.replace(destination)
    finally:
        partial.unlink(missing_ok=True)


def without_build_id(data: bytes) -> bytes:
    """An ELF file's bytes with its GNU build ID zeroed (other files unchanged)."""
    at = data.find(BUILD_ID_NOTE) if data.startswith(b"\x7fELF") else -1
    return data if at < 0 else data[:at + 16] + bytes(20) + data[at + 36:]


def _how(ours: bytes, theirs: bytes) -> str:
    if without_build_id(ours) == without_build_id(theirs):
        return "build ID"
    if INDEX_TIME.sub(b"", RECIPE_TIME.sub(b"", ours)) == INDEX_TIME.sub(b"", RECIPE_TIME.sub(b"", theirs)):
        return "timestamp"
    return "content"


def differing_files(ours: Path, theirs: Path) -> dict[str, str]:
    """The files of two unpacked packages that differ, and how: build ID, timestamp, content, or missing."""
    def files(root: Path) -> dict[str, Path]:
        return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file() or p.is_symlink()}

    mine, other = files(ours), files(theirs)
    found = {name: "only in the original" for name in mine.keys() - other.keys()}
    found |= {name: "only in the rebuild" for name in other.keys() - mine.keys()}
    for name in sorted(mine.keys() & other.keys()):
        a, b = (str(p.readlink()).encode() if p.is_symlink() else p.read_bytes() for p in (mine[name], other[name]))
        if a != b:
            found[name] = _how(a, b)
    return dict(sorted(found.items()))
