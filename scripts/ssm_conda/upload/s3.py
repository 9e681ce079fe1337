"""An S3 bucket as a channel: boto3 puts the files, py-rattler indexes the channel afterwards.

py-rattler-build has no S3 upload; `rattler-build upload s3` would not index either.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ssm_conda.console import PipelineError, UsageError
from ssm_conda.upload.archives import LocalPackage
from ssm_conda.upload.credentials import Credential, credential_from_entry, one_line, register_secret
from ssm_conda.upload.served import HTTP_TIMEOUT_S, repodata_filenames
from ssm_conda.upload.targets import Target

MISSING_CODES = ("NoSuchKey", "404", "NotFound")
REFUSED_CODES = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403")


@dataclass(frozen=True)
class Bucket:
    """Where the channel lives: s3://NAME/PREFIX at an endpoint."""

    name: str
    prefix: str
    region: str
    endpoint: str
    custom_endpoint: bool
    path_style: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace, env: dict[str, str]) -> Bucket:
        parsed = urlparse(args.channel)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise UsageError(f"--channel for s3 must look like s3://BUCKET/PATH, got {args.channel!r}")
        region = args.region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if not region:
            raise UsageError("s3 needs --region (or AWS_REGION in the environment)")
        endpoint = args.endpoint_url or f"https://s3.{region}.amazonaws.com"
        return cls(parsed.netloc, parsed.path.strip("/"), region, endpoint, bool(args.endpoint_url),
                   args.addressing_style == "path")

    @property
    def url(self) -> str:
        return f"s3://{self.name}/{self.prefix}".rstrip("/")

    def key(self, subdir: str, filename: str) -> str:
        return "/".join(p for p in (self.prefix, subdir, filename) if p)


def s3_error(exc: Exception, doing: str, bucket: Bucket, missing_hint: str) -> PipelineError:
    """A botocore failure as one line."""
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

    if isinstance(exc, EndpointConnectionError):
        return PipelineError(f"cannot reach S3 at {bucket.endpoint}: {one_line(exc)}")
    if isinstance(exc, NoCredentialsError):
        return PipelineError(missing_hint)
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in REFUSED_CODES or status == 403:
            return PipelineError(f"S3 rejected the credentials ({code or status}) while {doing}")
        if code in ("NoSuchBucket", "404") and "bucket" in doing:
            return PipelineError(f"S3 bucket {bucket.name!r} does not exist at {bucket.endpoint}")
        return PipelineError(f"S3 error {code or status} while {doing}: {one_line(exc)}")
    return PipelineError(f"S3 failed while {doing}: {one_line(exc)}")


def make_client(bucket: Bucket, credential: Credential) -> Any:
    try:
        import boto3
        from botocore.config import Config
    except ImportError as exc:
        raise PipelineError("the s3 target needs boto3: pip install boto3") from exc
    return boto3.client(
        "s3",
        endpoint_url=bucket.endpoint,
        region_name=bucket.region,
        aws_access_key_id=credential.access_key_id,
        aws_secret_access_key=credential.secret_access_key,
        aws_session_token=credential.session_token,
        config=Config(s3={"addressing_style": "path" if bucket.path_style else "virtual"},
                      retries={"max_attempts": 2}, connect_timeout=10, read_timeout=HTTP_TIMEOUT_S),
    )


def index_bucket(bucket: Bucket, credential: Credential, subdirs: set[str]) -> None:
    from rattler import Subdir
    from rattler.index import S3Credentials, index_s3

    credentials = S3Credentials(
        endpoint_url=bucket.endpoint,
        region=bucket.region,
        access_key_id=credential.access_key_id,
        secret_access_key=credential.secret_access_key,
        session_token=credential.session_token,
        addressing_style="path" if bucket.path_style else "virtual-host",
    )
    # conda needs noarch/repodata.json even when every package is linux-64; index_s3 always does noarch.
    for subdir in sorted(subdirs - {"noarch"}) or ["noarch"]:
        try:
            asyncio.run(index_s3(bucket.url, credentials=credentials, target_platform=Subdir(subdir)))
        except Exception as exc:
            raise PipelineError(f"indexing {bucket.url} ({subdir}) failed: {one_line(exc)}") from exc


