"""Every `ssm-conda` and `ssm-conda-dev` command line of README.md and docs/*.md (code blocks and inline code)
runs, in a form that does no work, so that no example drifts from the tool.

`plan` and `ci-matrix` run as written (they build nothing). Every other line is parsed whole by its command's
parser (appending --help would stop argparse before it checks the rest), and `build` then checks its options and
takes its selection through build's own planning (channels, variants/, rattler-build's render) without building.
The rest stop at parsing: upload's --dry-run needs built packages, sync-matrix's conda-forge, doctor and gpu-test
this machine, standin and bench-* do real work. Words that stand for something are expanded as RULES and
PLACEHOLDERS say, each with its reason.
"""

from __future__ import annotations

import importlib
import itertools
import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ssm_conda import cli

from tests.repo import REPO_ROOT

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
TOOL_RE = re.compile(r"(?<![\w/.-])ssm-conda(?:-dev)?(?![\w-])")
FENCE_RE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
INLINE_RE = re.compile(r"`([^`\n]+(?:\n[^`\n]+)?)`")  # inline code, perhaps wrapped onto a second line
UPLOAD_TARGET_RE = re.compile(r"^\| `([a-z0-9]+)` \| `([^`]+)` \|", re.M)  # docs/upload.md's table: target, options
ALTERNATIVES_RE = re.compile(r"(?<![\w|-])[\w-]+(?:\|[\w-]+)+(?![\w|-])")
OPTIONAL_RE = re.compile(r"\[([^\[\]]*)\]")
# what `..` stands for after each option: the README's own example
VALUES = {"--cuda": "13.0", "--python": "3.12", "--torch": "2.13", "--generation": "sm90"}
ENV = {"CHANNEL": "mamba-kernels"}  # set by the workflow that runs the documented line (docs/ci.md)
GPU = "9.0"  # `--arch native` on this machine: an H100 stands in for whatever GPU it has, or none

# A word of the docs that stands for a value: what the test puts there, and why.
PLACEHOLDERS = {
    "SELECTORS": ("--cuda 13.0 --python 3.12 --torch 2.13 --generation sm90", "plan's selectors: the README's example"),
    "<that channel>": ("{tmp}/channel", "a local channel: an empty folder (a plan reads no package)"),
    "file:///srv/": ("file://{tmp}/srv/", "a local channel: an empty folder under a temporary root"),
    "PACKAGE...": ("{tmp}/causal-conv1d.conda", "built packages: bench-zstd and gpu-test are only parsed"),
    "BUCKET/PATH": ("bucket/conda", "an S3 bucket and its path"),
    "DIR": ("{tmp}/dir", "a folder"),
    "URL": ("https://example.org/conda", "a server's or a channel's URL"),
    "DESTINATION": ("mamba-kernels", "where upload sends the packages (the target's own options follow)"),
    "CHANNEL": ("mamba-kernels", "a channel's name"),
    "OWNER": ("mamba-kernels", "an anaconda.org owner"),
    "REPO": ("conda-local", "an Artifactory repository"),
    "R": ("us-east-1", "an S3 region"),
}
# How the other shorthand of the docs is read.
RULES = {
    "mention": "`TOOL` or `TOOL COMMAND` alone in prose names the tool or the command: its --help runs",
    "alternatives": "a|b, or [a | b]: one line each",
    "TARGET": "upload's TARGET [target options]: one line per target of docs/upload.md's table, with its options",
    "target ...": "`...` after an upload target: that target's options from docs/upload.md's table",
    "optional": "[--option value]: included (the longest line parses every option)",
    "..": "`..` for an option's value: the README's (VALUES)",
    "...": "`...` for more options of the kinds shown: left out",
    "shell": f"~ and $VARS as a shell expands them: HOME a temporary folder, {ENV}",
}


@dataclass(frozen=True)
class DocLine:
    doc: str
    line: int
    code: str
    inline: bool

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.code}"


