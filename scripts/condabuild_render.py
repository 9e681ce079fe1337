"""Render recipe/meta.yaml the way conda-build would, and compare it with rattler-build's recipe.yaml.

conda-build cannot run here (it needs conda; PyPI only has conda-build 2.1.5 and conda 4.3.16, both
older than compiler() and conda_build_config variants), so this module re-implements the part of
conda-build's rendering that decides what the package is: selectors, the Jinja context
(compiler(), stdlib(), pin_compatible(), pin_subpackage(), cdt(), PKG_* variables), variant
expansion with zip_keys, and the spec rules conda-build applies before solving (ensure_valid_spec,
variant pins on bare build/host names, pin_run_as_build for python). Nothing is solved.

    python scripts/condabuild_render.py            # parity check of meta.yaml against recipe.yaml
    python scripts/condabuild_render.py --show     # also print conda-build's rendering per variant
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python scripts/condabuild_render.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jinja2
import yaml

from scripts.common import RECIPE, RECIPE_DIR, VARIANTS_DIR, PipelineError, run_cli

META_YAML = RECIPE_DIR / "meta.yaml"
# conda-build's PKG_HASH is 'h' + 7 hex digits of a hash rattler-build computes differently.
PLACEHOLDER_HASH = "h0000000"
HASH_RE = re.compile(r"(?<![0-9a-z])h[0-9a-f]{7}(?![0-9a-z])")
PLATFORMS = ("linux-64", "linux-aarch64", "osx-arm64", "win-64")
# conda-build's built-in pin_run_as_build (conda_build/variants.py DEFAULT_VARIANTS).
PIN_RUN_AS_BUILD = {"python": ("x.x", "x.x"), "r-base": ("x.x", "x.x")}


class RenderError(PipelineError):
    """meta.yaml cannot be rendered for a variant."""


# --- Variants ------------------------------------------------------------------------------------


def expand_variants(data: dict[str, Any], target_platform: str = "linux-64") -> list[dict[str, str]]:
    """conda-build's expansion of one conda_build_config file: product over keys, zip_keys zipped."""
    data = {k: v for k, v in data.items() if k not in ("pin_run_as_build", "extend_keys")}
    zip_groups = [list(group) for group in data.pop("zip_keys", None) or []]
    if zip_groups and not isinstance(zip_groups[0], list):
        zip_groups = [zip_groups]
    values = {k: [str(x) for x in (v if isinstance(v, list) else [v])] for k, v in data.items()}
    axes: list[list[dict[str, str]]] = []
    zipped = set()
    for group in zip_groups:
        group = [k for k in group if k in values]
        lengths = {len(values[k]) for k in group}
        if len(lengths) > 1:
            raise RenderError(f"zip_keys group {group} has lists of different lengths")
        axes.append([dict(zip(group, combo, strict=True)) for combo in zip(*(values[k] for k in group), strict=True)])
        zipped.update(group)
    for key, vals in values.items():
        if key not in zipped:
            axes.append([{key: v} for v in vals])
    variants = []
    for combo in itertools.product(*axes):
        variant = {"target_platform": target_platform}
        for part in combo:
            variant.update(part)
        variants.append(variant)
    return variants


# --- Selectors -----------------------------------------------------------------------------------

SELECTOR_RE = re.compile(r"^(.*?)\s*#\s*\[([^\[\]]+)\]\s*$")


def selector_namespace(variant: dict[str, str]) -> dict[str, Any]:
    """conda-build's selector names (metadata.get_selectors) for the variant's target platform."""
    platform, _, arch = variant.get("target_platform", "linux-64").partition("-")
    ns: dict[str, Any] = {
        "linux": platform == "linux",
        "osx": platform == "osx",
        "win": platform == "win",
        "unix": platform in ("linux", "osx"),
        "x86": arch in ("32", "64"),
        "x86_64": arch == "64",
        "aarch64": arch == "aarch64",
        "arm64": arch == "arm64",
        "ppc64le": arch == "ppc64le",
        "s390x": arch == "s390x",
        "linux64": platform == "linux" and arch == "64",
        "linux32": platform == "linux" and arch == "32",
        "win64": platform == "win" and arch == "64",
        "win32": platform == "win" and arch == "32",
        "target_platform": variant.get("target_platform", "linux-64"),
        "build_platform": variant.get("target_platform", "linux-64"),
        "environ": dict(os.environ),  # conda-build's environ is os.environ
        "nomkl": False,
    }
    if "python" in variant:
        major, minor = variant["python"].split(".")[:2]
        ns["py"] = int(major + minor)
        ns["py3k"] = major == "3"
        ns["py2k"] = major == "2"
    for key, value in variant.items():
        ns.setdefault(key, value)
    return ns


