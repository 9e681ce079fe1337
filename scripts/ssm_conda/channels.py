"""Conda channels: local ones indexed so conda, mamba and pixi install from them, any one's repodata read."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse
from urllib.request import url2pathname

import zstandard

from ssm_conda.console import PipelineError, UsageError, user_path

if TYPE_CHECKING:
    from rattler import SparseRepoData
    from rattler.networking import Client
    from rattler.package import IndexJson, PathsEntry

DEFAULT_CHANNEL = "conda-forge"
CHANNEL_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*(/label/[A-Za-z0-9_.-]+)?")
LOGS_DIR = "build-logs"  # in the output channel: `ssm-conda build` writes a log per variant there


def index_channel(channel_dir: Path, force: bool = False) -> None:
    """Write repodata.json for every subdir folder, this machine's and noarch/ always (conda requires them); `force`
    re-reads files replaced under their name."""
    from rattler import Subdir
    from rattler.index import index_fs

    known = {str(s) for s in Subdir.all()}
    subdirs = sorted({str(Subdir.current()), "noarch"} | {p.name for p in channel_dir.glob("*/") if p.name in known})
    for subdir in subdirs:
        (channel_dir / subdir).mkdir(parents=True, exist_ok=True)
        asyncio.run(index_fs(channel_dir, target_platform=Subdir(subdir), force=force))
    # as conda-index writes them, whatever the umask: rattler-build writes packages 0600, which a web server cannot read;
    # the build logs are served beside the packages
    folders = [channel_dir / name for name in (*subdirs, LOGS_DIR) if (channel_dir / name).is_dir()]
    for path in [*folders, *(f for folder in folders for f in folder.rglob("*"))]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)


def writable_dir(path: Path, what: str) -> Path:
    """`path`, if it is a folder this process can write in or can be made one; else a UsageError. Creates nothing."""
    existing = next(p for p in (user_path(path, what), *path.parents) if p.exists())  # the path's length checked first
    if not existing.is_dir():
        raise UsageError(f"{what}={path}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{what}={path}: {existing} is not writable (name a folder you can write to)")
    return path


def normalise_channel(channel: str) -> str:
    """A channel name, an http(s)/file URL, or a local directory (turned into a file:// URL)."""
    parsed = urlparse(channel)
    if parsed.scheme in ("http", "https") and parsed.netloc:
        return channel
    if parsed.scheme == "file":
        if not (path := user_path(url2pathname(parsed.path), "channel")).is_dir():
            raise UsageError(f"channel {channel!r}: {path} is not a directory")
        return channel
    if (path := user_path(channel, "channel")).is_dir():
        return path.resolve().as_uri()
    if channel.startswith((".", "/", "~")):
        raise UsageError(f"no such channel directory: {channel}")
    if not parsed.scheme and CHANNEL_NAME_RE.fullmatch(channel):
        return channel
    raise UsageError(f"channel {channel!r} is not a channel name, an http(s):// or file:// URL, or an existing directory")


def rattler_client(headers: dict[str, str] | None = None) -> Client:
    """py-rattler's client on rattler's auth storage; a malformed auth file is bad input, never quoted (it may hold a token)."""
    from rattler.networking import AuthenticationMiddleware, Client

    try:
        return Client([AuthenticationMiddleware()], headers=headers, user_agent="ssm-conda", timeout=30)
    except Exception as exc:  # py-rattler's AuthenticationStorageError
        where = re.sub(r"^(failed to parse .+?): .*?((?: at line \d+ column \d+)?)$", r"\1\2", " ".join(str(exc).split()))
        raise UsageError(f"{where}: not what rattler's auth storage holds (JSON: each host mapped to its BearerToken, "
                         "CondaToken or BasicHTTP entry); fix it, or log in again with `rattler-build auth login`") from exc


def fetch_repodata(channel: str, subdir: str, headers: dict[str, str] | None = None,
                   cache: Path | None = None) -> SparseRepoData | None:
    """One subdir's repodata, fetched afresh unless `cache` names a folder to reuse; None when the channel has no such subdir."""
    from rattler import Channel, Subdir, fetch_repo_data
    from rattler.networking import FetchRepoDataOptions

    client = rattler_client(headers)
    options = FetchRepoDataOptions(cache_action="cache-or-fetch" if cache else "no-cache")
    with tempfile.TemporaryDirectory() as scratch:
        try:
            (repodata,) = asyncio.run(fetch_repo_data(channels=[Channel(channel)], platforms=[Subdir(subdir)], client=client,
                                                      cache_path=cache or scratch, callback=None, fetch_options=options))
        except Exception as exc:  # rattler's FetchRepoDataError: its first line, and the last cause
            lines = [line.removeprefix("Caused by: ") for line in str(exc).splitlines() if line.strip()]
            if lines and lines[0] == "repodata not found":
                return None
            why = lines[0] + (f" ({lines[-1]})" if len(lines) > 1 else "") if lines else repr(exc)
            raise PipelineError(f"cannot read the repodata of {channel} ({subdir}): {why}") from exc
    return repodata


def channel_repodata(channels: Sequence[str], subdirs: Sequence[str]) -> list[SparseRepoData]:
    """The repodata of each channel's subdirs, each read once; a channel that has none of them is an error."""
    found = []
    for channel in channels:
        if not (answered := [r for r in (fetch_repodata(channel, subdir) for subdir in subdirs) if r is not None]):
            error = UsageError if channel.startswith("file://") else PipelineError
            raise error(f"channel {channel} is not a conda channel: it has no repodata.json for {', '.join(subdirs)}")
        found += answered
    return found


ARCHIVE_SUFFIXES = (".conda", ".tar.bz2")
# Ours unpack to 23 MiB (mamba-ssm sm90, measured), ~42 MiB all-architecture (34.7 MB packed): 12x room, yet no zip bomb
MAX_UNPACKED_BYTES = 512 << 20
SUBDIR_RE = re.compile(r"noarch|[a-z0-9]+-[a-z0-9_]+")


def name_and_build_of(filename: str) -> tuple[str, str]:
    """Name and build string of a package file name (name-version-build.conda or .tar.bz2)."""
    parts = filename.removesuffix(".conda").removesuffix(".tar.bz2").rsplit("-", 2)
    return (parts[0], parts[-1]) if len(parts) == 3 else (filename, "")


def find_packages(inputs: Sequence[str | Path], name: str | None = None) -> list[Path]:
    """Archive files, and the archives of channels (per subdir; only `name`'s, if given), each once."""
    found: list[Path] = []
    for value in inputs:
        path = user_path(value, "package")
        if path.is_dir():
            subdirs = sorted(p for p in path.iterdir() if p.is_dir() and SUBDIR_RE.fullmatch(p.name))
            found += [f for subdir in subdirs for f in sorted(subdir.iterdir()) if f.is_file()
                      and f.name.endswith(ARCHIVE_SUFFIXES) and (name is None or name_and_build_of(f.name)[0] == name)]
        elif not path.exists():
            raise UsageError(f"no such file or directory: {path}")
        elif not path.name.endswith(ARCHIVE_SUFFIXES):
            raise UsageError(f"not a conda package: {path} (name a .conda file or a channel directory such as output/)")
        else:
            found.append(path)
    return list(dict.fromkeys(p.resolve() for p in found))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _entry_problem(path: Path, entry: PathsEntry) -> str | None:
    """What rattler's full package validation checks of one file of info/paths.json, which must lie inside the prefix."""
    kind = entry.path_type
    if _escapes(str(entry.relative_path)):
        return "lies outside the prefix (info/paths.json may list only relative paths without ..)"
    if not (path.is_symlink() if kind.softlink else path.is_dir() if kind.directory else path.is_file()):
        return "is missing from the payload"
    if kind.hardlink and entry.size_in_bytes is not None and path.stat().st_size != entry.size_in_bytes:
        return f"has {path.stat().st_size} bytes, info/paths.json says {entry.size_in_bytes}"
    if kind.hardlink and entry.sha256 is not None and sha256_of(path) != entry.sha256.hex():
        return "has another sha256 than info/paths.json lists"
    return None


def _escapes(name: str) -> bool:
    return name.startswith("/") or ".." in name.split("/")


def _tar_members(path: Path) -> Iterator[tarfile.TarInfo]:
    """The tar headers of a .tar.bz2, or of a .conda's info and pkg tars, read as a stream: nothing is written."""
    if path.name.endswith(".tar.bz2"):
        with tarfile.open(path, "r|bz2") as tar:
            yield from tar
        return
    with zipfile.ZipFile(path) as conda:
        for name in [n for n in conda.namelist() if n.endswith(".tar.zst")]:
            with conda.open(name) as raw, zstandard.ZstdDecompressor().stream_reader(raw) as stream:
                yield from tarfile.open(fileobj=stream, mode="r|")


def _check_members(path: Path) -> None:
    """Before anything is unpacked: no member lies or links outside the package, none is a device or fifo, and all
    unpack to at most MAX_UNPACKED_BYTES."""
    total = 0
    for member in _tar_members(path):
        # a link may only point down from its folder: a chain of such links cannot leave the package either
        if _escapes(member.name) or (member.issym() or member.islnk()) and _escapes(member.linkname):
            where = f"links to {member.linkname}, upwards or" if member.linkname else "lies"
            raise ValueError(f"member {member.name} {where} outside the package")
        if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
            raise ValueError(f"member {member.name} is a device or fifo (a package holds only files, folders and links)")
        if (total := total + member.size) > MAX_UNPACKED_BYTES:
            raise ValueError(f"unpacks to over {MAX_UNPACKED_BYTES >> 20} MiB (at member {member.name}): a zip bomb?")


def check_archive(path: Path, into: Path | None = None) -> IndexJson:
    """The index.json of an archive whose tar headers are sound and that py-rattler unpacks completely, every file as
    info/paths.json lists it; else ValueError. Unpacked into `into` (kept) where given, else into a temporary folder."""
    from rattler.package import IndexJson, PathsJson
    from rattler.package_streaming import extract

    if path.stat().st_size == 0:
        raise ValueError("empty file")
    try:
        _check_members(path)
    except (OSError, EOFError, tarfile.TarError, zipfile.BadZipFile, zstandard.ZstdError) as exc:
        raise ValueError(f"not a valid conda archive ({' '.join(str(exc).split())[:120]})") from exc
    with contextlib.nullcontext(str(into)) if into else tempfile.TemporaryDirectory(prefix="ssm-conda-check-") as scratch:
        try:
            extract(path, scratch)
            index, paths = IndexJson.from_package_directory(scratch), PathsJson.from_package_directory(scratch)
        except Exception as exc:  # rattler raises its own exception types
            why = " ".join(str(exc).replace(scratch + "/", "").split())[:120]
            raise ValueError(f"not a valid conda archive ({why})") from exc
        for entry in paths.paths:
            if problem := _entry_problem(Path(scratch, entry.relative_path), entry):
                raise ValueError(f"{entry.relative_path} {problem} (damaged archive)")
    return index
