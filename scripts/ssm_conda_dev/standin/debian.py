"""Debian packages the stand-in repacks for linux-aarch64: the cross gcc and binutils, the aarch64
glibc and GCC runtime, and qemu-user for the load test. apt-get downloads them under a
private configuration kept in the cache (the machine's apt state is not touched, nothing is
installed) and dpkg-deb unpacks each into a folder of its own, as it would lie under /."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ssm_conda.console import PipelineError, UsageError

KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
GCC_MAJOR = "12"  # bookworm's; the cross gcc, its runtime and the native compiler stand-in agree
# What each part of the cross build needs, by Debian name (amd64 packages unless :arm64).
CROSS_GCC = (
    f"gcc-{GCC_MAJOR}-aarch64-linux-gnu", f"g++-{GCC_MAJOR}-aarch64-linux-gnu", f"cpp-{GCC_MAJOR}-aarch64-linux-gnu",
    f"gcc-{GCC_MAJOR}-aarch64-linux-gnu-base", "binutils-aarch64-linux-gnu",
    f"libgcc-{GCC_MAJOR}-dev-arm64-cross", f"libstdc++-{GCC_MAJOR}-dev-arm64-cross", "libgcc-s1-arm64-cross",
    "libstdc++6-arm64-cross", "libgomp1-arm64-cross", "libatomic1-arm64-cross", "libasan8-arm64-cross",
    "libtsan2-arm64-cross", "liblsan0-arm64-cross", "libubsan1-arm64-cross", "libhwasan0-arm64-cross",
    "libitm1-arm64-cross",
)
SYSROOT = ("libc6-arm64-cross", "libc6-dev-arm64-cross", "linux-libc-dev-arm64-cross")
# Debian's CPython for aarch64 and the libraries its extension modules link (conda-forge's python
# has them as packages of their own; the stand-in's python carries them in lib/)
PYTHON = tuple(f"{name}:arm64" for name in (
    "python3.11", "python3.11-minimal", "libpython3.11", "libpython3.11-minimal", "libpython3.11-stdlib",
    "libpython3.11-dev", "libffi8", "libexpat1", "zlib1g", "libbz2-1.0", "liblzma5", "libssl3", "libsqlite3-0",
    "libuuid1", "libcrypt1", "libncursesw6", "libtinfo6", "libreadline8"))
QEMU = ("qemu-user",)  # bookworm-backports: static, and emulates an aarch64 /proc/cpuinfo
PACKAGES = (*CROSS_GCC, *SYSROOT, *PYTHON, *QEMU)


@dataclass(frozen=True)
class DebianPackages:
    """Unpacked Debian packages, each in a folder of its own as it would lie under /."""

    root: Path
    versions: dict[str, str]  # Debian name -> upstream version (2.36-8cross1 -> 2.36)

    def dirs(self, names: tuple[str, ...]) -> list[Path]:
        return [self.root / name.replace(":", "_") for name in names]

    @property
    def glibc_version(self) -> str:
        return self.versions["libc6-dev-arm64-cross"]

    @property
    def python_version(self) -> str:
        return self.versions[PYTHON[0]]

    @property
    def py_ver(self) -> str:
        """The CPython's X.Y (3.11)."""
        return ".".join(self.python_version.split(".")[:2])

    @property
    def gcc_version(self) -> str:
        return self.versions[f"gcc-{GCC_MAJOR}-aarch64-linux-gnu"]


def os_codename() -> str:
    """The Debian release of this machine (bookworm), whose packages match its tools."""
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip('"')
    raise UsageError("/etc/os-release names no VERSION_CODENAME: the aarch64 stand-in needs a Debian machine")


