"""Generate recipe/meta.yaml (conda-build) from recipe/recipe.yaml (rattler-build, the source of truth).

    python scripts/metayaml.py           # write recipe/meta.yaml
    python scripts/metayaml.py --check   # exit 1, with a one-line summary, when meta.yaml is stale

The translation covers the subset of the v1 schema this project uses; anything else in recipe.yaml
stops the generator with a message naming the key, so the two recipes can never drift silently.
Both recipes share recipe/build.sh and recipe/patches/; conda-build runs build.sh by itself.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python scripts/metayaml.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml

from scripts.common import RECIPE, RECIPE_DIR, PipelineError, run_cli

META_YAML = RECIPE_DIR / "meta.yaml"
HEADER = (
    "# GENERATED from recipe.yaml by scripts/metayaml.py: do not edit. Change recipe.yaml and run\n"
    "# `python scripts/metayaml.py` (tests/recipe/test_conda_build_parity.py checks both agree).\n"
    "# conda-build: conda build recipe -m variants/cuda130.yaml --output-folder output\n"
)


class GeneratorError(PipelineError):
    """recipe.yaml uses something this generator does not translate."""


# --- Jinja expressions ---------------------------------------------------------------------------

TEMPLATE_RE = re.compile(r"\$\{\{(.*?)\}\}", re.S)
TOKEN_RE = re.compile(
    r"""\s+|'[^']*'|"[^"]*"|[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)*|==|!=|<=|>=|[|()\[\],.:<>+~\-=*/]"""
)
# rattler-build name -> conda-build name (both only inside ${{ }}).
RENAMED_VARIABLES = {"build_number": "PKG_BUILDNUM"}
ALLOWED_FUNCTIONS = {"compiler", "stdlib", "pin_subpackage", "pin_compatible", "cdt"}
ALLOWED_FILTERS = {"replace", "lower", "upper", "trim", "version_to_buildstring"}
PIN_PATTERN_RE = re.compile(r"""^['"]x(\.x)*['"]$""")
# rattler-build's env.get("NAME", default="x") is conda-build's environ.get("NAME", "x").
ENV_GET_RE = re.compile(
    r"""\benv\.get\(\s*('[^']*'|"[^"]*")\s*(?:,\s*default\s*=\s*('[^']*'|"[^"]*")\s*)?\)"""
)


def _tokens(expr: str) -> list[str]:
    tokens, pos = [], 0
    while pos < len(expr):
        match = TOKEN_RE.match(expr, pos)
        if match is None:
            raise GeneratorError(f"cannot translate Jinja expression {expr.strip()!r} for conda-build")
        tokens.append(match.group(0))
        pos = match.end()
    return tokens


def translate_expression(expr: str) -> str:
    """One rattler-build Jinja expression (the inside of ${{ }}) as a conda-build one."""
    expr = ENV_GET_RE.sub(lambda m: f"environ.get({m.group(1)}, {m.group(2) or repr('')})", expr)
    tokens = _tokens(expr)
    significant = [i for i, t in enumerate(tokens) if not t.isspace()]
    for n, i in enumerate(significant):
        tok = tokens[i]
        prev = tokens[significant[n - 1]] if n else ""
        nxt = tokens[significant[n + 1]] if n + 1 < len(significant) else ""
        before_dot = tokens[significant[n - 2]] if n >= 2 else ""
        if tok == "get" and before_dot == "environ" and prev == "." and nxt == "(":
            continue
        if re.fullmatch(r"[A-Za-z_]\w*", tok) and prev == "." and nxt == "(":
            raise GeneratorError(f"Jinja function {tok!r} (a method call) has no conda-build translation")
        if not re.fullmatch(r"[A-Za-z_]\w*", tok) or prev == ".":
            continue  # literals, operators, attribute names
        if prev == "|":
            if tok not in ALLOWED_FILTERS:
                raise GeneratorError(f"Jinja filter {tok!r} has no conda-build translation")
            if tok == "version_to_buildstring":
                tokens[i] = "replace('.', '')"
        elif nxt == "(":
            if tok not in ALLOWED_FUNCTIONS:
                raise GeneratorError(f"Jinja function {tok!r} has no conda-build translation")
        elif nxt == "=" and prev in ("(", ","):
            pass  # a keyword argument; pin_* bounds are renamed below
        elif tok in ("true", "false", "none"):
            tokens[i] = tok.capitalize()
        elif tok == "hash":
            tokens[i] = "PKG_HASH[1:]"  # rattler's hash has no leading 'h'; conda-build's has
        else:
            tokens[i] = RENAMED_VARIABLES.get(tok, tok)
    text = "".join(tokens).strip()

    # pin functions: rattler's lower_bound/upper_bound take a pin pattern ('x.x') or a version.
    def pin_kwarg(match: re.Match[str]) -> str:
        key, value = match.group(1), match.group(2)
        if PIN_PATTERN_RE.match(value):
            key = {"lower_bound": "min_pin", "upper_bound": "max_pin"}[key]
        return f"{key}={value}"

    return re.sub(r"\b(lower_bound|upper_bound)=('[^']*'|\"[^\"]*\")", pin_kwarg, text)