def select_lines(text: str, namespace: dict[str, Any]) -> str:
    """Drop lines whose `# [selector]` is false and strip the selector from the others."""
    out = []
    for line in text.splitlines():
        match = SELECTOR_RE.match(line)
        if match and not line.lstrip().startswith("#"):
            try:
                keep = eval(match.group(2), {"__builtins__": {}}, dict(namespace))  # noqa: S307
            except Exception as exc:  # noqa: BLE001
                raise RenderError(f"selector [{match.group(2)}] failed: {exc}") from exc
            if keep:
                out.append(match.group(1))
        else:
            out.append(line)
    return "\n".join(out) + "\n"


# --- Jinja context -------------------------------------------------------------------------------

# conda-build's utils.spec_needing_star_re: a bare version without an operator gets `.*`.
SPEC_NEEDING_STAR_RE = re.compile(r"([\w\d\.\-\_]+)\s+((?<![><=])[\w\d\.\-\_]+?(?!\*))(\s+[\w\d\.\_]+)?$")


def ensure_valid_spec(spec: str) -> str:
    """conda_build.utils.ensure_valid_spec for strings: `gcc_linux-64 15` -> `gcc_linux-64 15.*`."""
    match = SPEC_NEEDING_STAR_RE.match(spec)
    if match and not match.group(3):
        if match.group(1) in ("python", "numpy") and match.group(2) == "x.x":
            return SPEC_NEEDING_STAR_RE.sub(r"\1 \2", spec)
        if "*" not in spec:
            return SPEC_NEEDING_STAR_RE.sub(r"\1 \2.*", spec)
    return spec


DEFAULT_COMPILERS = {
    "linux": {"c": "gcc", "cxx": "gxx", "fortran": "gfortran"},
    "osx": {"c": "clang", "cxx": "clangxx", "fortran": "gfortran"},
    "win": {"c": "vs2017", "cxx": "vs2017", "fortran": "gfortran"},
}


def _target_package(kind: str, language: str, variant: dict[str, str]) -> str:
    """compiler()/stdlib(): `<variant[lang_kind]>_<target_platform> <variant[lang_kind_version]>`."""
    platform = variant.get("target_platform", "linux-64")
    default = DEFAULT_COMPILERS.get(platform.split("-")[0], {}).get(language, language)
    name = variant.get(f"{language}_{kind}", default if kind == "compiler" else None)
    if name is None:
        raise RenderError(f"stdlib('{language}') needs the variant key {language}_stdlib")
    spec = f"{name}_{platform}"
    version = variant.get(f"{language}_{kind}_version")
    if version:
        spec = ensure_valid_spec(f"{spec} {version}")
    return spec


def apply_pin_expressions(version: str, min_pin: str | None = "x.x.x.x.x.x", max_pin: str | None = "x") -> str:
    """conda_build.utils.apply_pin_expressions for dotted numeric versions."""
    parts = version.split(".")
    bounds = []
    if min_pin:
        bounds.append(">=" + ".".join(parts[: len(min_pin.split("."))]))
    if max_pin:
        upper = parts[: min(len(max_pin.split(".")), len(parts))]
        upper[-1] = str(int(upper[-1]) + 1)
        bounds.append("<" + ".".join(upper) + ".0a0")
    return ",".join(bounds)


def _version_bounds(version: str, lower: str | None, upper: str | None, min_pin: str | None,
                    max_pin: str | None) -> str:
    if upper:
        return (f">={lower or version}," if (min_pin or lower) else "") + f"<{upper}"
    return apply_pin_expressions(lower or version, min_pin, max_pin)


@dataclass
class Package:
    name: str = "PKG_NAME"
    version: str = "0"
    build_number: str = "0"
    build_string: str = "placeholder"


