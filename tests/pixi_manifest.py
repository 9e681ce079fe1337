"""pixi.toml as pixi reads it when it updates the lock file, short of the network: each environment's features
(the default one unless no-default-feature), the platforms it gets, the virtual packages each platform entry gives
the solver, and the conda dependencies solved with py-rattler (resolvo, pixi's solver, strict channel priority).
The rules follow prefix-dev/pixi v0.77.0; docs/building.md ("pixi's lock file") cites the source lines."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from rattler import BuildString, ChannelPriority, GenericVirtualPackage, PackageName, Subdir, Version, solve

DEFAULT_FEATURE = "default"
LINUX_VERSION, GLIBC_VERSION = "4.18", "2.28"  # pixi_default_versions
ARCHSPEC = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}
# a platform entry's friendly keys -> the virtual package each declares (crates/pixi_manifest/src/toml/platform.rs)
FRIENDLY = {"cuda": "__cuda", "glibc": "__glibc", "linux": "__linux", "archspec": "__archspec"}


@dataclass(frozen=True)
class Platform:
    name: str
    subdir: str
    virtual: dict[str, tuple[str, str]]  # name -> (version, build): the subdir's defaults, then what the entry declares

    def virtual_packages(self) -> list[GenericVirtualPackage]:
        """For the solver; py-rattler takes no empty build string, where pixi leaves it empty (it decides nothing)."""
        return [GenericVirtualPackage(PackageName(n), Version(v), BuildString(b or "0"))
                for n, (v, b) in sorted(self.virtual.items())]


def platform_of(entry: str | dict[str, Any]) -> Platform:
    """A workspace `platforms` entry: a bare subdir, or { name, platform, cuda | cuda = { driver, arch }, glibc, ... }."""
    entry = {"name": entry} if isinstance(entry, str) else entry
    subdir = entry.get("platform", entry["name"])
    virtual = {"__unix": ("0", "0"), "__linux": (LINUX_VERSION, ""), "__glibc": (GLIBC_VERSION, ""),
               "__archspec": ("0", ARCHSPEC[subdir])}
    for key, value in entry.items():
        if key in ("name", "platform"):
            continue
        if key == "cuda" and isinstance(value, dict):
            virtual["__cuda"] = (value["driver"], "")
            if "arch" in value:
                virtual["__cuda_arch"] = (value["arch"], "")
        elif key.startswith("__"):
            version, _, build = str(value).partition("=")
            virtual[key] = (version, build)
        else:
            virtual[FRIENDLY[key]] = (str(value), "")  # an unknown key is pixi's parse error: KeyError here
    return Platform(entry["name"], subdir, virtual)


class Manifest:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.platforms = [platform_of(p) for p in data["workspace"]["platforms"]]
        assert any(p.name != p.subdir for p in self.platforms), "only the named-entry rules are modelled"

    def feature(self, name: str) -> dict[str, Any]:
        return self.data if name == DEFAULT_FEATURE else self.data["feature"][name]

    def environments(self) -> dict[str, list[str]]:
        """Environment -> its features, the default feature last unless no-default-feature."""
        found = {DEFAULT_FEATURE: [DEFAULT_FEATURE]}
        for name, value in self.data.get("environments", {}).items():
            features = value if isinstance(value, list) else value["features"]
            default = [] if isinstance(value, dict) and value.get("no-default-feature") else [DEFAULT_FEATURE]
            found[name] = [*features, *default]
        return found

    def environment_platforms(self, environment: str) -> list[Platform]:
        """Every workspace platform each feature supports (no `platforms`: all; else by name or bare subdir); on a subdir
        where a feature names a platform exactly, only the platforms named exactly (features_ext.rs, `platforms`)."""
        named = [set(f["platforms"]) for f in map(self.feature, self.environments()[environment]) if "platforms" in f]
        exact = set().union(*named)
        exact_subdirs = {p.subdir for p in self.platforms if p.name in exact}
        return [p for p in self.platforms if all(p.name in names or p.subdir in names for names in named)
                and (p.name in exact or p.subdir not in exact_subdirs)]

    def specs(self, environment: str) -> list[str]:
        """The conda dependencies of the environment's features as match specs (a table's version and build)."""
        specs = []
        for feature in map(self.feature, self.environments()[environment]):
            for name, value in feature.get("dependencies", {}).items():
                version, build = (value, None) if isinstance(value, str) else (value.get("version", "*"), value.get("build"))
                specs.append(" ".join([name, *([version] if version != "*" or build else []), *([build] if build else [])]))
        return specs

    def solve(self, environment: str, platform: Platform, channels: list[str]) -> list[Any]:
        """The environment's conda packages on `platform`, as pixi's lock update solves them; rattler's SolverError
        names what cannot be satisfied."""
        return asyncio.run(solve(sources=channels, specs=self.specs(environment),
                                 platforms=[Subdir(platform.subdir), Subdir("noarch")],
                                 virtual_packages=platform.virtual_packages(), channel_priority=ChannelPriority.Strict))