def translate_template(value: Any) -> Any:
    """A scalar from recipe.yaml with its ${{ }} parts in conda-build's {{ }} syntax."""
    if not isinstance(value, str):
        return value
    value = re.sub(r"h\$\{\{\s*hash\s*\}\}", "{{ PKG_HASH }}", value)

    def one(match: re.Match[str]) -> str:
        return "{{ " + translate_expression(match.group(1)) + " }}"

    return TEMPLATE_RE.sub(one, value)


def translate_condition(cond: Any) -> str:
    """An `if:` / `skip:` condition (a Jinja expression) as a conda-build selector."""
    if isinstance(cond, bool):
        return str(cond)
    text = str(cond).strip()
    if "${{" in text:
        text = TEMPLATE_RE.sub(lambda m: m.group(1).strip(), text)
    for tok in _tokens(text):
        if tok in ("|", "is", "[", "]", "~") or tok in ALLOWED_FUNCTIONS:
            raise GeneratorError(f"condition {text!r} has no conda-build selector translation")
    if re.search(r"[A-Za-z_]\w*\s*\(", text):
        raise GeneratorError(f"condition {text!r} calls a function; conda-build selectors cannot")
    return text.replace("true", "True").replace("false", "False")


# --- Output: a small YAML writer that keeps Jinja and selectors as text -------------------------

PLAIN_UNSAFE_START = tuple("*&!|>'\"%@`[]{},#?:-")