def doc_lines() -> list[DocLine]:
    found = []
    for path in DOCS:
        text = path.read_text()
        name = str(path.relative_to(REPO_ROOT))
        for block in FENCE_RE.finditer(text):
            start, joined = text.count("\n", 0, block.start(1)) + 1, []  # (line number, text) with continuations joined
            for offset, line in enumerate(block[1].splitlines()):
                if joined and joined[-1][1].endswith("\\"):
                    joined[-1] = (joined[-1][0], joined[-1][1][:-1] + " " + line)
                else:
                    joined.append((start + offset, line))
            for number, line in joined:
                code = " ".join(line.split(" #", 1)[0].split())
                if TOOL_RE.match(code):
                    found.append(DocLine(name, number, code, inline=False))
        prose = FENCE_RE.sub(lambda m: re.sub(r"[^\n]", " ", m[0]), text)  # the same offsets, without the blocks
        for span in INLINE_RE.finditer(prose):
            code = " ".join(span[1].split())
            if tool := TOOL_RE.search(code):
                # a command quoted in parentheses inside a message: up to its closing parenthesis
                code = code[tool.start():].split(")")[0] if code[:tool.start()].endswith("(") else code[tool.start():]
                found.append(DocLine(name, prose.count("\n", 0, span.start()) + 1, code, inline=True))
    return found


def upload_targets() -> dict[str, str]:
    return dict(UPLOAD_TARGET_RE.findall((REPO_ROOT / "docs" / "upload.md").read_text()))


def _each(text: str, pattern: re.Pattern[str], choices: Callable[[re.Match[str]], list[str]]) -> list[str]:
    """text with each match of pattern replaced by each of its choices, every combination."""
    pieces, last = [], 0
    for match in pattern.finditer(text):
        pieces += [[text[last:match.start()]], choices(match)]
        last = match.end()
    return ["".join(combo) for combo in itertools.product(*pieces, [text[last:]])]


def with_target_options(line: str, targets: dict[str, str]) -> str:
    """`upload anaconda --to ...` as `upload anaconda --to OWNER [--label main]`: the options the line gives
    before the `...` are not repeated."""
    words = line.split()
    target = next(w for w in words if w in targets)
    given = " ".join(words[words.index(target) + 1:words.index("...")])
    options = targets[target]
    return line.replace("...", options.removeprefix(given).strip() if options.startswith(given) else options)


def expand(code: str, tmp: Path, used: set[str], targets: dict[str, str] | None = None) -> list[list[str]]:
    """The argv lists (the tool's name first) that one documented line stands for; `targets`: upload's, with their
    options (default: docs/upload.md's table)."""
    targets = upload_targets() if targets is None else targets
    lines = [code]
    if ALTERNATIVES_RE.search(code):
        used.add("alternatives")
        lines = [x for line in lines for x in _each(line, ALTERNATIVES_RE, lambda m: m[0].split("|"))]
    if "TARGET" in code:
        used.add("TARGET")
        lines = [line.replace("TARGET", t).replace("[target options]", o) for line in lines for t, o in targets.items()]
    if " upload " in code and "..." in code:
        used.add("target ...")
        lines = [with_target_options(line, targets) for line in lines]
    for word, (value, _reason) in PLACEHOLDERS.items():
        # a whole word: NAME, not the NAME in PREFIX_NAME or $NAME
        pattern = re.compile(rf"(?<![\w$]){re.escape(word)}(?!\w)" if word.isalnum() else re.escape(word))
        if any(pattern.search(line) for line in lines):
            used.add(word)
            lines = [pattern.sub(value.replace("{tmp}", str(tmp)), line) for line in lines]
    while any(OPTIONAL_RE.search(line) for line in lines):
        used.add("optional")
        if any(" | " in m[1] for line in lines for m in OPTIONAL_RE.finditer(line)):
            used.add("alternatives")
        lines = [x for line in lines for x in _each(line, OPTIONAL_RE, lambda m: [a.strip() for a in m[1].split(" | ")])]
    argvs = []
    for line in lines:
        words = shlex.split(line)
        if "..." in words:
            used.add("...")
        if ".." in words:
            used.add("..")
        words = [VALUES[words[i - 1]] if w == ".." else w for i, w in enumerate(words) if w != "..."]
        if any(w.startswith("~") or "$" in w for w in words):
            used.add("shell")
        argvs.append([os.path.expandvars(os.path.expanduser(w)) for w in words])
    return argvs


def tool_of(name: str) -> Any:
    """What cli.main and cli.parse_args take for a tool: ssm-conda's default, or the dev tools' own."""
    if name == "ssm-conda":
        return getattr(cli, "SSM_CONDA", cli.COMMANDS)
    if importlib.util.find_spec("ssm_conda_dev"):
        return importlib.import_module("ssm_conda_dev.cli").SSM_CONDA_DEV
    return cli.DEV_COMMANDS