def jinja_context(variant: dict[str, str], package: Package, recipe_dir: Path,
                  permit_undefined: bool = False) -> dict[str, Any]:
    """conda-build's Jinja globals; with permit_undefined (its first pass) pins give bare names."""
    def compiler(language: str) -> str:
        return _target_package("compiler", language, variant)

    def stdlib(language: str) -> str:
        return _target_package("stdlib", language, variant)

    def pin_compatible(name: str, lower_bound: str | None = None, upper_bound: str | None = None,
                       min_pin: str | None = "x.x.x.x.x.x", max_pin: str | None = "x",
                       exact: bool = False) -> str:
        # conda-build reads the version from the solved host environment; without a solve the
        # variant's value is the version it pins to.
        version = variant.get(name)
        if permit_undefined:
            return name
        if version is None:
            raise RenderError(f"pin_compatible('{name}') needs a solved host env or a variant value")
        if exact:
            return f"{name} {version}"
        return f"{name} {_version_bounds(version, lower_bound, upper_bound, min_pin, max_pin)}"

    def pin_subpackage(name: str, min_pin: str | None = "x.x.x.x.x.x", max_pin: str | None = "x",
                       exact: bool = False) -> str:
        if permit_undefined:
            return name
        if name != package.name:
            raise RenderError(f"pin_subpackage('{name}'): this recipe has one output, {package.name}")
        if exact:
            return f"{name} {package.version} {package.build_string}"
        return f"{name} {apply_pin_expressions(package.version, min_pin, max_pin)}"

    def cdt(name: str) -> str:
        arch = variant.get("target_platform", "linux-64").split("-")[1]
        cdt_name = variant.get("cdt_name", "cos7" if arch in ("aarch64", "ppc64le") else "cos6")
        cdt_arch = variant.get("cdt_arch", {"64": "x86_64"}.get(arch, arch))
        head, _, rest = name.partition(" ")
        return f"{head}-{cdt_name}-{cdt_arch}" + (f" {rest}" if rest else "")

    ctx: dict[str, Any] = dict(selector_namespace(variant))
    ctx.update(
        compiler=compiler,
        stdlib=stdlib,
        pin_compatible=pin_compatible,
        pin_subpackage=pin_subpackage,
        cdt=cdt,
        PKG_NAME=package.name,
        PKG_VERSION=package.version,
        PKG_BUILDNUM=package.build_number,
        PKG_HASH=PLACEHOLDER_HASH,
        RECIPE_DIR=str(recipe_dir),
        CONDA_BUILD_STATE="RENDER",
    )
    if "python" in variant:
        ctx["PY_VER"] = ".".join(variant["python"].split(".")[:2])
        ctx["CONDA_PY"] = ctx["PY_VER"].replace(".", "")
    return ctx


class _StringNumberLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """conda-build's loader keeps numbers as strings (versions like 1.10 must not become floats)."""


_StringNumberLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers
            if tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


_ENVIRONMENTS = {
    False: jinja2.Environment(undefined=jinja2.StrictUndefined),
    True: jinja2.Environment(undefined=jinja2.Undefined),
}


@functools.lru_cache(maxsize=64)
def _template(text: str, permit_undefined: bool) -> jinja2.Template:
    return _ENVIRONMENTS[permit_undefined].from_string(text)


def render_text(meta_text: str, variant: dict[str, str], recipe_dir: Path = RECIPE_DIR) -> dict[str, Any]:
    """The metadata conda-build would read from meta.yaml for one variant (before solving)."""
    selected = select_lines(meta_text, selector_namespace(variant))
    # Pass 1 (lenient) finds the name, version and build number the PKG_* variables come from.
    first = yaml.load(
        _template(selected, True).render(jinja_context(variant, Package(), recipe_dir, True)),
        Loader=_StringNumberLoader,
    ) or {}
    pkg = first.get("package") or {}
    package = Package(
        name=str(pkg.get("name", "")),
        version=str(pkg.get("version", "")),
        build_number=str((first.get("build") or {}).get("number", 0)),
    )
    try:
        text = _template(selected, False).render(jinja_context(variant, package, recipe_dir))
    except jinja2.TemplateError as exc:
        raise RenderError(f"meta.yaml: {exc}") from exc
    try:
        return yaml.load(text, Loader=_StringNumberLoader) or {}
    except yaml.YAMLError as exc:
        raise RenderError(f"meta.yaml renders to invalid YAML: {exc}") from exc