def scalar(value: Any) -> str:
    """A YAML scalar; Jinja stays unquoted when the text around it is plain-safe."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    text = str(value)
    literal = re.sub(r"\{\{.*?\}\}", "x", text)
    needs_quotes = (
        not literal
        or literal.startswith(PLAIN_UNSAFE_START)
        or ": " in literal
        or " #" in literal
        or literal.endswith(":")
        or literal != literal.strip()
        or literal.lower() in ("true", "false", "yes", "no", "null", "on", "off", "~")
        or re.fullmatch(r"[-+]?[\d.]+(e[-+]?\d+)?", literal) is not None
    )
    if "{{" not in text and not needs_quotes:
        needs_quotes = yaml.safe_load(text) != text
    if not needs_quotes:
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def line(self, indent: int, text: str, selector: str | None = None) -> None:
        self.lines.append("  " * indent + text + (f"  # [{selector}]" if selector else ""))

    def items(self, indent: int, values: Sequence[tuple[Any, str | None]]) -> None:
        for value, selector in values:
            if isinstance(value, str) and "\n" in value:
                self.line(indent, "- |", selector)
                for sub in value.rstrip("\n").split("\n"):
                    self.lines.append(("  " * (indent + 1) + sub) if sub else "")
            else:
                self.line(indent, "- " + scalar(value), selector)

    def key_list(self, indent: int, key: str, values: Sequence[tuple[Any, str | None]]) -> None:
        if values:
            self.line(indent, f"{key}:")
            self.items(indent + 1, values)

    def block(self, indent: int, key: str, text: str) -> None:
        self.line(indent, f"{key}: |")
        for sub in str(text).rstrip("\n").split("\n"):
            self.lines.append(("  " * (indent + 1) + sub) if sub else "")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def flatten(values: Any, where: str, selector: str | None = None) -> list[tuple[Any, str | None]]:
    """A v1 list with `if:/then:/else:` items as (translated item, conda-build selector) pairs."""
    if values is None:
        return []
    if not isinstance(values, list):
        values = [values]
    out: list[tuple[Any, str | None]] = []
    for item in values:
        if isinstance(item, dict) and "if" in item:
            unknown = set(item) - {"if", "then", "else"}
            if unknown:
                raise GeneratorError(f"{where}: unexpected keys {sorted(unknown)} in an if: item")
            cond = translate_condition(item["if"])
            both = lambda c: f"({selector}) and ({c})" if selector else c  # noqa: E731
            out += flatten(item.get("then"), where, both(cond))
            out += flatten(item.get("else"), where, both(f"not ({cond})"))
        elif isinstance(item, (dict, list)):
            raise GeneratorError(f"{where}: only strings (and if: items) are translated, got {item!r}")
        else:
            out.append((translate_template(item), selector))
    return out


def _check_keys(section: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = set(section) - allowed
    if unknown:
        raise GeneratorError(
            f"{where}: {', '.join(sorted(unknown))} not translated to meta.yaml; "
            "extend scripts/metayaml.py (and the parity test) first"
        )


# --- Sections ------------------------------------------------------------------------------------


def _context(w: Writer, context: dict[str, Any]) -> None:
    for key, value in (context or {}).items():
        if isinstance(value, str) and TEMPLATE_RE.fullmatch(value.strip()):
            expr = translate_expression(TEMPLATE_RE.fullmatch(value.strip()).group(1))
        elif isinstance(value, str) and "${{" in value:
            parts = []
            for i, piece in enumerate(TEMPLATE_RE.split(value)):
                if piece:
                    parts.append(f"({translate_expression(piece)})" if i % 2 else repr(piece))
            expr = " ~ ".join(parts)
        elif isinstance(value, str):
            expr = '"' + value.replace('"', '\\"') + '"'
        else:
            expr = repr(value)
        w.line(0, f"{{% set {key} = {expr} %}}")
    w.line(0, "")


def _source(w: Writer, source: Any) -> None:
    sources = source if isinstance(source, list) else [source]
    if not sources or sources == [None]:
        return
    w.line(0, "source:")
    single = len(sources) == 1  # one source is a mapping, as conda-build recipes usually write it
    for src in sources:
        if isinstance(src, dict) and "if" in src:
            raise GeneratorError("source: if: items are not translated")
        _check_keys(src, {"url", "sha256", "md5", "patches", "file_name", "target_directory"}, "source")
        first = True
        for key, cb_key in (
            ("url", "url"),
            ("sha256", "sha256"),
            ("md5", "md5"),
            ("file_name", "fn"),
            ("target_directory", "folder"),
        ):
            if key not in src:
                continue
            prefix = "" if single else "- " if first else "  "
            value = src[key]
            if isinstance(value, list):
                w.line(1, f"{prefix}{cb_key}:")
                w.items(2 if single else 3, flatten(value, f"source.{key}"))
            else:
                w.line(1, f"{prefix}{cb_key}: {scalar(translate_template(value))}")
            first = False
        if "patches" in src:
            w.line(1, ("" if single else "- " if first else "  ") + "patches:")
            w.items(2 if single else 3, flatten(src["patches"], "source.patches"))
    w.line(0, "")


def _skip_selector(skip: Any) -> str | None:
    if skip is None or skip is False:
        return None
    if skip is True:
        return "True"
    conditions = [translate_condition(c) for c in (skip if isinstance(skip, list) else [skip])]
    if len(conditions) == 1:
        return conditions[0]
    return " or ".join(f"({c})" for c in conditions)


def _build(w: Writer, build: dict[str, Any], requirements: dict[str, Any]) -> None:
    build = build or {}
    _check_keys(
        build,
        {"number", "string", "skip", "script", "dynamic_linking", "noarch", "python"},
        "build",
    )
    w.line(0, "build:")
    if "number" in build:
        w.line(1, f"number: {scalar(translate_template(build['number']))}")
    if "string" in build:
        w.line(1, f"string: {scalar(translate_template(build['string']))}")
    selector = _skip_selector(build.get("skip"))
    if selector:
        w.line(1, "skip: true", selector)
    if "noarch" in build:
        w.line(1, f"noarch: {scalar(build['noarch'])}")

    script = build.get("script")
    env: dict[str, Any] = {}
    secrets: list[str] = []
    if isinstance(script, dict):
        _check_keys(script, {"file", "env", "secrets"}, "build.script")
        if script.get("file", "build.sh") not in ("build.sh", "build"):
            raise GeneratorError("build.script.file: conda-build runs build.sh only; name it build.sh")
        env = script.get("env") or {}
        secrets = list(script.get("secrets") or [])
    elif isinstance(script, (str, list)):
        w.key_list(1, "script", flatten(script, "build.script"))
    elif script is not None:
        raise GeneratorError(f"build.script: unexpected {script!r}")
    # else: no script key, and conda-build runs recipe/build.sh by itself, as rattler-build does.
    script_env = [(f"{k}={translate_template(v)}", None) for k, v in env.items()] + [
        (name, None) for name in secrets
    ]
    w.key_list(1, "script_env", script_env)

    python = build.get("python") or {}
    _check_keys(python, {"entry_points"}, "build.python")
    w.key_list(1, "entry_points", flatten(python.get("entry_points"), "build.python.entry_points"))

    linking = build.get("dynamic_linking") or {}
    _check_keys(
        linking,
        {"overlinking_behavior", "overdepending_behavior", "missing_dso_allowlist", "rpaths",
         "binary_relocation"},
        "build.dynamic_linking",
    )
    if linking.get("overlinking_behavior", "ignore") == "error":
        w.line(1, "error_overlinking: true")
    if linking.get("overdepending_behavior", "ignore") == "error":
        w.line(1, "error_overdepending: true")
    w.key_list(1, "missing_dso_whitelist", flatten(linking.get("missing_dso_allowlist"), "dso"))
    w.key_list(1, "rpaths", flatten(linking.get("rpaths"), "build.dynamic_linking.rpaths"))
    if "binary_relocation" in linking:
        w.line(1, f"binary_relocation: {scalar(linking['binary_relocation'])}")

    # conda-build keeps run_exports and ignore_run_exports under build:.
    run_exports = requirements.get("run_exports")
    if isinstance(run_exports, dict):
        w.line(1, "run_exports:")
        for strength, specs in run_exports.items():
            w.key_list(2, strength, flatten(specs, f"requirements.run_exports.{strength}"))
    elif run_exports:
        w.key_list(1, "run_exports", flatten(run_exports, "requirements.run_exports"))
    ignore = requirements.get("ignore_run_exports") or {}
    _check_keys(ignore, {"by_name", "from_package"}, "requirements.ignore_run_exports")
    w.key_list(1, "ignore_run_exports", flatten(ignore.get("by_name"), "ignore_run_exports"))
    w.key_list(1, "ignore_run_exports_from", flatten(ignore.get("from_package"), "ignore_run_exports"))
    w.line(0, "")


def _requirements(w: Writer, requirements: dict[str, Any]) -> None:
    _check_keys(
        requirements,
        {"build", "host", "run", "run_constraints", "run_exports", "ignore_run_exports"},
        "requirements",
    )
    sections = [("build", "build"), ("host", "host"), ("run", "run"),
                ("run_constraints", "run_constrained")]
    if not any(requirements.get(k) for k, _ in sections):
        return
    w.line(0, "requirements:")
    for key, cb_key in sections:
        w.key_list(1, cb_key, flatten(requirements.get(key), f"requirements.{key}"))
    w.line(0, "")


SCRIPT_SUFFIX_INTERPRETER = {".py": "python", ".sh": "bash"}


def _script_commands(script: Any, files: list) -> list[tuple[Any, str | None]]:
    """A v1 script test's script as conda-build test commands (run in bash, one env)."""
    if isinstance(script, (str, list)):
        return flatten(script, "tests.script")
    if not isinstance(script, dict):
        raise GeneratorError(f"tests.script: unexpected {script!r}")
    _check_keys(script, {"interpreter", "content", "file", "env"}, "tests.script")
    # conda-build's test section has no env: the test script exports it (one bash script runs all).
    exports: list[tuple[Any, str | None]] = []
    for key, value in (script.get("env") or {}).items():
        value = translate_template(str(value))
        if "'" in value or not re.fullmatch(r"[A-Za-z_]\w*", str(key)):
            raise GeneratorError(f"tests.script.env {key}: cannot be written as export {key}='...'")
        exports.append((f"export {key}='{value}'", None))
    return exports + _script_body(script, files)


