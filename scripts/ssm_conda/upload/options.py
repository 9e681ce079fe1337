"""The command line of `ssm-conda upload`: global options before or after the target name, and
errors that never repeat what was typed after an unknown option (it may be a secret)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any

from ssm_conda.cli import ArgumentParser
from ssm_conda.console import UsageError, one_of
from ssm_conda.paths import REPO_ROOT
from ssm_conda.upload.s3 import S3Target
from ssm_conda.upload.targets import AnacondaTarget, ArtifactoryTarget, PrefixTarget, QuetzTarget, Target

TARGET_CLASSES: dict[str, type[Target]] = {
    cls.name: cls for cls in (PrefixTarget, AnacondaTarget, QuetzTarget, ArtifactoryTarget, S3Target)
}
TARGETS = tuple(TARGET_CLASSES)
DEFAULT_OUTPUT = REPO_ROOT / "output"
SECRET_LIKE_RE = re.compile(r"key|token|secret|pass|auth|cred", re.I)
OPTION_VALUE_RE = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)=\S+")
NEGATIVE_NUMBER_RE = re.compile(r"-\d")


def unrecognised(extras: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """Names the first unknown option, never a value."""
    options = [word.split("=", 1)[0] for word in extras if word.startswith("-")]
    if not options:
        return f"{len(extras)} unexpected argument(s) (not shown: they may hold a secret)"
    if SECRET_LIKE_RE.search(options[0]):
        return (f"{options[0]} is not accepted (value not shown): credentials come from the environment or "
                "rattler-build's auth storage (`rattler-build auth login`), never from options")
    accepted = [s for action in parser._actions for s in action.option_strings if s.startswith("--")]
    return f"unknown option {options[0]} (value not shown); accepted: {', '.join(accepted)}"


class NoEchoParser(ArgumentParser):
    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            raise UsageError(f"{self.prog}: {unrecognised(extras, self)}")
        return namespace, extras

    def error(self, message: str) -> None:  # type: ignore[override]
        scrubbed = OPTION_VALUE_RE.sub(r"\1=(value not shown)", message)  # "ambiguous option: --ch=VALUE ..."
        raise UsageError(f"{self.prog}: {scrubbed}")


class UploadParser(NoEchoParser):
    """`ssm-conda upload` itself: a missing or unknown target is one line naming the targets."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            raise one_of("target", value, TARGETS)
        super()._check_value(action, value)

    def _known_option(self, word: str) -> bool:
        name = word.split("=", 1)[0]
        longs = [o for o in self._option_string_actions if o.startswith("--")]
        return name in self._option_string_actions or sum(o.startswith(name) for o in longs) == 1

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:
        # An unknown option before the target name: the word after it would be taken for the
        # target and repeated in "unknown target", and it may be the value of `--api-kye SECRET`.
        for word in sys.argv[1:] if args is None else args:
            if word in TARGETS or word == "--":
                break
            if word.startswith("-") and not NEGATIVE_NUMBER_RE.match(word) and not self._known_option(word):
                raise UsageError(f"{self.prog}: {unrecognised([word], self)}")
        namespace, extras = super().parse_known_args(args, namespace)
        if getattr(namespace, "target", None) is None:
            raise UsageError(f"name a target; accepted: {', '.join(TARGETS)}")
        return namespace, extras


def add_global_options(parser: argparse.ArgumentParser, default: Any = None) -> None:
    """Options every target takes. On a target's parser `default` is SUPPRESS, so a value given
    before the target name is not reset by the target's defaults."""

    def given(value: Any) -> Any:
        return value if default is None else default

    add = parser.add_argument
    add("--output-dir", default=given(str(DEFAULT_OUTPUT)), help="local channel to upload from (default: output/)")
    add("--cuda", default=given(None), help="only packages for this CUDA version (a file in variants/, e.g. 13.0)")
    add("--python", default=given(None), help="only packages for this Python X.Y")
    add("--torch", default=given(None), help="only packages for this pytorch minor X.Y")
    add("--dry-run", action="store_true", default=given(False), help="list what would go where; send nothing")
    add("--skip-existing", action="store_true", default=given(False),
        help="skip packages the channel already has (idempotent re-runs)")
    add("--verify-timeout", type=float, default=given(180.0),
        help="seconds to wait for uploaded packages to appear in the channel's repodata (default 180)")
    add("--no-verify", action="store_true", default=given(False), help="do not wait for the repodata to list the uploads")


def configure(parser: argparse.ArgumentParser) -> None:
    # cli's parser repeats unrecognised words in its error, and a mistyped `--api-kye=SECRET`
    # carries a secret: the upload parser reports them itself, without values.
    parser.__class__ = UploadParser
    add_global_options(parser)
    sub = parser.add_subparsers(dest="target", metavar="TARGET", parser_class=NoEchoParser)
    for name, cls in TARGET_CLASSES.items():
        child = sub.add_parser(name, help=cls.help)
        cls.add_options(child)
        add_global_options(child, argparse.SUPPRESS)
        child.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                           help="more output (the auth-storage keys tried, each repodata poll)")
