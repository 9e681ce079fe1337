"""An S3 bucket as a channel: boto3 puts the files (py-rattler-build has no S3 upload), py-rattler indexes
the channel afterwards, both with the keys of the AWS credential chain as boto3 resolves it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError
from rattler import Subdir
from rattler.index import S3Credentials, index_s3

from ssm_conda.console import PipelineError, UsageError
from ssm_conda.upload.archives import LocalPackage
from ssm_conda.upload.credentials import Credential, mask, one_line, register_secret
from ssm_conda.upload.served import HTTP_TIMEOUT_S, repodata_filenames
from ssm_conda.upload.targets import Target, http_url


class S3Target(Target):
    name = "s3"
    help = "an S3 bucket (indexed after the upload)"
    label = "S3"
    env_var = "AWS_ACCESS_KEY_ID"

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
        self.keys: Any = None  # botocore's frozen credentials: access_key, secret_key, token

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--channel", required=True, help="s3://BUCKET/PATH")
        parser.add_argument("--endpoint-url", type=http_url, help="S3 endpoint (default: AWS for --region)")
        parser.add_argument("--region", help="bucket region (default: $AWS_REGION)")
        parser.add_argument("--addressing-style", choices=["virtual-host", "path"], default="virtual-host",
                            help="path for MinIO, moto and most S3 look-alikes")

    def channel_url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    def channel_display(self) -> str:
        return mask(self.channel_url() + (f" (endpoint {self.endpoint})" if self.args.endpoint_url else ""))

    def key(self, subdir: str, filename: str) -> str:
        return "/".join(p for p in (self.prefix, subdir, filename) if p)

    def find_credential(self) -> Credential | None:
        found = boto3.Session().get_credentials()
        if found is None:
            return None
        self.keys = found.get_frozen_credentials()
        for secret in (self.keys.access_key, self.keys.secret_key, self.keys.token):
            register_secret(secret)
        return Credential(f"the AWS credential chain ({found.method})")

    def missing_credential_hint(self) -> str:
        return (f"no credentials for s3://{self.bucket}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                "AWS_PROFILE (the AWS credential chain, as boto3 reads it)")

    def explain_refusal(self, message: str, unclear_may_be_auth: bool = True) -> str:
        return message

    # ---- the bucket
    def _call(self, doing: str, method: str, missing_ok: bool = False, **kwargs: Any) -> Any:
        """A boto3 client method on the bucket, its failure as one line; None where `missing_ok` and the key is absent."""
        if self._client is None:
            config = Config(s3={"addressing_style": "path" if self.path_style else "virtual"}, retries={"max_attempts": 2},
                            connect_timeout=10, read_timeout=HTTP_TIMEOUT_S)
            self._client = boto3.client("s3", endpoint_url=self.endpoint, region_name=self.region, config=config,
                                        aws_access_key_id=self.keys.access_key, aws_secret_access_key=self.keys.secret_key,
                                        aws_session_token=self.keys.token)
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
                raise PipelineError(f"S3 bucket {self.bucket!r} does not exist at {mask(self.endpoint)}") from exc
            raise PipelineError(f"S3 error {code or status} while {doing}: {one_line(exc)}") from exc
        except EndpointConnectionError as exc:
            raise PipelineError(f"cannot reach S3 at {mask(self.endpoint)}: {one_line(exc)}") from exc
        except BotoCoreError as exc:  # botocore's other errors (timeouts, ...)
            raise PipelineError(f"S3 failed while {doing}: {one_line(exc)}") from exc

    def check_credential(self) -> None:
        self._call(f"checking the bucket {self.bucket}", "head_bucket")

    def served(self, subdir: str) -> dict[str, str]:
        response = self._call(f"reading {self.repodata_url(subdir)}", "get_object", True, Key=self.key(subdir, "repodata.json"))
        return repodata_filenames(json.loads(response["Body"].read())) if response else {}

    def upload(self, pkg: LocalPackage) -> None:
        with Path(pkg.path).open("rb") as body:
            self._call(f"uploading {pkg.filename}", "put_object", Key=self.key(pkg.subdir, pkg.filename),
                       Body=body, ContentType="application/octet-stream")

    def after_upload(self, subdirs: set[str]) -> None:
        credentials = S3Credentials(endpoint_url=self.endpoint, region=self.region, access_key_id=self.keys.access_key,
                                    secret_access_key=self.keys.secret_key, session_token=self.keys.token,
                                    addressing_style="path" if self.path_style else "virtual-host")
        # conda needs noarch/repodata.json even when every package is linux-64; index_s3 always does noarch.
        for subdir in sorted(subdirs - {"noarch"}) or ["noarch"]:
            try:
                asyncio.run(index_s3(self.channel_url(), credentials=credentials, target_platform=Subdir(subdir)))
            except Exception as exc:
                raise PipelineError(f"indexing {self.channel_url()} ({subdir}) failed: {one_line(exc)}") from exc

