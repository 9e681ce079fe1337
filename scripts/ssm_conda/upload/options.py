"""The command line of `ssm-conda upload`: common options before or after the target name, and
errors that never repeat what was typed with an unknown option (it may be a secret)."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import re
import sys
from collections.abc import Sequence
from typing import Any

from ssm_conda.console import ArgumentParser, UsageError
from ssm_conda.selection import add_selector_arguments
from ssm_conda.upload.s3 import S3Target
from ssm_conda.upload.targets import AnacondaTarget, ArtifactoryTarget, PrefixTarget, QuetzTarget, Target

TARGET_CLASSES: dict[str, type[Target]] = {
    cls.name: cls for cls in (PrefixTarget, AnacondaTarget, QuetzTarget, ArtifactoryTarget, S3Target)
}
TARGETS = tuple(TARGET_CLASSES)
SECRET_LIKE_RE = re.compile(r"key|token|secret|pass|auth|cred", re.I)
OPTION_VALUE_RE = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)=\S+")


def unrecognised(words: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """Names the first unknown option, never a value."""
    options = [word.split("=", 1)[0] for word in words if word.startswith("-")]
    if not options:
        return f"{len(words)} unexpected argument(s) (not shown: they may hold a secret)"
    if SECRET_LIKE_RE.search(options[0]):
        return (f"{options[0]} is not accepted (value not shown): credentials come from the environment or "
                "rattler-build's auth storage (`rattler-build auth login`), never from options")
    accepted = [o for o in parser._option_string_actions if o.startswith("--")]
    return f"unknown option {options[0]} (value not shown); accepted: {', '.join(accepted)}"


class UploadParser(ArgumentParser):
    """Never repeats what was typed with an unknown option: a mistyped `--api-kye SECRET` may carry a secret."""

    def knows(self, word: str) -> bool:
        name = word.split("=", 1)[0]
        longs = [o for o in self._option_string_actions if o.startswith("--")]
        return name in self._option_string_actions or sum(o.startswith(name) for o in longs) == 1  # an abbreviation

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:
        words = list(sys.argv[1:] if args is None else args)
        # Checked first up to the target name: argparse would take the word after an unknown option for the target.
        ahead = itertools.takewhile(lambda word: word not in ("--", *TARGETS), words)
        unknown = [w for w in ahead if w.startswith("-") and not w[1:2].isdigit() and not self.knows(w)]  # -1 is a value
        if not unknown:
            namespace, unknown = super().parse_known_args(words, namespace)
        if unknown:
            raise UsageError(f"{self.prog}: {unrecognised(unknown, self)}")
        if getattr(namespace, "target", "") is None:
            raise UsageError(f"name a target; accepted: {', '.join(TARGETS)}")
        return namespace, unknown

    def error(self, message: str) -> None:  # type: ignore[override]
        scrubbed = OPTION_VALUE_RE.sub(r"\1=(value not shown)", message)  # "ambiguous option: --ch=VALUE could match"
        raise UsageError(f"{self.prog}: {scrubbed}")


def seconds(value: str) -> float:
    """The type of --verify-timeout: nan or inf would poll the server without end, a negative number not at all."""
    with contextlib.suppress(ValueError):
        if 0 <= (number := float(value)) < math.inf:
            return number
    raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds >= 0")


def add_common_options(parser: argparse.ArgumentParser, on_target: bool = False) -> None:
    """Options every target takes, before or after its name. On a target's parser every default is
    SUPPRESS, so a value given before the target name is not reset by the target's defaults."""

    def add(*flags: str, default: Any, **kwargs: Any) -> None:
        parser.add_argument(*flags, default=argparse.SUPPRESS if on_target else default, **kwargs)

    add("--output-dir", default=None, help="local channel to upload from (default: the workspace's output/)")
    add_selector_arguments(parser, "upload only this package (repeatable; default: every one)", suppress=on_target)
    add("--dry-run", action="store_true", default=False, help="list what would go where; send nothing")
    add("--skip-existing", action="store_true", default=False,
        help="skip packages the channel already serves with the same sha256 (idempotent re-runs); another sha256 fails")
    add("--verify-timeout", type=seconds, default=180.0,
        help="seconds to wait for uploaded packages to appear in the channel's repodata (default 180)")
    add("--no-verify", action="store_true", default=False, help="do not wait for the repodata to list the uploads")
    if on_target:  # cli gives `ssm-conda upload` its -v
        add("-v", "--verbose", action="store_true", default=False, help="more output (each repodata poll)")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.__class__ = UploadParser  # cli's parser would repeat the words it does not know in its error
    add_common_options(parser)
    sub = parser.add_subparsers(dest="target", metavar="TARGET")  # the targets' parsers are UploadParsers too
    for name, cls in TARGET_CLASSES.items():
        child = sub.add_parser(name, help=cls.help)
        cls.add_options(child)
        add_common_options(child, on_target=True)
