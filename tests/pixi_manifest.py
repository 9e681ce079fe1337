"""pixi.toml as pixi reads it when it updates the lock file, short of the network: each environment's features
(the default one unless no-default-feature), the platforms it gets, the virtual packages each platform entry gives
the solver, the conda dependencies on each platform (a feature's own, then its `[target.SELECTOR]` tables that match
the platform), solved with py-rattler (resolvo, pixi's solver, strict channel priority).
The rules follow prefix-dev/pixi v0.77.0; docs/building.md ("pixi's lock file") cites the source lines."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from rattler import BuildString, ChannelPriority, GenericVirtualPackage, PackageName, Subdir, Version, solve

DEFAULT_FEATURE = "default"
LINUX_VERSION, GLIBC_VERSION, WINDOWS_VERSION = "4.18", "2.28", "10.0"  # pixi_default_versions
ARCHSPEC = {"linux-64": "x86_64", "linux-aarch64": "aarch64", "win-64": "x86_64"}
# `[target.X]` keys that name an OS family (crates/pixi_manifest/src/target.rs, family_name_to_selector)
FAMILIES = {"linux": "linux", "unix": "unix", "win": "win", "osx": "osx", "macos": "osx"}
# a platform entry's friendly keys -> the virtual package each declares (crates/pixi_manifest/src/toml/platform.rs)
FRIENDLY = {"cuda": "__cuda", "glibc": "__glibc", "linux": "__linux", "archspec": "__archspec"}


@dataclass(frozen=True)
class Platform:
    name: str
    subdir: str
    virtual: dict[str, tuple[str, str]]  # name -> (version, build): the subdir's defaults, then what the entry declares

    @property
    def families(self) -> set[str]:
        family = self.subdir.split("-")[0]
        return {family, "unix"} if family in ("linux", "osx") else {family}

    def virtual_packages(self) -> list[GenericVirtualPackage]:
        """For the solver; py-rattler takes no empty build string, where pixi leaves it empty (it decides nothing)."""
        return [GenericVirtualPackage(PackageName(n), Version(v), BuildString(b or "0"))
                for n, (v, b) in sorted(self.virtual.items())]


def platform_of(entry: str | dict[str, Any]) -> Platform:
    """A workspace `platforms` entry: a bare subdir, or { name, platform, cuda | cuda = { driver, arch }, glibc, ... }."""
    entry = {"name": entry} if isinstance(entry, str) else entry
    subdir = entry.get("platform", entry["name"])
    # subdir_default_virtual_packages (crates/pixi_manifest/src/platform.rs): __unix, __linux and __glibc on linux,
    # __win on windows, __archspec everywhere; an unmodelled subdir is a KeyError
    if subdir.startswith("linux-"):
        virtual = {"__unix": ("0", "0"), "__linux": (LINUX_VERSION, ""), "__glibc": (GLIBC_VERSION, "")}
    else:
        assert subdir.startswith("win-"), f"{subdir}: only the linux and win subdirs are modelled"
        virtual = {"__win": (WINDOWS_VERSION, "")}
    virtual["__archspec"] = ("0", ARCHSPEC[subdir])
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

    def specs(self, environment: str, platform: Platform) -> list[str]:
        """The conda dependencies of the environment's features on `platform` as match specs (a table's version and
        build): each feature's own, overwritten name by name by its `[target.SELECTOR]` tables that match the
        platform, in the manifest's order (feature.rs, combined_dependencies; target.rs, resolve_for_platform)."""
        specs = []
        for feature in map(self.feature, self.environments()[environment]):
            dependencies = dict(feature.get("dependencies", {}))
            for selector, target in feature.get("target", {}).items():
                if self.selects(selector, platform):
                    dependencies.update(target.get("dependencies", {}))
            for name, value in dependencies.items():
                version, build = (value, None) if isinstance(value, str) else (value.get("version", "*"), value.get("build"))
                specs.append(" ".join([name, *([version] if version != "*" or build else []), *([build] if build else [])]))
        return specs

    def selects(self, selector: str, platform: Platform) -> bool:
        """Whether `[target.SELECTOR]` holds on `platform` (target.rs, TargetSelector: FromStr and matches): an OS
        family, else a subdir (every platform entry of that subdir), else a platform's name; globs are not modelled."""
        if selector in FAMILIES:
            return FAMILIES[selector] in platform.families
        if selector in ARCHSPEC or selector == "noarch":
            return selector == platform.subdir
        assert selector in {p.name for p in self.platforms}, f"[target.{selector}]: not a family, subdir or platform name"
        return selector == platform.name

    def solve(self, environment: str, platform: Platform, channels: list[str]) -> list[Any]:
        """The environment's conda packages on `platform`, as pixi's lock update solves them; rattler's SolverError
        names what cannot be satisfied."""
        return asyncio.run(solve(sources=channels, specs=self.specs(environment, platform),
                                 platforms=[Subdir(platform.subdir), Subdir("noarch")],
                                 virtual_packages=platform.virtual_packages(), channel_priority=ChannelPriority.Strict))