def plan_build(args: Any) -> None:
    """What `build` does before it writes anything: its options checked (the output channel, the compiler cache),
    then the selection, with the packages it needs, planned against its channels (a missing local channel, a value
    variants/ lacks and a render error are UsageErrors)."""
    from ssm_conda import build

    options = build.BuildOptions.from_args(args, os.environ)
    build.planned(options.plan, build.with_needs(options.plan.selection))


def make_local_channels(channels: list[str] | None, tmp: Path) -> None:
    """The folders of the local channels a line names, where they fall under tmp: empty, as a plan needs no package."""
    for channel in channels or []:
        path = Path(channel.removeprefix("file://")).expanduser().absolute()
        if path.is_relative_to(tmp):
            path.mkdir(parents=True, exist_ok=True)


def run_dry(argv: list[str], inline: bool, tmp: Path, capsys: pytest.CaptureFixture[str], used: set[str]) -> None:
    tool = tool_of(argv[0])
    args = argv[1:]
    if inline and len(args) <= 1 and not any(a.startswith("-") for a in args):
        used.add("mention")
        args = [*args, "--help"]
    if "--help" in args or "-h" in args:
        with pytest.raises(SystemExit) as exit_info:
            cli.parse_args(args, tool)
        assert exit_info.value.code == 0
        return
    parsed = cli.parse_args(args, tool)  # a UsageError here: an option or a choice the command does not take
    if parsed.command in ("plan", "ci-matrix"):
        status = cli.main(args, tool)
        assert status == 0, capsys.readouterr().err
    elif parsed.command == "build":
        make_local_channels(parsed.channel, tmp)
        plan_build(parsed)


@pytest.fixture
def dry_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary current folder and HOME, the documented environment, and a machine with one GPU."""
    from ssm_conda import machine

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(machine, "driver_info", lambda *a, **k: machine.DriverInfo(gpus=[machine.GpuInfo(0, "NVIDIA H100", GPU)]))
    return tmp_path


LINES = doc_lines()


@pytest.mark.parametrize("doc_line", LINES, ids=str)
def test_documented_command_runs(doc_line: DocLine, dry_machine: Path, capsys: pytest.CaptureFixture[str]):
    used: set[str] = set()
    for argv in expand(doc_line.code, dry_machine, used):
        try:
            run_dry(argv, doc_line.inline, dry_machine, capsys, used)
            continue
        except Exception as exc:  # noqa: BLE001 - any failure of a documented line is reported the same way
            error = f"{type(exc).__name__}: {exc}"
        read_as = "; ".join(f"{w}: {PLACEHOLDERS[w][1] if w in PLACEHOLDERS else RULES[w]}" for w in sorted(used))
        pytest.fail(f"{doc_line}\n  ran as: {shlex.join(argv)}\n  read as: {read_as or 'written'}\n  {error}", pytrace=False)


def test_the_docs_examples_are_found():
    """Code blocks, inline code wrapped across lines, and a command quoted inside a message."""
    codes = {(line.doc, line.code) for line in LINES}
    assert ("README.md", "ssm-conda build --target-platform linux-aarch64 --generation sm90") in codes
    assert ("README.md", "ssm-conda plan SELECTORS --write-variants selection.yaml") in codes
    assert ("docs/testing.md", "ssm-conda build --arch native") in codes
    assert any(line.doc == "docs/upload.md" and not line.inline and "--dry-run" in line.code for line in LINES)
    assert len({line.doc for line in LINES}) >= 8


def test_shorthand_expands_to_one_line_per_alternative(tmp_path):
    used: set[str] = set()
    targets = {"anaconda": "--to OWNER [--label main]", "s3": "--to s3://BUCKET/PATH --region R [--endpoint-url URL]"}
    argvs = expand("ssm-conda upload anaconda|s3 --to ...", tmp_path, used, targets)
    assert argvs == [["ssm-conda", "upload", "anaconda", "--to", "mamba-kernels", "--label", "main"],
                     ["ssm-conda", "upload", "s3", "--to", "s3://bucket/conda", "--region", "us-east-1",
                      "--endpoint-url", "https://example.org/conda"]]
    assert expand("ssm-conda-dev x [--json | --json-file b.json] --cuda .. ...", tmp_path, used) == [
        ["ssm-conda-dev", "x", "--json", "--cuda", "13.0"], ["ssm-conda-dev", "x", "--json-file", "b.json", "--cuda", "13.0"]]
    assert used == {"alternatives", "target ...", "optional", "BUCKET/PATH", "URL", "OWNER", "R", "..", "..."}
