"""Small real packages named as recipe/ names them, and damaged copies of them, for every test that hands
archives to a command (upload's pre-check, verify, gpu-test, ...). A good package looks like ours: its module in the
site-packages, its test files, and the depends the recipe renders (the run requirements and the run exports of
the build and host requirements, as a real build lists them), version-independent (noarch: python in linux-64).

A damage is a function of a good package lying in a channel (CHANNEL/SUBDIR/FILE): it damages the file in
place, or puts the bad file beside it, and returns the path the command will find. DAMAGES names them all;
HOSTILE those crafted to escape the package, bomb the disk or bring foreign files and depends (issue 41).
"""

from __future__ import annotations

import functools
import io
import json
import random
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zstandard
from rattler.package_streaming import extract
from rattler_build import assemble_package
from ssm_conda.matrix import PlannedVariant, plan
from ssm_conda.project import package as project_package
from ssm_conda.selection import Selection

# conda-forge's names the issue saw uploaded from the stand-in channel, and another project's package
FOREIGN_NAMES = ("python", "libgcc", "cuda-nvcc_linux-64", "numpy")


@functools.cache
def rendered_variant(cuda: str = "13.0", python: str = "3.10", torch: str = "2.13", generation: str = "all",
                     package: str = "causal-conv1d", platform: str = "linux-64") -> PlannedVariant:
    """One variant of a recipe, as rattler-build renders it."""
    selection = Selection(cuda=cuda, python=python, torch=torch, generations=(generation,), packages=(package,))
    (variant,) = plan(selection, target_platform=platform)
    return variant


def rendered_name(*variant: str, platform: str = "linux-64") -> tuple[str, str, str]:
    """(name, version, build string) of one variant of a recipe (rendered_variant's arguments)."""
    rendered = rendered_variant(*variant, platform=platform)
    return rendered.package, str(rendered.rendered.recipe.package.version), rendered.build_string


def run_exports(variant: PlannedVariant) -> list[str]:
    """The depends conda-forge's run exports add, as causal-conv1d's and mamba-ssm's real builds list them."""
    major = variant.cuda.split(".")[0]
    torch_next = f"{variant.torch.split('.')[0]}.{int(variant.torch.split('.')[1]) + 1}"
    return ["__glibc >=2.28,<3.0.a0", "cuda-arch >=9.0", f"cuda-cudart >={variant.cuda}.96,<{int(major) + 1}.0a0",
            f"cuda-version >={variant.cuda},<{int(major) + 1}", "libgcc >=15", "libstdcxx >=15",
            f"libtorch >={variant.torch}.0,<{torch_next}.0a0", f"pytorch >={variant.torch}.0,<{torch_next}.0a0",
            f"cpython >={variant.python}", "_python_abi3_support 1.*"]


def our_files(files: Path, variant: PlannedVariant, text: str = "") -> Path:
    """What a build of `variant` installs, in small: its module (with the kernel library), dist-info and the module that
    loads the kernels in site-packages, its test files."""
    record, version = project_package(variant.package), variant.rendered.recipe.package.version
    site = files / "site-packages"
    for path, content in {f"{record.module}/__init__.py": f"# {variant.build_string} {text}\n",
                          f"{record.module}-{version}.dist-info/METADATA": f"Name: {record.module}\nVersion: {version}\n",
                          f"{record.module}/_C.abi3.so": "ELF", f"{record.extensions[0]}.py": "import torch\n",
                          f"__pycache__/{record.extensions[0]}.cpython-{variant.python.replace('.', '')}.pyc": "pyc"}.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(content)
    (files / "etc" / "conda" / "test-files" / variant.package).mkdir(parents=True)
    (files / "etc" / "conda" / "test-files" / variant.package / "test_import.py").write_text(f"import {record.module}\n")
    return files