# --- Comparable form -----------------------------------------------------------------------------


def canonical_spec(spec: str) -> str:
    """Whitespace collapsed; `=X` and `>=X.Y,<X.Y+1.0a0` written as `X.*`; `==X` kept."""
    parts = str(spec).split()
    if len(parts) >= 2:
        version = parts[1]
        if re.fullmatch(r"=[^=<>!,|]+", version):
            version = version[1:] + ("" if version.endswith("*") else ".*")
        match = re.fullmatch(r">=([\d.]+),<([\d.]+)\.0a0", version)
        if match:
            low = match.group(1).split(".")
            bumped = low[:-1] + [str(int(low[-1]) + 1)]
            if match.group(2).split(".") == bumped:
                version = match.group(1) + ".*"
        parts[1] = version
    return " ".join(parts)


def _variant_pin(value: str) -> str:
    return value if re.search(r"[<>=*,| ]", value) else value + ".*"


@dataclass
class Comparable:
    """What both tools would build: the fields the parity check compares."""

    name: str = ""
    version: str = ""
    source: list[dict[str, Any]] = field(default_factory=list)
    build_string: str = ""
    build_number: str = ""
    script: str = ""
    script_env: dict[str, str] = field(default_factory=dict)
    overlinking_error: bool = False
    overdepending_error: bool = False
    missing_dso: list[str] = field(default_factory=list)
    requirements: dict[str, list[str]] = field(default_factory=dict)
    run_exports: Any = None
    ignore_run_exports: dict[str, list[str]] = field(default_factory=dict)
    test_imports: list[str] = field(default_factory=list)
    test_pip_check: bool = False
    test_files_exist: list[str] = field(default_factory=list)
    test_files_missing: list[str] = field(default_factory=list)
    test_env: dict[str, str] = field(default_factory=dict)
    test_commands: list[str] = field(default_factory=list)
    test_requires: list[str] = field(default_factory=list)
    test_recipe_files: list[str] = field(default_factory=list)
    test_source_files: list[str] = field(default_factory=list)
    license: str = ""
    license_file: list[str] = field(default_factory=list)
    summary: str = ""


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _command_lines(commands: Sequence[str]) -> list[str]:
    return [line.strip() for c in commands for line in str(c).splitlines() if line.strip()]