def apt_config(directory: Path, codename: str, mirror: str = DEFAULT_MIRROR) -> Path:
    """A private apt configuration under `directory` (amd64 and arm64; the release and its backports,
    whose qemu emulates an aarch64 /proc/cpuinfo, which torch reads); its path for APT_CONFIG."""
    for sub in ("state/lists/partial", "cache/archives/partial", "etc/preferences.d", "etc/sources.list.d"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    (directory / "state" / "status").touch()
    (directory / "etc" / "sources.list").write_text(
        "".join(f"deb [signed-by={KEYRING}] {mirror} {suite} main\n" for suite in (codename, f"{codename}-backports")))
    config = directory / "etc" / "apt.conf"
    config.write_text(
        'APT::Architecture "amd64";\nAPT::Architectures { "amd64"; "arm64"; };\nAcquire::Languages "none";\n'
        f'Dir::State "{directory}/state";\nDir::State::status "{directory}/state/status";\n'
        f'Dir::Cache "{directory}/cache";\nDir::Etc::SourceList "{directory}/etc/sources.list";\n'
        f'Dir::Etc::SourceParts "{directory}/etc/sources.list.d";\nDir::Etc::Preferences "{directory}/etc/preferences";\n'
        f'Dir::Etc::PreferencesParts "{directory}/etc/preferences.d";\n')
    return config


def upstream_version(debian_version: str) -> str:
    """2.36-9+deb12u10 -> 2.36, 12.2.0-14 -> 12.2.0, 1:10.0.2+ds-2 -> 10.0.2."""
    version = debian_version.split(":", 1)[-1].rsplit("-", 1)[0]
    return re.split(r"[+~]", version)[0]


def fetch(cache: Path, packages: tuple[str, ...] = PACKAGES, offline: bool = False) -> DebianPackages:
    """`packages` downloaded (newest of each, backports included) and unpacked under `cache`; what
    is already there is reused, and nothing is downloaded when `offline`."""
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise UsageError(f"{tool} not found: the linux-aarch64 stand-in repacks Debian's packages")
    debs = cache / "debs"

    def files(name: str) -> list[Path]:  # python3.11:arm64 is python3.11_<version>_arm64.deb
        base, _, arch = name.partition(":")
        return sorted(debs.glob(f"{base}_*_{arch}.deb" if arch else f"{base}_*.deb"))

    found = {name: files(name) for name in packages}
    if missing := [name for name, paths in found.items() if not paths]:
        if offline:
            raise UsageError(f"no Debian package {missing[0]} in {debs} (and --offline)")
        env = {"APT_CONFIG": str(apt_config(cache / "apt", os_codename())), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}
        debs.mkdir(parents=True, exist_ok=True)
        _apt(["apt-get", "update", "-q"], debs, env)
        _apt(["apt-get", "download", "-q", *(f"{name}/{newest_suite(name, env)}" for name in missing)], debs, env)
        found = {name: files(name) for name in packages}
    root, versions = cache / "unpacked", {}
    for name, paths in found.items():
        deb, folder = paths[-1], root / name.replace(":", "_")
        versions[name] = upstream_version(deb.name.split("_")[1].replace("%3a", ":"))
        stamp = root / ".stamps" / deb.name
        if not stamp.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            if (result := subprocess.run(["dpkg-deb", "-x", str(deb), str(folder)], capture_output=True, text=True)).returncode:
                shutil.rmtree(folder)
                why = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
                raise PipelineError(f"{deb}: dpkg-deb cannot unpack it ({why}); delete it: the next run downloads it again")
            stamp.parent.mkdir(parents=True, exist_ok=True)
            stamp.touch()
    return DebianPackages(root, versions)


def _apt(cmd: list[str], cwd: Path, env: dict[str, str]) -> None:
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        why = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
        raise UsageError(f"apt-get {cmd[1]} failed for the linux-aarch64 stand-in: {why}")


def newest_suite(name: str, env: dict[str, str]) -> str:
    """The suite holding the newest version of a package (bookworm-backports for qemu-user)."""
    policy = subprocess.run(["apt-cache", "madison", name], env=env, capture_output=True, text=True).stdout
    rows = [[cell.strip() for cell in line.split("|")] for line in policy.splitlines() if line.count("|") >= 2]
    if not rows:
        raise UsageError(f"no Debian package {name} in the configured release")
    # madison lists newest first; its third column is "mirror suite/main arch Packages"
    return rows[0][2].split()[1].split("/")[0]