def windows_package(tmp: Path, variant: PlannedVariant, extension: str = "causal_conv1d/_C.pyd") -> Path:
    """A win-64 build of causal-conv1d `variant`, in small: site-packages with the kernels' .pyd, its test files,
    depends the recipe's run requirements and the run exports of vs2022, CUDA, python-abi3 and pytorch."""
    files = tmp / "win-files"
    for path in ("site-packages/causal_conv1d/__init__.py", "site-packages/causal_conv1d-1.7.0.dist-info/METADATA",
                 "site-packages/causal_conv1d_cuda.py",
                 f"site-packages/{extension}", "etc/conda/test-files/causal-conv1d/test_import.py"):
        (files / path).parent.mkdir(parents=True, exist_ok=True)
        (files / path).write_text("ours\n")
    depends = [*variant.rendered.recipe.requirements.run, "vc >=14.3,<15", "vc14_runtime >=14.44.35208", "ucrt >=10.0.20348.0",
               "cuda-version >=13.0,<14", "cuda-arch >=9.0", "cpython >=3.10", "_python_abi3_support 1.*",
               "pytorch >=2.13.0,<2.14.0a0", "libtorch >=2.13.0,<2.14.0a0"]
    return Path(assemble_package(variant.package, "1.7.0", "win-64", variant.build_string, tmp / "win-out", files_dir=files,
                                 depends=depends, noarch="python").path)


def build_package(out: Path, name: str, version: str, build: str, subdir: str = "linux-64", noarch: str | None = None,
                  text: str = "") -> Path:
    """A real package made by rattler-build's assembler into `out`: share/NAME/id.txt, no dependencies.
    `text` goes into the file: another text is another build (another sha256) under the same name."""
    with tempfile.TemporaryDirectory() as files:
        (Path(files) / "share" / name).mkdir(parents=True)
        (Path(files) / "share" / name / "id.txt").write_text(f"{name} {version} {build} {subdir} {text}\n")
        out.mkdir(parents=True, exist_ok=True)
        return Path(assemble_package(name, version, subdir, build, out, files_dir=files, noarch=noarch).path)


def good_package(channel: Path, *variant: str, subdir: str = "linux-64", text: str = "") -> Path:
    """A package of ours (rendered_variant(*variant)) in CHANNEL/SUBDIR, with what its build holds and depends on.
    `text` goes into its module: another text is another build (another sha256) under the same name."""
    rendered = rendered_variant(*variant, platform=subdir)
    name, version, build = rendered_name(*variant, platform=subdir)
    (channel / subdir).mkdir(parents=True, exist_ok=True)
    depends = [*rendered.rendered.recipe.requirements.run, *run_exports(rendered)]
    with tempfile.TemporaryDirectory() as files:
        files_dir = our_files(Path(files), rendered, text)
        return Path(assemble_package(name, version, subdir, build, channel / subdir, files_dir=files_dir, depends=depends,
                                     noarch="python").path)


def parts(package: Path) -> tuple[str, str, str]:
    name, version, build = package.name.removesuffix(".conda").rsplit("-", 2)
    return name, version, build


def _rewritten(package: Path, drop: str = "", garble: str = "") -> Path:
    """The .conda zip again, less the members starting with `drop`, and those starting with `garble`
    replaced by as many random bytes (with a valid CRC: zipfile computes it)."""
    with zipfile.ZipFile(package) as old:
        members = [(info, old.read(info)) for info in old.infolist() if not (drop and info.filename.startswith(drop))]
    with zipfile.ZipFile(package, "w") as new:
        for info, data in members:
            garbled = garble and info.filename.startswith(garble)
            new.writestr(info, random.Random(info.filename).randbytes(len(data)) if garbled else data)
    return package


def _replaced(package: Path, name: str, subdir: str, noarch: str | None = None) -> Path:
    """The file replaced by a real package of this version and build whose index.json says `name` and `subdir`."""
    with tempfile.TemporaryDirectory() as out:
        shutil.copyfile(build_package(Path(out), name, *parts(package)[1:], subdir=subdir, noarch=noarch), package)
    return package