def from_conda_build(meta: dict[str, Any], variant: dict[str, str]) -> Comparable:
    """The comparable form of a conda-build rendering, with conda-build's pre-solve spec rules."""
    build = meta.get("build") or {}
    reqs = meta.get("requirements") or {}
    test = meta.get("test") or {}
    about = meta.get("about") or {}
    out = Comparable(
        name=str((meta.get("package") or {}).get("name", "")),
        version=str((meta.get("package") or {}).get("version", "")),
        build_string=HASH_RE.sub("h<hash>", str(build.get("string", ""))),
        build_number=str(build.get("number", "0")),
        script=("build.sh" if "script" not in build else "\n".join(_as_list(build["script"]))),
        overlinking_error=str(build.get("error_overlinking", False)).lower() == "true",
        overdepending_error=str(build.get("error_overdepending", False)).lower() == "true",
        missing_dso=[str(x) for x in _as_list(build.get("missing_dso_whitelist"))],
        run_exports=build.get("run_exports"),
        license=str(about.get("license", "")),
        license_file=[str(x) for x in _as_list(about.get("license_file"))],
        summary=str(about.get("summary", "")),
    )
    for src in _as_list(meta.get("source")):
        out.source.append({
            "url": [str(u) for u in _as_list(src.get("url"))],
            "sha256": str(src.get("sha256", "")),
            "patches": [str(p) for p in _as_list(src.get("patches"))],
        })
    for entry in _as_list(build.get("script_env")):
        key, sep, value = str(entry).partition("=")
        if sep and not value:
            continue  # NAME= (an unset optional variable): the build sees it empty, as unset
        out.script_env[key] = value if sep else f"<inherited ${key}>"
    ignore = {"by_name": _as_list(build.get("ignore_run_exports")),
              "from_package": _as_list(build.get("ignore_run_exports_from"))}
    out.ignore_run_exports = {k: sorted(map(str, v)) for k, v in ignore.items() if v}
    for section, cb_key in (("build", "build"), ("host", "host"), ("run", "run"),
                            ("run_constraints", "run_constrained")):
        specs = []
        for spec in map(str, _as_list(reqs.get(cb_key))):
            name = spec.split()[0]
            if section in ("build", "host"):
                # render._categorize_deps: a bare name that is a variant key gets the variant's
                # value (dashes and underscores ignored); get_env_dependencies: ensure_valid_spec.
                key = next((k for k in variant if re.sub("[-_]", "", k) == re.sub("[-_]", "", name)),
                           None)
                if len(spec.split()) == 1 and key is not None:
                    spec = f"{name} {variant[key]}"
                spec = ensure_valid_spec(spec)
            elif section == "run" and len(spec.split()) == 1 and name in PIN_RUN_AS_BUILD:
                # pin_run_as_build: run gets the host's version within min_pin/max_pin.
                if name in variant:
                    spec = f"{name} {apply_pin_expressions(variant[name], *PIN_RUN_AS_BUILD[name])}"
            specs.append(canonical_spec(spec))
        out.requirements[section] = sorted(specs)
    requires = [canonical_spec(str(r)) for r in _as_list(test.get("requires"))]
    commands = []
    for command in map(str, _as_list(test.get("commands"))):
        exists = re.fullmatch(r"test -f \$PREFIX/(\S+)", command.strip())
        missing = re.fullmatch(r"test ! -e \$PREFIX/(\S+)", command.strip())
        export = re.fullmatch(r"export ([A-Za-z_]\w*)='([^']*)'", command.strip())
        if command.strip() == "pip check":
            out.test_pip_check = True
        elif exists:
            out.test_files_exist.append(exists.group(1))
        elif missing:
            out.test_files_missing.append(missing.group(1))
        elif export:
            out.test_env[export.group(1)] = export.group(2)
        else:
            commands.append(command)
    if out.test_pip_check and "pip" in requires:
        requires.remove("pip")  # rattler-build's pip_check installs pip by itself
    out.test_commands = _command_lines(commands)
    out.test_requires = sorted(requires)
    out.test_imports = sorted(map(str, _as_list(test.get("imports"))))
    out.test_recipe_files = sorted(map(str, _as_list(test.get("files"))))
    out.test_source_files = sorted(map(str, _as_list(test.get("source_files"))))
    out.test_files_exist.sort()
    out.test_files_missing.sort()
    return out


def _rattler_script_lines(script: Any) -> list[str]:
    if isinstance(script, dict):
        if "file" in script:
            interpreter = script.get("interpreter") or {".py": "python"}.get(
                Path(str(script["file"])).suffix, "bash")
            return [f"{interpreter} {script['file']}"]
        content = script.get("content", "")
        content = content if isinstance(content, str) else "\n".join(map(str, content))
        if script.get("interpreter", "bash") == "python":
            return _command_lines([f"python - <<'PYTHON_TEST'\n{content}\nPYTHON_TEST"])
        return _command_lines([content])
    return _command_lines(_as_list(script))


