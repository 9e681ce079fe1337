"""An S3 bucket as a channel: boto3 puts the files, py-rattler indexes the channel afterwards.

py-rattler-build has no S3 upload; `rattler-build upload s3` would not index either.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from rattler import Subdir
from rattler.index import S3Credentials, index_s3

from ssm_conda.console import PipelineError, UsageError
from ssm_conda.upload.archives import LocalPackage
from ssm_conda.upload.credentials import Credential, credential_from_entry, one_line, register_secret, stored_entry
from ssm_conda.upload.served import HTTP_TIMEOUT_S, repodata_filenames
from ssm_conda.upload.targets import Target


class S3Target(Target):
    name = "s3"
    help = "an S3 bucket (indexed after the upload)"
    label = "S3"
    env_var = "AWS_ACCESS_KEY_ID"
    auth_kinds = ("S3Credentials",)

    def __init__(self, args: argparse.Namespace, env: dict[str, str]):
        super().__init__(args, env)
        parsed = urlparse(args.channel)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise UsageError(f"--channel for s3 must look like s3://BUCKET/PATH, got {args.channel!r}")
        self.region = args.region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if not self.region:
            raise UsageError("s3 needs --region (or AWS_REGION in the environment)")
        self.bucket, self.prefix = parsed.netloc, parsed.path.strip("/")
        self.endpoint = args.endpoint_url or f"https://s3.{self.region}.amazonaws.com"
        self.path_style = args.addressing_style == "path"
        self._client: Any = None

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--channel", required=True, help="s3://BUCKET/PATH")
        parser.add_argument("--endpoint-url", help="S3 endpoint (default: AWS for --region)")
        parser.add_argument("--region", help="bucket region (default: $AWS_REGION)")
        parser.add_argument("--addressing-style", choices=["virtual-host", "path"], default="virtual-host",
                            help="path for MinIO, moto and most S3 look-alikes")

    def channel_url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    server_url = channel_url

    def channel_display(self) -> str:
        return self.channel_url() + (f" (endpoint {self.endpoint})" if self.args.endpoint_url else "")

    def key(self, subdir: str, filename: str) -> str:
        return "/".join(p for p in (self.prefix, subdir, filename) if p)

    # ---- credentials: boto3 needs the keys themselves, so only what we can read counts
    def find_credential(self) -> Credential | None:
        key_id, secret = self.env.get("AWS_ACCESS_KEY_ID"), self.env.get("AWS_SECRET_ACCESS_KEY")
        if key_id and secret:
            return Credential("$AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY", passed=True,
                              access_key_id=register_secret(key_id), secret_access_key=register_secret(secret),
                              session_token=register_secret(self.env.get("AWS_SESSION_TOKEN")))
        found = stored_entry(self.auth_entries, self.channel_url())
        return credential_from_entry(*found, self.auth_kinds, self.auth_file) if found else None

    def missing_credential_hint(self) -> str:
        return (f"no credentials for s3://{self.bucket}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                f"or add an S3Credentials entry for s3://{self.bucket} to $RATTLER_AUTH_FILE")

    def explain_refusal(self, message: str, unclear_may_be_auth: bool = True) -> str:
        return message

    # ---- the bucket
    def _call(self, doing: str, method: str, missing_ok: bool = False, **kwargs: Any) -> Any:
        """A boto3 client method on the bucket, its failure as one line; None where `missing_ok` and the key is absent."""
        try:
            import boto3
            from botocore.config import Config
            from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError
        except ImportError as exc:
            raise PipelineError("the s3 target needs boto3: pip install boto3") from exc
        if self._client is None:
            keys = self.credential
            assert keys
            config = Config(s3={"addressing_style": "path" if self.path_style else "virtual"}, retries={"max_attempts": 2},
                            connect_timeout=10, read_timeout=HTTP_TIMEOUT_S)
            self._client = boto3.client("s3", endpoint_url=self.endpoint, region_name=self.region, config=config,
                                        aws_access_key_id=keys.access_key_id, aws_secret_access_key=keys.secret_access_key,
                                        aws_session_token=keys.session_token)
        try:
            return getattr(self._client, method)(Bucket=self.bucket, **kwargs)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if missing_ok and code in ("NoSuchKey", "404", "NotFound"):
                return None
            if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied") or status == 403:
                raise PipelineError(f"S3 rejected the credentials ({code or status}) while {doing}") from exc
            if code in ("NoSuchBucket", "404") and method == "head_bucket":
                raise PipelineError(f"S3 bucket {self.bucket!r} does not exist at {self.endpoint}") from exc
            raise PipelineError(f"S3 error {code or status} while {doing}: {one_line(exc)}") from exc
        except EndpointConnectionError as exc:
            raise PipelineError(f"cannot reach S3 at {self.endpoint}: {one_line(exc)}") from exc
        except NoCredentialsError as exc:
            raise PipelineError(self.missing_credential_hint()) from exc
        except Exception as exc:  # botocore's other errors
            raise PipelineError(f"S3 failed while {doing}: {one_line(exc)}") from exc

    def check_credential(self) -> None:
        self._call(f"checking the bucket {self.bucket}", "head_bucket")

    def served(self, subdir: str) -> dict[str, str]:
        response = self._call(f"reading {self.repodata_url(subdir)}", "get_object", True, Key=self.key(subdir, "repodata.json"))
        return repodata_filenames(json.loads(response["Body"].read())) if response else {}

    def already_present(self, packages: Sequence[LocalPackage]) -> dict[str, str]:
        """What the repodata lists, and files put but not indexed yet (an interrupted run)."""
        present = super().already_present(packages)
        for pkg in packages:
            key = self.key(pkg.subdir, pkg.filename)
            if pkg.filename not in present and self._call(f"looking for {pkg.filename}", "head_object", True, Key=key):
                present[pkg.filename] = ""
        return present

    def upload(self, pkg: LocalPackage) -> None:
        with Path(pkg.path).open("rb") as body:
            self._call(f"uploading {pkg.filename}", "put_object", Key=self.key(pkg.subdir, pkg.filename),
                       Body=body, ContentType="application/octet-stream")

    def after_upload(self, subdirs: set[str]) -> None:
        assert self.credential
        credentials = S3Credentials(
            endpoint_url=self.endpoint, region=self.region, access_key_id=self.credential.access_key_id,
            secret_access_key=self.credential.secret_access_key, session_token=self.credential.session_token,
            addressing_style="path" if self.path_style else "virtual-host",
        )
        # conda needs noarch/repodata.json even when every package is linux-64; index_s3 always does noarch.
        for subdir in sorted(subdirs - {"noarch"}) or ["noarch"]:
            try:
                asyncio.run(index_s3(self.channel_url(), credentials=credentials, target_platform=Subdir(subdir)))
            except Exception as exc:
                raise PipelineError(f"indexing {self.channel_url()} ({subdir}) failed: {one_line(exc)}") from exc
