"""CPython 3.14 for the tests where the machine has none: Debian sid's binary packages, run through sid's own dynamic
loader (they need a newer glibc than the host's), and torch installed for it into a folder of its own. Both are made
once in a cache folder, staged under a temporary name and renamed when complete."""

from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path

MIRROR = "http://deb.debian.org/debian"
INDEX = f"{MIRROR}/dists/sid/main/binary-amd64/Packages.xz"
# python3.14 and the libraries it links to; libstdc++6 for torch, so that no library of the host's joins sid's libc
ROOTS = ("python3.14", "libstdc++6")
# following only these sections keeps out data and tools (tzdata, media-types, netbase, debconf, readline-common...)
SECTIONS = ("libs", "python")
TRIPLET = "x86_64-linux-gnu"


def _index() -> dict[str, dict[str, str]]:
    with urllib.request.urlopen(INDEX) as response:
        text = lzma.decompress(response.read()).decode()
    packages: dict[str, dict[str, str]] = {}
    for stanza in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if line[:1] not in (" ", "\t", "") and ": " in line)
        if "Package" in fields:
            packages[fields["Package"]] = fields
    return packages


def _closure(packages: dict[str, dict[str, str]]) -> list[dict[str, str]]:
    """ROOTS and their Depends and Pre-Depends (each alternative's first), by name or by a package that Provides it."""
    provides = {p.split()[0]: name for name, fields in packages.items()
                for p in fields.get("Provides", "").split(",") if p.strip()}
    todo, taken = list(ROOTS), dict[str, dict[str, str]]()
    while todo:
        name = todo.pop()
        fields = packages.get(name) or packages.get(provides.get(name, ""))
        if fields is None:
            raise RuntimeError(f"{INDEX} has no package {name}")
        if fields["Package"] in taken or fields.get("Section") not in SECTIONS:
            continue
        taken[fields["Package"]] = fields
        for relation in ("Pre-Depends", "Depends"):
            todo += [alt.split("|")[0].split()[0].split(":")[0] for alt in fields.get(relation, "").split(",") if alt.strip()]
    return sorted(taken.values(), key=lambda fields: fields["Package"])


def _download(fields: dict[str, str], folder: Path) -> Path:
    url, deb = f"{MIRROR}/{fields['Filename']}", folder / Path(fields["Filename"]).name
    digest = hashlib.sha256()
    with urllib.request.urlopen(url) as response, open(deb, "wb") as out:
        while chunk := response.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != fields["SHA256"]:
        raise RuntimeError(f"{url}: sha256 {digest.hexdigest()}, but {INDEX} says {fields['SHA256']}")
    return deb


def _publish(stage: Path, final: Path) -> None:
    """Rename the complete STAGE to FINAL, unless another run got there first."""
    try:
        stage.rename(final)
    except OSError:
        if not final.exists():
            raise
        shutil.rmtree(stage)


def python314(cache: Path) -> Path:
    """The wrapper `bin/python3.14` that runs Debian sid's CPython 3.14 with sid's libraries, made in cache/cpython-3.14-sid."""
    root = cache / "cpython-3.14-sid"
    wrapper = root / "bin" / "python3.14"
    if wrapper.exists():
        return wrapper
    cache.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".cpython-3.14-sid-", dir=cache))
    try:
        with tempfile.TemporaryDirectory(dir=cache) as debs:
            for fields in _closure(_index()):
                subprocess.run(["dpkg-deb", "-x", _download(fields, Path(debs)), stage], check=True)
        # e.g. usr/lib/python3.14/sitecustomize.py -> /etc/python3.14/sitecustomize.py: the root's, not the host's
        for link in [p for p in stage.rglob("*") if p.is_symlink() and os.readlink(p).startswith("/")]:
            target = stage / os.readlink(link).lstrip("/")
            link.unlink()
            link.symlink_to(os.path.relpath(target, link.parent))
        loader = next((p for p in ("usr/lib64", "lib64") if (stage / p / "ld-linux-x86-64.so.2").exists()), None)
        if loader is None:
            raise RuntimeError(f"sid's libc6 has no lib64/ld-linux-x86-64.so.2 (nor under usr/), see {INDEX}")
        libs = ":".join(str(root / p) for p in (f"usr/lib/{TRIPLET}", f"lib/{TRIPLET}") if (stage / p).is_dir())
        # No PYTHONHOME (every child process would inherit it): with lib -> usr/lib, Python finds its prefix (the
        # root) from the wrapper's path, lib/python3.14/os.py being the landmark it looks for above its executable.
        if not (stage / "lib").exists():
            (stage / "lib").symlink_to("usr/lib")
        # --argv0 makes sys.executable this wrapper, which child Pythons (multiprocessing, pip) then also go through;
        # --library-path reaches only this process, not what it starts (LD_LIBRARY_PATH would give sid's libc to gcc).
        (stage / "bin").mkdir()
        (stage / "bin" / "python3.14").write_text(
            f'#!/bin/sh\nexec "{root}/{loader}/ld-linux-x86-64.so.2" --argv0 "{root}/bin/python3.14" --library-path "{libs}" '
            f'"{root}/usr/bin/python3.14" "$@"\n')
        (stage / "bin" / "python3.14").chmod(0o755)
        _publish(stage, root)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return wrapper


def torch_site(python: Path, cache: Path, wheel_dirs: list[Path], torch: str = "2.13.0",
               also: tuple[str, ...] = ("numpy",)) -> Path:
    """A folder for PYTHONPATH with torch, its dependencies and ALSO (numpy: torch warns on import without it) installed
    for PYTHON from the wheels in WHEEL_DIRS, else PyPI's (pip's own configuration left out: a local index's CPU torch),
    by pip run from its own wheel there; made in cache/torch-VERSION-HASH."""
    requirements = [f"torch=={torch}", *also]
    key = hashlib.sha256("\n".join(requirements).encode()).hexdigest()[:8]
    site = cache / f"torch-{torch}-{key}"
    if site.exists():
        return site
    pip = max((w for d in wheel_dirs for w in d.glob("pip-*-py3-none-any.whl")), key=lambda w: w.name, default=None)
    if pip is None:
        raise RuntimeError(f"no pip wheel in {', '.join(map(str, wheel_dirs))}")
    cache.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{site.name}-", dir=cache))
    try:
        subprocess.run([python, f"{pip}/pip", "install", "--quiet", "--disable-pip-version-check", "--root-user-action=ignore",
                        "--only-binary=:all:", "--no-compile", "--target", stage,
                        *(f"--find-links={d}" for d in wheel_dirs), *requirements],
                       check=True, env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
        _publish(stage, site)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return site
