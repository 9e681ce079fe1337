"""An S3 bucket as a channel: boto3 puts the files (py-rattler-build has no S3 upload), py-rattler indexes
the channel afterwards, both with the keys of the AWS credential chain as boto3 resolves it.
"""

from __future__ import annotations

import asyncio
import functools
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
from ssm_conda.upload.archives import LocalPackage, repodata_filenames
from ssm_conda.upload.targets import HTTP_TIMEOUT_S, Target, http_url, mask, one_line, option, register_secret


class S3Target(Target, name="s3", server="S3", env_var="AWS_ACCESS_KEY_ID", login_flag="",
               help="an S3 bucket, indexed after the upload: the AWS credential chain (AWS_ACCESS_KEY_ID + "
                    "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ...)"):
    to: str = option("the bucket and path to upload to", metavar="s3://BUCKET/PATH")
    endpoint_url: str | None = option("S3 endpoint (default: AWS for --region)", None, type=http_url)
    region: str | None = option("bucket region (default: $AWS_REGION)", None, env=("AWS_REGION", "AWS_DEFAULT_REGION"))
    addressing_style: str = option("path for MinIO, moto and most S3 look-alikes", "virtual-host",
                                   choices=["virtual-host", "path"])

    def __post_init__(self) -> None:
        if urlparse(self.to).scheme != "s3" or not self.bucket:
            raise UsageError(f"--to for s3 must look like s3://BUCKET/PATH, got {self.to!r}")
        if not self.region:
            raise UsageError("s3 needs --region (or AWS_REGION in the environment)")

    @property
    def bucket(self) -> str:
        return urlparse(self.to).netloc

    @property
    def endpoint(self) -> str:
        return self.endpoint_url or f"https://s3.{self.region}.amazonaws.com"

    def channel(self) -> str:
        return f"s3://{self.bucket}/{self.object_key()}".rstrip("/")

    def channel_display(self) -> str:
        return mask(self.channel() + (f" (endpoint {self.endpoint})" if self.endpoint_url else ""))

    def object_key(self, *parts: str) -> str:
        """The key of PATH/PARTS in the bucket (PATH alone without parts)."""
        return "/".join(p for p in (urlparse(self.to).path.strip("/"), *parts) if p)

    def find_credential(self) -> str | None:
        found = boto3.Session().get_credentials()
        if found is None:
            return None
        keys = found.get_frozen_credentials()
        for secret in (keys.access_key, keys.secret_key, keys.token):
            register_secret(secret)
        return f"the AWS credential chain ({found.method})"

    def missing_credential_hint(self) -> str:
        return (f"no credentials for s3://{self.bucket}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                "AWS_PROFILE (the AWS credential chain, as boto3 reads it)")

    # ---- the bucket
    @functools.cached_property
    def client(self) -> Any:
        config = Config(s3={"addressing_style": "path" if self.addressing_style == "path" else "virtual"},
                        retries={"max_attempts": 2}, connect_timeout=10, read_timeout=HTTP_TIMEOUT_S)
        return boto3.client("s3", endpoint_url=self.endpoint, region_name=self.region, config=config)  # the same chain

    def _call(self, doing: str, method: str, missing_ok: bool = False, **kwargs: Any) -> Any:
        """A boto3 client method on the bucket, its failure as one line; None where `missing_ok` and the key is absent."""
        try:
            return getattr(self.client, method)(Bucket=self.bucket, **kwargs)
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
        key = self.object_key(subdir, "repodata.json")
        response = self._call(f"reading {self.repodata_url(subdir)}", "get_object", True, Key=key)
        return repodata_filenames(json.loads(response["Body"].read())) if response else {}

    def upload(self, pkg: LocalPackage) -> None:
        with Path(pkg.path).open("rb") as body:
            self._call(f"uploading {pkg.filename}", "put_object", Key=self.object_key(pkg.subdir, pkg.filename),
                       Body=body, ContentType="application/octet-stream")

    def after_upload(self, subdirs: set[str]) -> None:
        keys = boto3.Session().get_credentials().get_frozen_credentials()
        credentials = S3Credentials(endpoint_url=self.endpoint, region=self.region, access_key_id=keys.access_key,
                                    secret_access_key=keys.secret_key, session_token=keys.token,
                                    addressing_style=self.addressing_style)
        # conda needs noarch/repodata.json even when every package is linux-64; index_s3 always does noarch.
        for subdir in sorted(subdirs - {"noarch"}) or ["noarch"]:
            try:
                asyncio.run(index_s3(self.channel(), credentials=credentials, target_platform=Subdir(subdir)))
            except Exception as exc:
                raise PipelineError(f"indexing {self.channel()} ({subdir}) failed: {one_line(exc)}") from exc

