"""The command line of `ssm-conda upload` (common options before or after the target name, each target's
own from its dataclass fields), resolved once with the environment into UploadOptions; its errors never
repeat what was typed with an unknown option (it may be a secret)."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

from ssm_conda.console import ArgumentParser, UsageError
from ssm_conda.matrix import Selection
from ssm_conda.options import add_output_dir, add_variants_dir, output_folder
from ssm_conda.selection import add_selector_arguments, selection_from_args
from ssm_conda.upload.targets import AnacondaTarget, ArtifactoryTarget, PrefixTarget, QuetzTarget, S3Target, Target

TARGET_CLASSES = {c.name: c for c in (PrefixTarget, AnacondaTarget, QuetzTarget, ArtifactoryTarget, S3Target)}
TARGETS = tuple(TARGET_CLASSES)
SECRET_LIKE_RE = re.compile(r"key|token|secret|pass|auth|cred", re.I)
OLD_DESTINATION = ("-c", "--channel")  # upload's destination before --to; everywhere else a channel to read from


@dataclass(frozen=True)
class UploadOptions:
    target: Target
    output_dir: Path
    variants_dir: Path | None  # None: the workspace's, read only where needed
    selection: Selection
    dry_run: bool
    skip_existing: bool
    verify_timeout: float | None  # seconds; None: --no-verify
    verbose: bool


def resolve(args: argparse.Namespace, env: Mapping[str, str]) -> UploadOptions:
    """The command line and the environment, read once: each target field from its option, else its variables."""
    cls = TARGET_CLASSES[args.target]
    values: dict[str, Any] = {"key": env.get(cls.env_var) or None}
    for f in fields(cls):
        given = getattr(args, f.name, None)
        found = next((env[name] for name in f.metadata.get("env", ()) if env.get(name)), None)
        if given is not None or found:
            values[f.name] = given if given is not None else found
    return UploadOptions(cls(**values), output_folder(args.output_dir), args.variants_dir, selection_from_args(args),
                         args.dry_run, args.skip_existing, None if args.no_verify else args.verify_timeout, args.verbose)


def option_name(word: str) -> str:
    return word.split("=", 1)[0] if word.startswith("--") else word[:2]  # -cVALUE is -c


def unrecognised(words: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """Names the first unknown option, never a value."""
    options = [option_name(word) for word in words if word.startswith("-")]
    if not options:
        return f"{len(words)} unexpected argument(s) (not shown: they may hold a secret)"
    if options[0] in OLD_DESTINATION:
        return (f"{options[0]} is not accepted (value not shown): upload's destination is --to (-c/--channel names "
                "a channel to read from, as on build)")
    if SECRET_LIKE_RE.search(options[0]):
        return (f"{options[0]} is not accepted (value not shown): credentials come from the environment or "
                "rattler-build's auth storage (`rattler-build auth login`), never from options")
    accepted = [o for o in parser._option_string_actions if o.startswith("--")]
    return f"unknown option {options[0]} (value not shown); accepted: {', '.join(accepted)}"


class UploadParser(ArgumentParser):
    """Never repeats what was typed with an unknown option: a mistyped `--api-kye SECRET` may carry a secret. Nor
    takes an abbreviation, which could hand a secret to an option that quotes a bad value (`--chan` for --channel-url)."""

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:
        words = list(sys.argv[1:] if args is None else args)
        # Checked first up to the target name: argparse would take the word after an unknown option for the target.
        ahead = itertools.takewhile(lambda word: word not in ("--", *TARGETS), words)
        unknown = [w for w in ahead if w.startswith("-") and not w[1:2].isdigit()  # -1 is a value
                   and option_name(w) not in self._option_string_actions]
        if not unknown:
            namespace, unknown = super().parse_known_args(words, namespace)
        if unknown:
            raise UsageError(f"{self.prog}: {unrecognised(unknown, self)}")
        if getattr(namespace, "target", "") is None:
            raise UsageError(f"name a target; accepted: {', '.join(TARGETS)}")
        return namespace, unknown


def seconds(value: str) -> float:
    """The type of --verify-timeout: nan or inf would poll the server without end, a negative number not at all."""
    with contextlib.suppress(ValueError):
        if 0 <= (number := float(value)) < math.inf:
            return number
    raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds >= 0")


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """The options of every target, before or after its name."""
    add_output_dir(parser, "to upload from")
    add_variants_dir(parser)
    add_selector_arguments(parser, "upload only this package (repeatable; default: every one)")
    parser.add_argument("--dry-run", action="store_true", help="list what would go where; send nothing")
    parser.add_argument("--skip-existing", action="store_true", help="skip packages the channel already serves with the "
                        "same sha256 (idempotent re-runs); another sha256 fails")
    parser.add_argument("--verify-timeout", type=seconds, default=180.0,
                        help="seconds to wait for uploaded packages to appear in the channel's repodata (default 180)")
    parser.add_argument("--no-verify", action="store_true", help="do not wait for the repodata to list the uploads")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.__class__ = UploadParser  # cli's parser would repeat the words it does not know in its error
    parser.allow_abbrev = False
    add_common_options(parser)
    sub = parser.add_subparsers(dest="target", metavar="TARGET")  # the targets' parsers are UploadParsers too
    for name, cls in TARGET_CLASSES.items():
        child = sub.add_parser(name, help=cls.help, description=cls.help, allow_abbrev=False)
        for f in fields(cls):
            if "cli" in f.metadata:
                child.add_argument(f"--{f.name.replace('_', '-')}", required=f.default is MISSING, **f.metadata["cli"])
        own = len(child._actions)
        add_common_options(child)  # and what cli gives `ssm-conda upload`:
        child.add_argument("-v", "--verbose", action="store_true", help="more output (each repodata poll)")
        child.add_argument("--workspace", type=Path, metavar="DIR", help="the checkout holding recipe/ and variants/")
        for action in child._actions[own:]:
            action.default = argparse.SUPPRESS  # a value given before the target name is not reset by a default
