"""The variant matrix: variants/*.yaml, read, selected and rendered by rattler-build itself, as a build renders it."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse
from urllib.request import url2pathname

import jinja2
import yaml
from rattler import Subdir, Version, VersionSpec
from rattler_build import JinjaConfig, PlatformConfig, RenderConfig, Stage0Recipe, VariantConfig

from ssm_conda.archs import ArchListError, parse_arch_list, resolve_arch_option, version_key
from ssm_conda.console import UsageError, one_of
from ssm_conda.machine import detect_compute_capabilities
from ssm_conda.paths import recipe_of, variants_dir
from ssm_conda.project import NAMES
from ssm_conda.selection import Selection, without_hash

PYTHON_RE = re.compile(r"3\.\d{1,2}")
TORCH_RE = re.compile(r"\d+\.\d+")
# conda-forge has CUDA pytorch for each; the recipes skip some (their build.skip: mamba-ssm is Linux's only)
PLATFORMS = ("linux-64", "linux-aarch64", "win-64")
TARGET_PLATFORM = str(Subdir.current())  # this machine's
ALL_ARCHS = "all"  # the gpu_generation of the all-architecture package
STANDIN_OVERRIDES = "standin-variants.yaml"  # at a stand-in channel's root: the variant keys it overrides
JINJA = jinja2.Environment(undefined=jinja2.StrictUndefined)  # a name a skip expression does not know is an error
REQUIRED_KEYS = ("cuda_compiler_version", "python", "pytorch", "gpu_generation", "cuda_arch_list", "cuda_arch_supported")


@dataclass(frozen=True)
class VariantFile:
    """One file of variants/: all variants of one CUDA version."""

    path: Path
    data: dict[str, Any]

    @property
    def cuda(self) -> str:
        return str(self.data["cuda_compiler_version"][0])

    @property
    def pythons(self) -> list[str]:
        return [str(v) for v in self.data["python"]]

    @property
    def torches(self) -> list[str]:
        return [str(v) for v in self.data["pytorch"]]

    @property
    def generations(self) -> dict[str, str]:
        """gpu_generation -> its TORCH_CUDA_ARCH_LIST, in the file's order ("all" first)."""
        return dict(zip(map(str, self.data["gpu_generation"]), map(str, self.data["cuda_arch_list"]), strict=True))

    @property
    def arch_list(self) -> str:  # the all-architecture package's
        return self.generations[ALL_ARCHS]

    @property
    def arch_supported(self) -> list[str]:
        return str(self.data["cuda_arch_supported"][0]).split(";")

    @property
    def display_path(self) -> str:
        return f"variants/{self.path.name}"

    def resolve_arch(self, value: str, detect: Callable[[], list[str]] = detect_compute_capabilities) -> str:
        """--arch (all, native, or "8.0;9.0+PTX") as a TORCH_CUDA_ARCH_LIST for this CUDA version."""
        return resolve_arch_option(value, self.cuda, self.arch_list, self.arch_supported, detect)


def rattler_error(exc: Exception) -> str:
    """The message of a rattler-build error (the Debug text of a Rust error) on one line."""
    text = str(exc)
    if found := re.search(r'message: "((?:[^"\\]|\\.)*)"', text):
        return " ".join(found[1].replace('\\"', '"').replace("\\n", " ").split())
    if found := re.search(r'expected: "([^"]*)", actual: "([^"]*)".*?line: (\d+), column: (\d+)', text):
        return f"{found[3]}:{found[4]}: expected a {found[1]}, found a {found[2]}"
    return " ".join(text.split()) or type(exc).__name__