def from_rattler_build(recipe: dict[str, Any], variant: dict[str, str]) -> Comparable:
    """The comparable form of a rattler-build rendering (Stage1 to_dict) of recipe.yaml."""
    build = recipe.get("build") or {}
    script = build.get("script") or {}
    linking = build.get("dynamic_linking") or {}
    reqs = recipe.get("requirements") or {}
    about = recipe.get("about") or {}
    out = Comparable(
        name=str(recipe["package"]["name"]),
        version=str(recipe["package"]["version"]),
        build_string=HASH_RE.sub("h<hash>", str(build.get("string", ""))),
        build_number=str(build.get("number", 0)),
        script=str(script.get("file", "build.sh")) if isinstance(script, dict) else "\n".join(
            _as_list(script)),
        # rattler-build leaves empty values out of the build environment; so does the comparison.
        script_env={k: str(v) for k, v in (script.get("env") or {}).items() if str(v)}
        if isinstance(script, dict) else {},
        overlinking_error=linking.get("overlinking_behavior") == "error",
        overdepending_error=linking.get("overdepending_behavior") == "error",
        missing_dso=[str(x) for x in _as_list(linking.get("missing_dso_allowlist"))],
        run_exports=reqs.get("run_exports") or None,
        license=str(about.get("license", "")),
        license_file=[str(x) for x in _as_list(about.get("license_file"))],
        summary=str(about.get("summary", "")),
    )
    if isinstance(script, dict):
        for name in _as_list(script.get("secrets")):
            out.script_env[name] = f"<inherited ${name}>"
    ignore = reqs.get("ignore_run_exports") or {}
    out.ignore_run_exports = {k: sorted(map(str, v)) for k, v in ignore.items() if v}
    for src in _as_list(recipe.get("source")):
        out.source.append({
            "url": [str(u) for u in _as_list(src.get("url"))],
            "sha256": str(src.get("sha256", "")),
            "patches": [str(p) for p in _as_list(src.get("patches"))],
        })
    for section in ("build", "host", "run", "run_constraints"):
        specs = []
        for spec in map(str, _as_list(reqs.get(section))):
            name = spec.split()[0]
            if len(spec.split()) == 1 and name in variant and section in ("build", "host"):
                spec = f"{name} {_variant_pin(variant[name])}"  # rattler-build's variant pin
            elif len(spec.split()) == 1 and name == "python" and section == "run" and "python" in variant:
                # python's run_export (python_abi X.Y.* *_cpXY) holds run's python to the host minor.
                spec = f"python {_variant_pin(variant['python'])}"
            specs.append(canonical_spec(spec))
        out.requirements[section] = sorted(specs)
    requires: list[str] = []
    commands: list[str] = []
    for test in _as_list(recipe.get("tests")):
        if "python" in test:
            python = test["python"]
            out.test_imports += [str(i) for i in _as_list(python.get("imports"))]
            out.test_pip_check = out.test_pip_check or python.get("pip_check", True)
        elif "package_contents" in test:
            files = test["package_contents"].get("files") or []
            if isinstance(files, dict):
                out.test_files_exist += map(str, _as_list(files.get("exists")))
                out.test_files_missing += map(str, _as_list(files.get("not_exists")))
            else:
                out.test_files_exist += map(str, files)
        elif "script" in test:
            if isinstance(test["script"], dict):
                out.test_env.update({k: str(v) for k, v in (test["script"].get("env") or {}).items()})
            commands += _rattler_script_lines(test["script"])
            test_reqs = test.get("requirements") or {}
            for spec in _as_list(test_reqs.get("build")) + _as_list(test_reqs.get("run")):
                if canonical_spec(spec) not in requires:
                    requires.append(canonical_spec(spec))
            files = test.get("files") or {}
            out.test_recipe_files += map(str, _as_list(files.get("recipe")))
            out.test_source_files += map(str, _as_list(files.get("source")))
            if isinstance(test["script"], dict) and "file" in test["script"]:
                out.test_recipe_files.append(str(test["script"]["file"]))
        else:
            out.test_commands.append(f"<untranslatable test {sorted(test)}>")
    out.test_commands += commands
    out.test_requires = sorted(requires)
    for name in ("test_imports", "test_files_exist", "test_files_missing", "test_recipe_files",
                 "test_source_files"):
        setattr(out, name, sorted(getattr(out, name)))
    return out


def differences(rattler: Comparable, conda: Comparable, label: str) -> list[str]:
    out = []
    for name in Comparable.__dataclass_fields__:
        a, b = getattr(rattler, name), getattr(conda, name)
        if name == "requirements":
            for section in sorted(set(a) | set(b)):
                only_r = sorted(set(a.get(section, [])) - set(b.get(section, [])))
                only_c = sorted(set(b.get(section, [])) - set(a.get(section, [])))
                if only_r or only_c:
                    out.append(f"{label}: requirements.{section}: recipe.yaml only {only_r}, "
                               f"meta.yaml only {only_c}")
        elif a != b:
            out.append(f"{label}: {name}: recipe.yaml {a!r} != meta.yaml {b!r}")
    return out


# --- skip ----------------------------------------------------------------------------------------


