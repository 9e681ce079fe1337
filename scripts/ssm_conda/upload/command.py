"""Upload the packages of a local channel (default: the workspace's output/) to a conda server, named by
--to on every target; the common options (--output-dir, the selectors, --dry-run, --skip-existing, -v,
--verify-timeout, --no-verify) go before or after TARGET. Every package is checked before anything is sent,
uploaded with py-rattler-build (S3: boto3, then indexed with py-rattler), and looked up in the channel's
repodata until it is served. Credentials never come from options: a key in the environment, else rattler's
auth storage (`rattler-build auth login`, `pixi auth login`), as each TARGET below says.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

import rattler_build

from ssm_conda.console import ArgumentParser, Outcome, PipelineError, UsageError, human_size, print_summary, print_table
from ssm_conda.options import add_output_dir, add_variants_dir, output_folder
from ssm_conda.selection import Selection, add_selector_arguments, selection_from_args
from ssm_conda.upload.archives import LocalPackage, check_all, select_packages
from ssm_conda.upload.targets import AnacondaTarget, ArtifactoryTarget, PrefixTarget, QuetzTarget, S3Target, Target, one_line

Outcomes = dict[str, Outcome]  # filename -> its row in the summary
# ---- the command line, resolved once with the environment; its errors never repeat a typed value (it may be a secret)
TARGET_CLASSES = {c.name: c for c in (PrefixTarget, AnacondaTarget, QuetzTarget, ArtifactoryTarget, S3Target)}
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
        found = next((env[name] for name in f.metadata.get("env", ()) if env.get(name)), None)
        if (value := getattr(args, f.name, found)) is not None:
            values[f.name] = value
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
        ahead = itertools.takewhile(lambda word: word not in ("--", *TARGET_CLASSES), words)
        unknown = [w for w in ahead if w.startswith("-") and not w[1:2].isdigit()  # -1 is a value
                   and option_name(w) not in self._option_string_actions]
        if not unknown:
            namespace, unknown = super().parse_known_args(words, namespace)
        if unknown:
            raise UsageError(f"{self.prog}: {unrecognised(unknown, self)}")
        if getattr(namespace, "target", "") is None:
            raise UsageError(f"name a target; accepted: {', '.join(TARGET_CLASSES)}")
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
    parser.add_argument("--verify-timeout", type=seconds,
                        help="seconds to wait for uploaded packages to appear in the channel's repodata (default 180)")
    parser.add_argument("--no-verify", action="store_true", help="do not wait for the repodata to list the uploads")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.__class__ = UploadParser  # cli's parser would repeat the words it does not know in its error
    parser.allow_abbrev = False
    add_common_options(parser)
    parser.set_defaults(verify_timeout=180.0)
    sub = parser.add_subparsers(dest="target", metavar="TARGET")  # the targets' parsers are UploadParsers too
    for name, cls in TARGET_CLASSES.items():
        # SUPPRESS: a value given before the target name is not reset by a default (resolve takes an absent field's)
        child = sub.add_parser(name, help=cls.help, description=cls.help, allow_abbrev=False, argument_default=argparse.SUPPRESS)
        for f in fields(cls):
            if "cli" in f.metadata:
                child.add_argument(f"--{f.name.replace('_', '-')}", required=f.default is MISSING, **f.metadata["cli"])
        add_common_options(child)  # and what cli gives `ssm-conda upload`:
        child.add_argument("-v", "--verbose", action="store_true", help="more output (each repodata poll)")
        child.add_argument("--workspace", type=Path, metavar="DIR", help="the checkout holding recipe/ and variants/")


def run(args: argparse.Namespace) -> int:
    options = resolve(args, os.environ)
    target, output_dir = options.target, options.output_dir
    packages = select_packages(output_dir, options.selection, options.variants_dir)
    invalid = check_all(packages, output_dir)  # all or nothing, before any server is contacted
    outcomes = {p.filename: Outcome(p.filename, p.variant, "invalid" if p.problem else "pending", size=p.size,
                                    detail=p.problem or "") for p in packages}
    if invalid:
        more = f" (and {len(invalid) - 1} more invalid)" if len(invalid) > 1 else ""
        failure = f"{invalid[0].path.relative_to(output_dir)}: {invalid[0].problem}{more}; nothing was uploaded"
    else:
        credential = target.find_credential()
        if options.dry_run:  # what would go where; contacts no server
            print(f"dry run: {len(packages)} package(s) from {output_dir} to {target.name} {target.channel_display()}")
            print(f"credentials: {credential or f'none found ({target.missing_credential_hint()})'}")
            print_table(["package", "size", "destination"],
                        [(p.filename, human_size(p.size), target.destination(p)) for p in packages])
            return 0
        if credential is None:
            raise PipelineError(target.missing_credential_hint())
        print(f"uploading {len(packages)} package(s) to {target.name} {target.channel_display()} with {credential}", flush=True)
        try:
            target.check_credential()
        except PipelineError as exc:
            raise PipelineError(target.explain_refusal(str(exc), unclear_may_be_auth=False)) from exc
        failure = publish(target, options, packages, outcomes)
    for outcome in outcomes.values():  # the summary; what was never reached: not attempted
        if outcome.result == "pending":
            outcome.result = "not attempted"
    print_summary(list(outcomes.values()))
    if failure:  # the one way a run that examined its packages fails: after the summary
        raise PipelineError(failure)
    uploaded, skipped = (sum(o.result == r for o in outcomes.values()) for r in ("uploaded", "skipped"))
    print(f"done: {uploaded} uploaded, {skipped} skipped, to {target.channel_display()}")
    return 0


def publish(target: Target, options: UploadOptions, packages: list[LocalPackage], outcomes: Outcomes) -> str | None:
    """Upload what the channel lacks and wait until it is served; the first failure as one line, or None."""
    if refused := check_existing(target, packages, outcomes, options.skip_existing):
        return refused
    failure = upload_all(target, packages, outcomes)
    failure = make_served(target, options, packages, outcomes) or failure
    uploaded = sum(o.result == "uploaded" for o in outcomes.values())
    return failure and f"{failure} ({uploaded} of {len(outcomes)} uploaded)"


def check_existing(target: Target, packages: list[LocalPackage], outcomes: Outcomes, skip: bool) -> str | None:
    """Packages the channel already has stop the run (returned as one line), unless --skip-existing is given and the
    served file is this one (same sha256): the same name for a changed build must not go unpublished."""
    present = {name: sha256 for subdir in sorted({p.subdir for p in packages}) for name, sha256 in target.served(subdir).items()}
    existing = [p for p in packages if p.filename in present]
    differ = [p for p in existing if present[p.filename] != p.sha256]
    for pkg in existing:
        outcome = outcomes[pkg.filename]
        outcome.result = "skipped" if skip and pkg not in differ else "exists"
        outcome.detail = "already in the channel" + (" with another sha256" if pkg in differ else "")
    if skip and differ:
        pkg, served = differ[0], present[differ[0].filename][:12] or "none listed"
        return (f"{pkg.filename} is already in {target.channel_display()} with another sha256 ({served}, this "
                f"file's {pkg.sha256[:12]}): bump build.number in recipe/{pkg.name_and_build[0]}/recipe.yaml "
                "and rebuild, a changed build needs a new file name; nothing was uploaded")
    if existing and not skip:
        more = ", ..." if len(existing) > 1 else ""
        return (f"{len(existing)} package(s) already in {target.channel_display()} ({existing[0].filename}{more}); "
                "pass --skip-existing to skip them; nothing was uploaded")
    return None


def upload_all(target: Target, packages: list[LocalPackage], outcomes: Outcomes) -> str | None:
    """Upload in order, stopping at the first failure; returns it as one line."""
    for pkg in [p for p in packages if outcomes[p.filename].result == "pending"]:
        outcome = outcomes[pkg.filename]
        print(f"uploading {pkg.filename} ({human_size(pkg.size)})", flush=True)
        start = time.monotonic()
        try:
            target.upload(pkg)
        except (PipelineError, rattler_build.RattlerBuildError) as exc:
            outcome.result, outcome.detail = "failed", target.explain_refusal(one_line(exc, 200))
            return f"{pkg.filename}: {outcome.detail}"
        finally:
            outcome.seconds = time.monotonic() - start
        outcome.result = "uploaded"
    return None


def make_served(target: Target, options: UploadOptions, packages: list[LocalPackage], outcomes: Outcomes) -> str | None:
    """Index where needed (after a skip too: an interrupted run may not have), then wait for the uploads; the first failure."""
    uploaded = [p for p in packages if outcomes[p.filename].result == "uploaded"]
    if any(o.result in ("uploaded", "skipped") for o in outcomes.values()):
        try:
            target.after_upload({p.subdir for p in packages})
        except PipelineError as exc:
            return one_line(exc)
    if not uploaded or options.verify_timeout is None:
        return None
    problems = wait_until_served(target, uploaded, options.verify_timeout, options.verbose)
    for pkg in uploaded:
        outcome = outcomes[pkg.filename]
        outcome.detail = problems.get(pkg.filename, "listed in the channel's repodata")
        if pkg.filename in problems:
            outcome.result = "not served"
    return next((f"{name}: uploaded but {why}" for name, why in problems.items()), None)


def wait_until_served(target: Target, packages: list[LocalPackage], timeout_s: float, verbose: bool) -> dict[str, str]:
    """Poll the repodata until it lists every package, within `timeout_s`; returns filename -> problem."""
    deadline, delay = time.monotonic() + timeout_s, 0.5
    pending = list(packages)
    problems: dict[str, str] = {}
    while True:
        for subdir in sorted({p.subdir for p in pending}):
            listed = target.served(subdir)
            for pkg in [p for p in pending if p.subdir == subdir and p.filename in listed]:
                if listed[pkg.filename] not in ("", pkg.sha256):
                    problems[pkg.filename] = "served with a different sha256"
                pending.remove(pkg)
        if not pending or time.monotonic() >= deadline:
            break
        if verbose:
            print(f"waiting for {len(pending)} package(s) to be listed in the channel's repodata")
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 5.0)
    return problems | {pkg.filename: f"not listed in {target.repodata_url(pkg.subdir)} after {timeout_s:.0f}s" for pkg in pending}