def truncated(package: Path) -> Path:
    package.write_bytes(package.read_bytes()[: package.stat().st_size // 2])
    return package


def random_bytes(package: Path) -> Path:
    package.write_bytes(random.Random(package.name).randbytes(package.stat().st_size))
    return package


def empty(package: Path) -> Path:
    package.write_bytes(b"")
    return package


def zip_of_junk(package: Path) -> Path:
    with zipfile.ZipFile(package, "w") as junk:
        junk.writestr("junk.txt", "not a conda package\n")
    return package


def no_pkg_member(package: Path) -> Path:
    return _rewritten(package, drop="pkg-")


def no_info_member(package: Path) -> Path:
    return _rewritten(package, drop="info-")


def garbage_pkg_member(package: Path) -> Path:
    return _rewritten(package, garble="pkg-")


def index_lies_about_name(package: Path) -> Path:
    return _replaced(package, "numpy", package.parent.name)


def index_lies_about_subdir(package: Path) -> Path:
    return _replaced(package, parts(package)[0], "linux-aarch64" if package.parent.name == "linux-64" else "linux-64")


def noarch_in_platform_folder(package: Path) -> Path:
    """index.json says noarch: generic, and the subdir of the folder it lies in."""
    return _replaced(package, parts(package)[0], package.parent.name, noarch="generic")


def symlink_out_of_the_folder(package: Path) -> Path:
    """The file moved beside the channel, a symbolic link to it in its place."""
    outside = package.parents[2] / "elsewhere" / package.name
    outside.parent.mkdir(exist_ok=True)
    package.rename(outside)
    package.symlink_to(outside)
    return package


def foreign_package(package: Path, name: str = "numpy") -> Path:
    """A real small package of another name beside ours (the good one is left as it is)."""
    return build_package(package.parent, name, "2.0.0", "py312_0", subdir=package.parent.name)


class Zeros(io.RawIOBase):
    """`size` zero bytes, read as a file: a zip bomb's payload, never held in memory or on disk."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readinto(self, buffer) -> int:  # type: ignore[override]
        count = min(len(buffer), self.left)
        buffer[:count], self.left = bytes(count), self.left - count
        return count


Entries = list[tuple[tarfile.TarInfo, Any]]  # each member's header and data (a file object, or None)


def _retarred(package: Path, member: str, edit: Callable[[Entries], Entries]) -> Path:
    """The .conda with its info- or pkg- tar (`member`) written again as `edit` changes its (header, data) list: streamed
    through zstd, so a zip bomb's gigabyte is never written out."""
    with zipfile.ZipFile(package) as old:
        members = [(info, old.read(info)) for info in old.infolist()]
    with zipfile.ZipFile(package, "w") as new:
        for info, data in members:
            if info.filename.startswith(member):
                stream = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data))
                with tarfile.open(fileobj=stream, mode="r|") as tar:
                    entries: Entries = [(m, io.BytesIO(tar.extractfile(m).read()) if m.isfile() else None) for m in tar]
                out = io.BytesIO()
                with zstandard.ZstdCompressor(level=1).stream_writer(out, closefd=False) as writer, \
                        tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                    tar.copybufsize = 1 << 20
                    for header, body in edit(entries):
                        tar.addfile(header, body)
                data = out.getvalue()
            new.writestr(info, data)
    return package


def _tar_entry(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "", data: bytes = b"x") -> tuple[tarfile.TarInfo, Any]:
    header = tarfile.TarInfo(name)
    header.type, header.linkname, header.mode = kind, linkname, 0o644
    if kind == tarfile.REGTYPE:
        header.size = len(data)
        return header, io.BytesIO(data)
    return header, None