def rattler_skips(recipe_path: Path, variant: dict[str, str]) -> bool:
    """rattler-build's build.skip (any true condition skips), evaluated as its Jinja expressions."""
    raw = yaml.safe_load(recipe_path.read_text())
    skip = (raw.get("build") or {}).get("skip")
    if isinstance(skip, bool) or skip is None:
        return bool(skip)
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    ns = selector_namespace(variant)
    return any(env.compile_expression(str(cond))(**ns) for cond in _as_list(skip))


def conda_build_skips(meta_text: str, variant: dict[str, str]) -> bool:
    meta = render_text(meta_text, variant)
    return str((meta.get("build") or {}).get("skip", False)).lower() == "true"


# --- The parity check ----------------------------------------------------------------------------


def parity_differences(
    recipe: Path = RECIPE,
    meta: Path = META_YAML,
    variants_dir: Path = VARIANTS_DIR,
) -> list[str]:
    """Every way meta.yaml (rendered as conda-build would) differs from recipe.yaml, per variant."""
    from scripts.variants import load_variant_files, plan

    meta_text = meta.read_text()
    files = load_variant_files(variants_dir)
    problems: list[str] = []
    planned = plan(files=files, recipe=recipe)
    by_file: dict[str, list[Any]] = {}
    for pv in planned:
        by_file.setdefault(pv.variant_file.display_path, []).append(pv)
    for vfile in files:
        # The variants conda-build makes from `-m variants/<file>`, keyed like rattler-build's.
        cb_variants = expand_variants(vfile.data)
        key = lambda v: (v["cuda_compiler_version"], v["python"], v["pytorch"])  # noqa: E731
        cb_by_key = {key(v): v for v in cb_variants}
        rb = by_file.get(vfile.display_path, [])
        rb_keys = {(pv.cuda, pv.python, pv.torch) for pv in rb}
        if set(cb_by_key) != rb_keys:
            problems.append(f"{vfile.display_path}: conda-build variants {sorted(cb_by_key)} != "
                            f"rattler-build variants {sorted(rb_keys)}")
        for pv in rb:
            variant = {k: str(v) for k, v in pv.rendered.variant.items()}
            cb_variant = cb_by_key.get((pv.cuda, pv.python, pv.torch))
            if cb_variant is None:
                continue
            # conda-build's variant carries every key of the file; the used ones must agree.
            for k, v in variant.items():
                if cb_variant.get(k) != v:
                    problems.append(f"{pv.label}: variant key {k}: rattler-build {v!r}, "
                                    f"conda-build {cb_variant.get(k)!r}")
            try:
                cb_meta = render_text(meta_text, cb_variant, meta.parent)
            except RenderError as exc:
                problems.append(f"{pv.label}: {exc}")
                continue
            problems += differences(
                from_rattler_build(pv.rendered.recipe.to_dict(), variant),
                from_conda_build(cb_meta, cb_variant),
                pv.label,
            )
        # skip: both recipes must build on the same platforms.
        for platform in PLATFORMS:
            variant = dict(cb_variants[0], target_platform=platform)
            try:
                ours = conda_build_skips(meta_text, variant)
            except RenderError as exc:
                problems.append(f"{vfile.display_path} on {platform}: {exc}")
                continue
            theirs = rattler_skips(recipe, variant)
            if ours != theirs:
                problems.append(f"{vfile.display_path} on {platform}: skip: recipe.yaml {theirs}, "
                                f"meta.yaml {ours}")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--show", action="store_true", help="print conda-build's rendering per variant")
    args = parser.parse_args(argv)
    if args.show:
        from scripts.variants import load_variant_files

        for vfile in load_variant_files():
            for variant in expand_variants(vfile.data):
                meta = render_text(META_YAML.read_text(), variant)
                print(f"# {vfile.display_path}: python {variant['python']}, pytorch {variant['pytorch']}")
                print(yaml.safe_dump({k: meta[k] for k in ("build", "requirements", "test") if k in meta},
                                     sort_keys=False))
    problems = parity_differences()
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"meta.yaml and recipe.yaml differ ({len(problems)} difference(s))", file=sys.stderr)
        return 1
    print("meta.yaml (as conda-build renders it) matches recipe.yaml for every variant and platform")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
