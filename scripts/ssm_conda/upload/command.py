"""Upload the packages of a local channel (default output/) to a conda server.

    ssm-conda upload TARGET [target options] [--cuda X.Y] [--python X.Y] [--torch X.Y]
                            [--output-dir DIR] [--dry-run] [--skip-existing]

The common options (--output-dir, the selectors, --dry-run, --skip-existing, -v, --verify-timeout,
--no-verify) go before or after TARGET. Targets: prefix (prefix.dev),
anaconda (anaconda.org), quetz, artifactory, s3. Every package is checked before anything is sent
(a file that is not a valid conda archive stops the run), then uploaded with py-rattler-build
(S3: boto3, then the channel is indexed with py-rattler), and finally looked up in the channel's
repodata until it is served.

Credentials never come from options. A key in the environment is used first; without one,
rattler-build looks in its auth storage ($RATTLER_AUTH_FILE, the keyring, ~/.rattler/credentials.json,
~/.netrc), where `rattler-build auth login` and `pixi auth login` put them:
  prefix       PREFIX_API_KEY, a BearerToken for the host, or trusted publishing in GitHub Actions
  anaconda     ANACONDA_API_KEY, or a CondaToken for the API host (api.anaconda.org)
  quetz        QUETZ_API_KEY, or a CondaToken for the server's host
  artifactory  ARTIFACTORY_TOKEN, or a BearerToken / BasicHTTP entry for the server's host
  s3           AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), or an S3Credentials
               entry for s3://BUCKET in $RATTLER_AUTH_FILE
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterable
from pathlib import Path

from ssm_conda.console import Outcome, PipelineError, human_size, print_summary, print_table
from ssm_conda.matrix import Selection
from ssm_conda.upload.archives import LocalPackage, check_all, invalid_message, select_packages
from ssm_conda.upload.credentials import Credential, lookup_keys, one_line
from ssm_conda.upload.options import TARGET_CLASSES
from ssm_conda.upload.options import configure as configure  # the subcommand's parser
from ssm_conda.upload.served import wait_until_served
from ssm_conda.upload.targets import Target

Outcomes = dict[str, Outcome]  # filename -> its row in the summary


def run(args: argparse.Namespace, env: dict[str, str] | None = None) -> int:
    target = TARGET_CLASSES[args.target](args, dict(os.environ if env is None else env))
    output_dir = Path(args.output_dir).resolve()
    packages = select_packages(output_dir, Selection(cuda=args.cuda, python=args.python, torch=args.torch))
    outcomes = {p.filename: Outcome(p.filename, p.variant, size=p.size) for p in packages}
    precheck(packages, output_dir, outcomes)
    credential = target.find_credential()
    if args.verbose:
        print(f"auth storage keys for {target.server_url()}: {', '.join(lookup_keys(target.server_url()))}")
    if args.dry_run:
        dry_run(target, packages, output_dir, credential)
        return 0
    use_credential(target, credential, len(packages))
    existing = mark_existing(target, packages, outcomes, args.skip_existing)
    failure = upload_all(target, packages, outcomes)
    failure = make_served(target, args, packages, outcomes, bool(existing)) or failure
    return finish(target, outcomes, failure)


def precheck(packages: list[LocalPackage], output_dir: Path, outcomes: Outcomes) -> None:
    """All or nothing: one invalid archive stops the run before anything is contacted."""
    invalid = check_all(packages, output_dir)
    if not invalid:
        return
    for pkg in packages:
        outcome = outcomes[pkg.filename]
        outcome.result, outcome.detail = ("invalid", pkg.problem) if pkg.problem else ("not attempted", "")
    print_summary(list(outcomes.values()))
    raise PipelineError(invalid_message(invalid, output_dir))


def dry_run(target: Target, packages: list[LocalPackage], output_dir: Path, credential: Credential | None) -> None:
    """What would go where; contacts no server."""
    print(f"dry run: {len(packages)} package(s) from {output_dir} to {target.name} {target.channel_display()}")
    print(f"credentials: {credential.describe() if credential else f'none found ({target.missing_credential_hint()})'}")
    print_table(["package", "size", "destination"], [(p.filename, human_size(p.size), target.destination(p)) for p in packages])


def use_credential(target: Target, credential: Credential | None, count: int) -> None:
    if credential is None:
        raise PipelineError(target.missing_credential_hint())
    target.credential = credential
    print(f"uploading {count} package(s) to {target.name} {target.channel_display()} with {credential.describe()}",
          flush=True)
    try:
        target.check_credential()
    except PipelineError as exc:
        raise PipelineError(target.explain_refusal(str(exc), unclear_may_be_auth=False)) from exc


def mark_existing(target: Target, packages: list[LocalPackage], outcomes: Outcomes, skip: bool) -> list[LocalPackage]:
    """Packages the channel already has: skipped with --skip-existing, otherwise the run stops here."""
    present = target.already_present(packages)
    existing = [p for p in packages if p.filename in present]
    for pkg in existing:
        same = not present[pkg.filename] or present[pkg.filename] == pkg.sha256
        outcome = outcomes[pkg.filename]
        outcome.result = "skipped" if skip else "exists"
        outcome.detail = "already in the channel" + ("" if same else " with a different sha256")
    if existing and not skip:
        mark_pending(outcomes.values(), "not attempted")
        print_summary(list(outcomes.values()))
        more = ", ..." if len(existing) > 1 else ""
        raise PipelineError(f"{len(existing)} package(s) already in {target.channel_display()} "
                            f"({existing[0].filename}{more}); pass --skip-existing to skip them; nothing was uploaded")
    return existing


def mark_pending(outcomes: Iterable[Outcome], result: str) -> None:
    for outcome in outcomes:
        if outcome.result == "pending":
            outcome.result = result


def upload_all(target: Target, packages: list[LocalPackage], outcomes: Outcomes) -> str | None:
    """Upload in order, stopping at the first failure; returns it as one line."""
    import rattler_build

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
            mark_pending(outcomes.values(), "not attempted")
            return f"{pkg.filename}: {outcome.detail}"
        finally:
            outcome.seconds = time.monotonic() - start
        outcome.result = "uploaded"
    return None


def make_served(target: Target, args: argparse.Namespace, packages: list[LocalPackage], outcomes: Outcomes,
                any_existing: bool) -> str | None:
    """Index where the target needs it, then poll the repodata until it lists the uploads."""
    uploaded = [p for p in packages if outcomes[p.filename].result == "uploaded"]
    if uploaded or any_existing:
        try:
            target.after_upload({p.subdir for p in packages})
        except PipelineError as exc:
            return one_line(exc)
    if not uploaded or args.no_verify:
        return None
    log = print if args.verbose else (lambda _: None)
    expected = {p.filename: (p.subdir, p.sha256) for p in uploaded}
    problems = wait_until_served(target, expected, args.verify_timeout, log=log)
    for pkg in uploaded:
        outcome = outcomes[pkg.filename]
        if pkg.filename in problems:
            outcome.result, outcome.detail = "not served", problems[pkg.filename]
        else:
            outcome.detail = "listed in the channel's repodata"
    return next((f"{name}: uploaded but {why}" for name, why in problems.items()), None)


def finish(target: Target, outcomes: Outcomes, failure: str | None) -> int:
    print_summary(list(outcomes.values()))
    counts = {r: sum(o.result == r for o in outcomes.values()) for r in ("uploaded", "skipped")}
    if failure:
        raise PipelineError(f"{failure} ({counts['uploaded']} of {len(outcomes)} uploaded)")
    print(f"done: {counts['uploaded']} uploaded, {counts['skipped']} skipped, to {target.channel_display()}")
    return 0