def _payload_added(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> Callable[[Path], Path]:
    def damage(package: Path) -> Path:
        return _retarred(package, "pkg-", lambda entries: [*entries, _tar_entry(name, kind, linkname)])

    return damage


def _paths_json_lists(path: str) -> Callable[[Path], Path]:
    """info/paths.json lists `path` too (as a file of 1 byte), the payload unchanged."""

    def edit(entries: Entries) -> Entries:
        for header, body in entries:
            if header.name == "info/paths.json" and body is not None:
                paths = json.loads(body.getvalue())
                paths["paths"].append({"_path": path, "path_type": "hardlink", "sha256": "0" * 64, "size_in_bytes": 1})
                return [e for e in entries if e[0] is not header] + [_tar_entry(header.name, data=json.dumps(paths).encode())]
        raise AssertionError("no info/paths.json")

    def damage(package: Path) -> Path:
        return _retarred(package, "info-", edit)

    return damage


def zip_bomb(package: Path) -> Path:
    """A 1 GiB file of zeros in the payload: a 30 KB package."""
    header = tarfile.TarInfo("lib/zeros")
    header.size = 1 << 30
    return _retarred(package, "pkg-", lambda entries: [*entries, (header, Zeros(header.size))])


def _rebuilt(package: Path, add: str = "", depends: tuple[str, ...] = (), build: str = "", per_python: bool = False) -> Path:
    """The package assembled again from its own files and index.json, with the file `add`, more depends or another
    build string (then another file name: the old file goes); `per_python`: not version-independent (no noarch)."""
    with tempfile.TemporaryDirectory() as tmp:
        files = Path(tmp, "files")
        extract(package, files)
        index = json.loads((files / "info" / "index.json").read_text())
        shutil.rmtree(files / "info")
        if add:
            (files / add).parent.mkdir(parents=True, exist_ok=True)
            (files / add).write_text("foreign\n")
        out = assemble_package(index["name"], index["version"], index["subdir"], build or index["build"], Path(tmp, "out"),
                               files_dir=files, depends=[*index["depends"], *depends],
                               noarch=None if per_python else index.get("noarch"))
        package.unlink()
        return Path(shutil.copy2(out.path, package.parent / Path(out.path).name))


def _foreign_file(path: str) -> Callable[[Path], Path]:
    def damage(package: Path) -> Path:
        return _rebuilt(package, add=path.replace("SITE", "site-packages"))

    return damage


def not_version_independent(package: Path) -> Path:
    """Our files and name, linked as a package of one Python (no noarch: python): not what the recipes build."""
    return _rebuilt(package, per_python=True)


def depends_on_evil_package(package: Path) -> Path:
    return _rebuilt(package, depends=("evil-package",))


def another_build_hash(package: Path) -> Path:
    """Named and indexed with a build string variants/ does not render (its hash changed: another recipe)."""
    *variant, _hash, number = parts(package)[2].split("_")
    return _rebuilt(package, build="_".join([*variant, "hdeadbee", number]))


HOSTILE: dict[str, Callable[[Path], Path]] = {  # issue 41: each refused before anything is unpacked or sent
    "paths.json lists ../../etc/passwd": _paths_json_lists("../../etc/passwd"),
    "paths.json lists /etc/hostname": _paths_json_lists("/etc/hostname"),
    "symlink to /etc": _payload_added("lib/etc", tarfile.SYMTYPE, "/etc"),
    "symlink to ../../x": _payload_added("lib/up", tarfile.SYMTYPE, "../../x"),
    # inside the package by itself, but a chain of such links climbs out: lib/d/u/d/u/.. is outside
    "symlink upwards": _payload_added("lib/d/u", tarfile.SYMTYPE, ".."),
    "member named ../x": _payload_added("../x"),
    "member named /abs": _payload_added("/abs"),
    "hardlink out": _payload_added("lib/hard", tarfile.LNKTYPE, "../../etc/passwd"),
    "fifo": _payload_added("lib/fifo", tarfile.FIFOTYPE),
    "zip bomb": zip_bomb,
    "foreign bin/python3.11": _foreign_file("bin/python3.11"),
    "foreign lib/libstdc++.so.6": _foreign_file("lib/libstdc++.so.6"),
    "foreign site-packages/torch": _foreign_file("SITE/torch/__init__.py"),
    "depends on evil-package": depends_on_evil_package,
    "another build hash": another_build_hash,
    "not version-independent": not_version_independent,
}
DAMAGES: dict[str, Callable[[Path], Path]] = {
    **{f.__name__.replace("_", " "): f
       for f in (truncated, random_bytes, empty, zip_of_junk, no_pkg_member, no_info_member, garbage_pkg_member,
                 index_lies_about_name, index_lies_about_subdir, noarch_in_platform_folder, symlink_out_of_the_folder,
                 foreign_package)},
    **HOSTILE,
}