def variant_file_problem(vfile: VariantFile) -> str | None:
    """What keeps the tooling from reading a file rattler-build has read, or None."""
    data = vfile.data
    if missing := next((k for k in REQUIRED_KEYS if not data.get(k)), None):
        return f"no {missing}"
    if len(data["cuda_compiler_version"]) != 1 or not TORCH_RE.fullmatch(str(data["cuda_compiler_version"][0])):
        return f"cuda_compiler_version {data['cuda_compiler_version']}: give one X.Y"
    for key, pattern in (("python", PYTHON_RE), ("pytorch", TORCH_RE)):
        if bad := next((v for v in data[key] if not isinstance(v, str) or not pattern.fullmatch(v)), None):
            return f"{key} {bad!r}: not X.Y"
    if (lengths := (len(data["gpu_generation"]), len(data["cuda_arch_list"])))[0] != lengths[1]:
        return f"gpu_generation and cuda_arch_list differ in length {lengths}"
    if ALL_ARCHS not in data["gpu_generation"]:
        return f"gpu_generation {data['gpu_generation']}: no {ALL_ARCHS!r} (the all-architecture package)"
    try:
        [parse_arch_list(str(v)) for key in ("cuda_arch_list", "cuda_arch_supported") for v in data[key]]
    except ArchListError as exc:
        return str(exc)
    return None


def read_variant_file(path: Path, target_platform: str = TARGET_PLATFORM) -> VariantFile:
    """A variants/ file as rattler-build reads it for target_platform (its if/then selectors applied), checked."""
    try:
        config = VariantConfig.from_file_with_context(path, JinjaConfig(platform=PlatformConfig(target_platform=target_platform)))
    except Exception as exc:  # noqa: BLE001 - rattler-build's PyVariantError
        raise UsageError(f"{path}: not a valid variant file: {rattler_error(exc)}") from None
    vfile = VariantFile(path, {**config.to_dict(), "zip_keys": config.zip_keys})
    if problem := variant_file_problem(vfile):
        raise UsageError(f"{path}: not a valid variant file: {problem}")
    return vfile


def load_variant_files(directory: Path | None = None, target_platform: str = TARGET_PLATFORM) -> list[VariantFile]:
    directory = directory or variants_dir()
    if not directory.is_dir():
        raise UsageError(f"variant files: no such directory: {directory}")
    files = [read_variant_file(p, target_platform) for p in sorted(directory.glob("*.yaml"))]
    return sorted(files, key=lambda f: version_key(f.cuda))


@dataclass
class PlannedVariant:
    cuda: str
    python: str
    torch: str
    archs: str
    generation: str
    build_string: str
    variant_file: VariantFile
    config: dict[str, list[str]] = field(repr=False)
    rendered: Any = field(repr=False)

    @property
    def package(self) -> str:
        return str(self.rendered.recipe.package.name)

    @property
    def label(self) -> str:
        return f"cuda{self.cuda}-py{self.python}-torch{self.torch}-{self.generation}"