def _script_body(script: dict[str, Any], files: list) -> list[tuple[Any, str | None]]:
    if "file" in script:
        path = str(script["file"])
        interpreter = script.get("interpreter") or SCRIPT_SUFFIX_INTERPRETER.get(Path(path).suffix)
        if interpreter not in ("bash", "python"):
            raise GeneratorError(f"tests.script.file {path!r}: give interpreter bash or python")
        files.append((path, None))
        return [(f"{interpreter} {path}", None)]
    interpreter = script.get("interpreter", "bash")
    content = script.get("content")
    if interpreter == "bash":
        return flatten(content, "tests.script.content")
    if interpreter == "python":
        body = content if isinstance(content, str) else "\n".join(map(str, content))
        return [(f"python - <<'PYTHON_TEST'\n{translate_template(body).rstrip()}\nPYTHON_TEST\n", None)]
    raise GeneratorError(f"tests.script.interpreter {interpreter!r} is not translated")


def _tests(w: Writer, tests: list[dict[str, Any]] | None) -> None:
    imports: list[tuple[Any, str | None]] = []
    requires: list[tuple[Any, str | None]] = []
    commands: list[tuple[Any, str | None]] = []
    files: list[tuple[Any, str | None]] = []
    source_files: list[tuple[Any, str | None]] = []
    file_checks: list[tuple[Any, str | None]] = []
    for test in tests or []:
        if "if" in test:
            raise GeneratorError("tests: if: items are not translated")
        if "python" in test:
            python = test["python"]
            _check_keys(python, {"imports", "pip_check"}, "tests.python")
            imports += flatten(python.get("imports"), "tests.python.imports")
            if python.get("pip_check", True):  # the v1 default is true
                if ("pip", None) not in requires:
                    requires.append(("pip", None))
                commands.append(("pip check", None))
        elif "package_contents" in test:
            contents = test["package_contents"]
            _check_keys(contents, {"files", "site_packages", "bin", "lib", "include"}, "tests.package_contents")
            if set(contents) - {"files"}:
                raise GeneratorError("tests.package_contents: only files: is translated")
            checks = contents["files"]
            exists = checks.get("exists") if isinstance(checks, dict) else checks
            missing = checks.get("not_exists") if isinstance(checks, dict) else None
            for path, sel in flatten(exists, "tests.package_contents.files"):
                file_checks.append((f"test -f $PREFIX/{path}", sel))
            for path, sel in flatten(missing, "tests.package_contents.files.not_exists"):
                file_checks.append((f"test ! -e $PREFIX/{path}", sel))
        elif "script" in test:
            _check_keys(test, {"script", "files", "requirements"}, "tests.script")
            test_files = test.get("files") or {}
            _check_keys(test_files, {"recipe", "source"}, "tests.files")
            files += flatten(test_files.get("recipe"), "tests.files.recipe")
            source_files += flatten(test_files.get("source"), "tests.files.source")
            reqs = test.get("requirements") or {}
            _check_keys(reqs, {"run", "build"}, "tests.requirements")
            # conda-build has one test environment: the test's build tools join it too.
            for spec in flatten(reqs.get("build"), "tests.requirements") + flatten(
                reqs.get("run"), "tests.requirements"
            ):
                if spec not in requires:
                    requires.append(spec)
            commands += _script_commands(test["script"], files)
        else:
            raise GeneratorError(f"tests: {', '.join(sorted(test))} not translated to meta.yaml")
    if not (imports or commands or file_checks):
        return
    w.line(0, "test:")
    w.key_list(1, "source_files", source_files)
    w.key_list(1, "files", files)
    w.key_list(1, "requires", requires)
    w.key_list(1, "imports", imports)
    w.key_list(1, "commands", file_checks + commands)
    w.line(0, "")


