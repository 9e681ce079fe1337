"""Upload the packages of a local channel (default: the workspace's output/) to a conda server, named by
--to on every target; the common options (--output-dir, the selectors, --dry-run, --skip-existing, -v,
--verify-timeout, --no-verify) go before or after TARGET. Every package is checked before anything is sent,
uploaded with py-rattler-build (S3: boto3, then indexed with py-rattler), and looked up in the channel's
repodata until it is served. Credentials never come from options: a key in the environment, else rattler's
auth storage (`rattler-build auth login`, `pixi auth login`), as each TARGET below says.
"""

from __future__ import annotations

import argparse
import os
import time

import rattler_build

from ssm_conda.console import Outcome, PipelineError, human_size, print_summary, print_table
from ssm_conda.upload.archives import LocalPackage, check_all, select_packages
from ssm_conda.upload.options import UploadOptions, resolve
from ssm_conda.upload.options import configure as configure  # the subcommand's parser
from ssm_conda.upload.targets import Target, one_line

Outcomes = dict[str, Outcome]  # filename -> its row in the summary


def run(args: argparse.Namespace) -> int:
    options = resolve(args, os.environ)
    target, output_dir = options.target, options.output_dir
    packages = select_packages(output_dir, options.selection, options.variants_dir)
    outcomes = {p.filename: Outcome(p.filename, p.variant, size=p.size) for p in packages}
    invalid = check_all(packages, output_dir)  # all or nothing, before any server is contacted
    for pkg in invalid:
        outcomes[pkg.filename].result, outcomes[pkg.filename].detail = "invalid", pkg.problem or ""
    if invalid:
        more = f" (and {len(invalid) - 1} more invalid)" if len(invalid) > 1 else ""
        report(outcomes, f"{invalid[0].path.relative_to(output_dir)}: {invalid[0].problem}{more}; nothing was uploaded")
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
    mark_existing(target, packages, outcomes, options.skip_existing)
    failure = upload_all(target, packages, outcomes)
    failure = make_served(target, options, packages, outcomes) or failure
    uploaded, skipped = (sum(o.result == r for o in outcomes.values()) for r in ("uploaded", "skipped"))
    report(outcomes, failure and f"{failure} ({uploaded} of {len(outcomes)} uploaded)")
    print(f"done: {uploaded} uploaded, {skipped} skipped, to {target.channel_display()}")
    return 0


def report(outcomes: Outcomes, failure: str | None) -> None:
    """The summary (what was never reached: not attempted), then the failure as the error, if any."""
    for outcome in outcomes.values():
        if outcome.result == "pending":
            outcome.result = "not attempted"
    print_summary(list(outcomes.values()))
    if failure:
        raise PipelineError(failure)


def mark_existing(target: Target, packages: list[LocalPackage], outcomes: Outcomes, skip: bool) -> None:
    """Packages the channel already has stop the run, unless --skip-existing is given and the served
    file is this one (same sha256): the same name for a changed build must not go unpublished."""
    present = {name: sha256 for subdir in sorted({p.subdir for p in packages}) for name, sha256 in target.served(subdir).items()}
    existing = [p for p in packages if p.filename in present]
    differ = [p for p in existing if present[p.filename] != p.sha256]
    for pkg in existing:
        outcome = outcomes[pkg.filename]
        outcome.result = "skipped" if skip and pkg not in differ else "exists"
        outcome.detail = "already in the channel" + (" with another sha256" if pkg in differ else "")
    if skip and differ:
        pkg, served = differ[0], present[differ[0].filename][:12] or "none listed"
        report(outcomes, f"{pkg.filename} is already in {target.channel_display()} with another sha256 ({served}, this "
                         f"file's {pkg.sha256[:12]}): bump build.number in recipe/{pkg.name_and_build[0]}/recipe.yaml "
                         "and rebuild, a changed build needs a new file name; nothing was uploaded")
    if existing and not skip:
        more = ", ..." if len(existing) > 1 else ""
        report(outcomes, f"{len(existing)} package(s) already in {target.channel_display()} ({existing[0].filename}{more}); "
                         "pass --skip-existing to skip them; nothing was uploaded")


def upload_all(target: Target, packages: list[LocalPackage], outcomes: Outcomes) -> str | None:
    """Upload in order, stopping at the first failure; returns it as one line."""
    for pkg in packages:
        outcome = outcomes[pkg.filename]
        if outcome.result != "pending":
            continue
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
    """Index where the target needs it (after a skip too: an interrupted run may not have), then poll the repodata
    until it lists the uploads; returns the first failure."""
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
        if pkg.filename in problems:
            outcome.result, outcome.detail = "not served", problems[pkg.filename]
        else:
            outcome.detail = "listed in the channel's repodata"
    return next((f"{name}: uploaded but {why}" for name, why in problems.items()), None)


def wait_until_served(target: Target, packages: list[LocalPackage], timeout_s: float, verbose: bool) -> dict[str, str]:
    """Poll the repodata until it lists every package, within `timeout_s`; returns filename -> problem."""
    deadline = time.monotonic() + timeout_s
    delay = 0.5
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
    for pkg in pending:
        problems[pkg.filename] = f"not listed in {target.repodata_url(pkg.subdir)} after {timeout_s:.0f}s"
    return problems