def select(selection: Selection, files: Sequence[VariantFile] | None = None,
           detect: Callable[[], list[str]] = detect_compute_capabilities,
           overrides: dict[str, list[str]] | None = None) -> list[tuple[VariantFile, dict[str, list[str]]]]:
    """Validate the selection; per variant file (without --cuda: each listing a --generation asked for) its variant dict."""
    files = list(files if files is not None else load_variant_files())
    if selection.cuda is not None:
        if not (chosen := [f for f in files if f.cuda == selection.cuda]):
            raise one_of("CUDA version", selection.cuda, [f.cuda for f in files])
        files = chosen
    if selection.generations is not None and selection.arch not in (None, ALL_ARCHS):
        raise UsageError("--generation and --arch exclude each other: a generation has its list in variants/")
    for kind, value, pattern, known, example in (
            ("Python", selection.python, PYTHON_RE, {p for f in files for p in f.pythons}, "3.12"),
            ("pytorch", selection.torch, TORCH_RE, {t for f in files for t in f.torches}, "2.13")):
        if value is not None and not pattern.fullmatch(value):
            raise UsageError(f"unknown {kind} version {value!r}; accepted: {', '.join(sorted(known, key=version_key))} "
                             f"(from variants/) or another X.Y like {example}")
    if (asked := selection.generations) is not None:
        listed = list(dict.fromkeys(g for f in files for g in f.generations))
        if missing := next((g for g in asked if g not in listed), None):
            where = f" of {files[0].display_path}" if selection.cuda is not None else ""
            raise one_of(f"GPU generation{where}", missing, listed)
        files = [f for f in files if any(g in f.generations for g in asked)]
    fixed = {key: [value] for key, value in (("python", selection.python), ("pytorch", selection.torch)) if value is not None}

    configs = []
    for vfile in files:
        config = {k: [str(x) for x in v] for k, v in vfile.data.items() if k != "zip_keys"} | fixed
        if asked is not None:
            chosen = [g for g in vfile.generations if g in asked]  # in the file's order
            config |= {"gpu_generation": chosen, "cuda_arch_list": [vfile.generations[g] for g in chosen]}
        if selection.arch not in (None, ALL_ARCHS):
            # One package for the list asked for, gated like a generation (see the recipes).
            config["gpu_generation"] = ["native" if selection.arch == "native" else "custom"]
            config["cuda_arch_list"] = [vfile.resolve_arch(selection.arch, detect)]
        configs.append((vfile, config | (overrides or {})))
    return configs


def plan(selection: Selection = Selection(), files: Sequence[VariantFile] | None = None,
         detect: Callable[[], list[str]] = detect_compute_capabilities, recipes: Sequence[Path] | None = None,
         overrides: dict[str, list[str]] | None = None, target_platform: str = TARGET_PLATFORM) -> list[PlannedVariant]:
    """Each selected package's variants in build order, rendered offline by rattler-build for target_platform (`files` too)."""
    native = target_platform if target_platform.startswith("win-") else None  # conda-forge builds Windows' on Windows
    render_config = RenderConfig(PlatformConfig(target_platform=target_platform, build_platform=native, host_platform=native))
    files = load_variant_files(target_platform=target_platform) if files is None else files
    configs = select(selection, files, detect, overrides)
    planned = []
    for recipe in recipes or [recipe_of(p) for p in selection.packages]:
        stage0 = Stage0Recipe.from_file(str(recipe))
        for vfile, config in configs:
            try:
                planned += _rendered(stage0, vfile, VariantConfig(config, vfile.data.get("zip_keys")), render_config)
            except Exception as exc:  # noqa: BLE001 - rattler-build's PyRattlerBuildError
                raise UsageError(f"{vfile.path}: not a valid variant file: {recipe.parent.name}'s recipe does not render "
                                 f"with it: {rattler_error(exc)}") from None
    return planned


def rendered_recipe(package: str, target_platform: str = TARGET_PLATFORM) -> dict[str, Any]:
    """A package's recipe rendered for its first variant on the platform: what every variant shares (name, version, ...)."""
    variants = (plan(Selection(cuda=f.cuda, python=f.pythons[0], torch=f.torches[0], generations=(ALL_ARCHS,),
                               packages=(package,)), files=[f], target_platform=target_platform)
                for f in load_variant_files(target_platform=target_platform))
    return next(rendered for rendered in variants if rendered)[0].rendered.recipe.to_dict()


def builds_on(platform: str) -> str:
    """Where a platform's packages build: conda-forge compiles Windows' with MSVC on Windows, Linux's on Linux."""
    return "Windows" if Subdir(platform).is_windows else "Linux"


def skipped(stage0: Any, variant: dict[str, str]) -> bool:
    """Whether the recipe's build.skip leaves `variant` out: py-rattler-build renders every variant. The expressions are
    Jinja's, evaluated as rattler-build does with the platform's names (linux, win, osx, unix) and the variant's keys."""
    subdir = Subdir(variant["target_platform"])
    names = {"linux": subdir.is_linux, "win": subdir.is_windows, "osx": subdir.is_osx, "unix": subdir.is_unix}
    return any(JINJA.compile_expression(e)(**variant, **names) for e in stage0.to_dict()["build"].get("skip") or [])