ABOUT_KEYS = {
    "homepage": "home",
    "repository": "dev_url",
    "documentation": "doc_url",
    "license": "license",
    "license_family": "license_family",
    "license_file": "license_file",
    "summary": "summary",
    "description": "description",
}


def _about(w: Writer, about: dict[str, Any]) -> None:
    _check_keys(about, set(ABOUT_KEYS), "about")
    if not about:
        return
    w.line(0, "about:")
    for key, cb_key in ABOUT_KEYS.items():
        if key not in about:
            continue
        value = about[key]
        if isinstance(value, list):
            w.key_list(1, cb_key, flatten(value, f"about.{key}"))
        elif isinstance(value, str) and "\n" in value:
            w.block(1, cb_key, translate_template(value))
        else:
            w.line(1, f"{cb_key}: {scalar(translate_template(value))}")


def _extra(w: Writer, extra: dict[str, Any]) -> None:
    if not extra:
        return
    dumped = yaml.safe_dump({"extra": extra}, sort_keys=False, default_flow_style=False)
    w.line(0, "")
    w.lines += dumped.rstrip("\n").split("\n")


def generate(recipe_text: str) -> str:
    """meta.yaml text for the given recipe.yaml text."""
    recipe = yaml.safe_load(recipe_text)
    if not isinstance(recipe, dict):
        raise GeneratorError("recipe.yaml is not a mapping")
    if "outputs" in recipe or "recipe" in recipe:
        raise GeneratorError("multi-output recipes are not translated to meta.yaml")
    _check_keys(
        recipe,
        {"schema_version", "context", "package", "source", "build", "requirements", "tests",
         "about", "extra"},
        "recipe",
    )
    w = Writer()
    w.lines += HEADER.rstrip("\n").split("\n")
    _context(w, recipe.get("context") or {})
    package = recipe.get("package") or {}
    _check_keys(package, {"name", "version"}, "package")
    w.line(0, "package:")
    w.line(1, f"name: {scalar(translate_template(package['name']))}")
    w.line(1, f"version: {scalar(translate_template(package['version']))}")
    w.line(0, "")
    _source(w, recipe.get("source"))
    requirements = recipe.get("requirements") or {}
    _build(w, recipe.get("build") or {}, requirements)
    _requirements(w, requirements)
    _tests(w, recipe.get("tests"))
    _about(w, recipe.get("about") or {})
    _extra(w, recipe.get("extra") or {})
    return w.text()