class S3Target(Target):
    name = "s3"
    help = "an S3 bucket (indexed after the upload)"
    label = "S3"
    env_var = "AWS_ACCESS_KEY_ID"
    auth_kinds = ("S3Credentials",)

    def __init__(self, args: argparse.Namespace, env: dict[str, str]):
        super().__init__(args, env)
        self.bucket = Bucket.from_args(args, env)
        self._client: Any = None

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--channel", required=True, help="s3://BUCKET/PATH")
        parser.add_argument("--endpoint-url", help="S3 endpoint (default: AWS for --region)")
        parser.add_argument("--region", help="bucket region (default: $AWS_REGION)")
        parser.add_argument("--addressing-style", choices=["virtual-host", "path"], default="virtual-host",
                            help="path for MinIO, moto and most S3 look-alikes")

    def server_url(self) -> str:
        return self.bucket.url

    def channel_display(self) -> str:
        return self.bucket.url + (f" (endpoint {self.bucket.endpoint})" if self.bucket.custom_endpoint else "")

    def destination(self, pkg: LocalPackage) -> str:
        return f"s3://{self.bucket.name}/{self.bucket.key(pkg.subdir, pkg.filename)}"

    def repodata_url(self, subdir: str) -> str:
        return f"s3://{self.bucket.name}/{self.bucket.key(subdir, 'repodata.json')}"

    # ---- credentials: boto3 needs the keys themselves, so only what we can read counts
    def find_credential(self) -> Credential | None:
        key_id, secret = self.env.get("AWS_ACCESS_KEY_ID"), self.env.get("AWS_SECRET_ACCESS_KEY")
        if key_id and secret:
            return Credential("$AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY", passed=True,
                              access_key_id=register_secret(key_id), secret_access_key=register_secret(secret),
                              session_token=register_secret(self.env.get("AWS_SESSION_TOKEN")))
        found = self.auth_file.find(self.bucket.url)
        return credential_from_entry(*found, self.auth_kinds, self.auth_file.path) if found else None

    def missing_credential_hint(self) -> str:
        return (f"no credentials for s3://{self.bucket.name}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                f"or add an S3Credentials entry for s3://{self.bucket.name} to $RATTLER_AUTH_FILE")

    def explain_refusal(self, message: str, unclear_may_be_auth: bool = True) -> str:
        return message

    # ---- the bucket
    def client(self) -> Any:
        if self._client is None:
            assert self.credential
            self._client = make_client(self.bucket, self.credential)
        return self._client

    def _call(self, doing: str, method: str, **kwargs: Any) -> Any:
        try:
            return getattr(self.client(), method)(Bucket=self.bucket.name, **kwargs)
        except Exception as exc:
            if _error_code(exc) in MISSING_CODES and method in ("get_object", "head_object"):
                raise FileNotFoundError(doing) from exc
            raise s3_error(exc, doing, self.bucket, self.missing_credential_hint()) from exc

    def check_credential(self) -> None:
        self._call(f"checking the bucket {self.bucket.name}", "head_bucket")

    def served(self, subdir: str) -> dict[str, str]:
        try:
            response = self._call(f"reading {self.repodata_url(subdir)}", "get_object",
                                  Key=self.bucket.key(subdir, "repodata.json"))
        except FileNotFoundError:
            return {}
        return repodata_filenames(json.loads(response["Body"].read()))

    def exists(self, pkg: LocalPackage) -> bool:
        try:
            self._call(f"looking for {pkg.filename}", "head_object", Key=self.bucket.key(pkg.subdir, pkg.filename))
        except FileNotFoundError:
            return False
        return True

    def already_present(self, packages: Sequence[LocalPackage]) -> dict[str, str]:
        """What the repodata lists, and files put but not indexed yet (an interrupted run)."""
        present = super().already_present(packages)
        return present | {p.filename: "" for p in packages if p.filename not in present and self.exists(p)}

    def upload(self, pkg: LocalPackage) -> None:
        with Path(pkg.path).open("rb") as body:
            self._call(f"uploading {pkg.filename}", "put_object", Key=self.bucket.key(pkg.subdir, pkg.filename),
                       Body=body, ContentType="application/octet-stream")

    def after_upload(self, subdirs: set[str]) -> None:
        assert self.credential
        index_bucket(self.bucket, self.credential, subdirs)


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""