def _rendered(stage0: Any, vfile: VariantFile, variant_config: Any, render_config: Any) -> list[PlannedVariant]:
    order = list(variant_config.to_dict()["gpu_generation"])
    variants = [PlannedVariant(cuda=r.variant["cuda_compiler_version"], python=r.variant["python"], torch=r.variant["pytorch"],
                               archs=r.variant["cuda_arch_list"], generation=r.variant["gpu_generation"],
                               build_string=r.recipe.build.string, variant_file=vfile, rendered=r,
                               config={k: [v] for k, v in r.variant.items() if k != "target_platform"})
                for r in stage0.render(variant_config, render_config) if not skipped(stage0, r.variant)]
    # rattler-build renders in an order of its own; the plan follows the variant file's
    return sorted(variants, key=lambda v: (version_key(v.python), version_key(v.torch), order.index(v.generation)))


def generation_gates(vfile: VariantFile, package: str = NAMES[0],
                     target_platform: str = TARGET_PLATFORM) -> dict[str, str | None]:
    """gpu_generation -> the __cuda_arch requirement its package carries (None for the all-architecture one)."""
    selection = Selection(cuda=vfile.cuda, python=vfile.pythons[-1], torch=vfile.torches[-1], packages=(package,))
    return {v.generation: next((r for r in v.rendered.recipe.requirements.run if r.startswith("__cuda_arch ")), None)
            for v in plan(selection, files=[vfile], target_platform=target_platform)}


def generation_for(gates: dict[str, str | None], cuda_arch: str | None) -> str:
    """The generation a solver gives a machine whose oldest GPU is cuda_arch (its __cuda_arch, or None)."""
    if cuda_arch is not None:
        for generation, gate in gates.items():
            if gate is not None and VersionSpec(gate.split(maxsplit=1)[1]).matches(Version(cuda_arch)):
                return generation
    return ALL_ARCHS


def standin_overrides(channels: Sequence[str]) -> dict[str, list[str]]:
    """Variant keys that an offline stand-in channel says it must override (its real compilers)."""
    paths = [Path(url2pathname(urlparse(c).path)) / STANDIN_OVERRIDES for c in channels if c.startswith("file://")]
    files = [yaml.safe_load(path.read_text()) or {} for path in paths if path.is_file()]
    return {key: [str(x) for x in values] for data in files for key, values in data.items()}


T = TypeVar("T")


def choose_built(items: Iterable[T], name_and_build: Callable[[T], tuple[str, str]], selection: Selection,
                 files_dir: Path | None = None) -> list[T]:
    """The `items` that are variants `selection` chooses; `files_dir` (default: variants/) is read only if needed."""
    items = list(items)
    if selection == Selection():  # no selector: everything (upload sends whatever the channel holds)
        return items
    if replace(selection, packages=NAMES) == Selection():
        return [item for item in items if name_and_build(item)[0] in selection.packages]
    wanted = {(v.package, without_hash(v.build_string)) for v in plan(selection, load_variant_files(files_dir))}
    named = ((item, *name_and_build(item)) for item in items)
    return [item for item, name, build in named if (name, without_hash(build)) in wanted]


def build_glob(vfile: VariantFile, torch: str, generation: str | None = None) -> str:
    """A glob of the build strings of one (CUDA, torch) variant, of `generation` or any, less the hash (one package serves
    every Python from the file's on)."""
    selection = Selection(cuda=vfile.cuda, python=vfile.pythons[0], torch=torch,
                          generations=(generation,) if generation else None, packages=NAMES[:1])
    rendered = [without_hash(v.build_string) + "_" for v in plan(selection, files=[vfile])]
    return os.path.commonprefix(rendered) + "*"