def stale_summary(expected: str, actual: str | None, path: Path = META_YAML) -> str | None:
    """None when up to date, else one line saying how the file differs."""
    if actual == expected:
        return None
    if actual is None:
        return f"{path.name} is missing; run `python scripts/metayaml.py`"
    diff = list(difflib.unified_diff(actual.splitlines(), expected.splitlines(), lineterm="", n=0))
    changed = [d for d in diff if d[:1] in "+-" and not d.startswith(("+++", "---"))]
    added = sum(1 for d in changed if d.startswith("+"))
    removed = len(changed) - added
    first = next((d for d in changed), "")
    return (
        f"{path.name} is stale ({added} line(s) to add, {removed} to remove; first: {first.strip()!r}); "
        "run `python scripts/metayaml.py`"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail (exit 1) when meta.yaml is stale")
    parser.add_argument("--recipe", type=Path, default=RECIPE, help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    output = args.output or args.recipe.parent / "meta.yaml"
    expected = generate(args.recipe.read_text())
    if args.check:
        actual = output.read_text() if output.exists() else None
        summary = stale_summary(expected, actual, output)
        if summary:
            print(summary, file=sys.stderr)
            return 1
        print(f"{output.name} is up to date with {args.recipe.name}")
        return 0
    if output.exists() and output.read_text() == expected:
        print(f"{output.name} already up to date")
    else:
        output.write_text(expected)
        print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
