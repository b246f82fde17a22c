"""Object storage: a local directory (default) or S3 via boto3. Every method blocks: callers on the
event loop use ``asyncio.to_thread`` (docs/kafka-rules.md #6). Keys are ``/``-separated, built from
server-side ids only."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import BinaryIO, Protocol
from urllib.parse import quote, urlparse

from sinks.signing import content_disposition, sign_link


class ObjectStore(Protocol):
    """What the pipeline needs from object storage."""

    def put_file(self, key: str, path: Path) -> None:
        """Upload a local file (multipart when large)."""

    def put_bytes(self, key: str, data: bytes) -> None:
        """Store ``data`` at ``key`` (overwrites: idempotent)."""

    def get_bytes(self, key: str) -> bytes:
        """Read a whole (small) object. Raises ``KeyError`` when missing."""

    def exists(self, key: str) -> bool:
        """True when ``key`` exists."""

    def list(self, prefix: str) -> list[str]:
        """Keys under ``prefix``, sorted."""

    def delete_prefix(self, prefix: str) -> int:
        """Delete every key under ``prefix``; returns how many."""

    def link(self, key: str, file_name: str, ttl: int) -> str:
        """A signed download URL valid ``ttl`` seconds."""


class LocalStore:
    """Objects as files under ``root``; links point at the API's download route,
    signed with HMAC-SHA256 (``sinks.signing``)."""

    def __init__(self, root: Path, api_url: str, secret: str) -> None:
        self.root = root.resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.api_url = api_url.rstrip("/")
        self.secret = secret

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self.root not in path.parents:
            raise ValueError(f"object key escapes the store: {key!r}")
        return path

    def put_file(self, key: str, path: Path) -> None:
        self._put(key, lambda tmp: shutil.copyfile(path, tmp))

    def put_bytes(self, key: str, data: bytes) -> None:
        self._put(key, lambda tmp: tmp.write_bytes(data))

    def _put(self, key: str, write) -> None:
        """``write(tmp)`` then rename onto the key's path, retried (3 tries) when a concurrent
        ``delete_prefix`` removed its directory. Raises ``OSError``."""
        dest = self._path(key)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        for attempt in range(3):
            try:
                os.makedirs(dest.parent, exist_ok=True)
                write(tmp)
                os.replace(tmp, dest)
                return
            except (FileNotFoundError, FileExistsError):  # its directory came and went
                if attempt == 2:
                    raise

    def get_bytes(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise KeyError(key) from None

    def open(self, key: str) -> BinaryIO:
        """Open an object for streaming reads. Raises ``KeyError`` when missing."""
        try:
            return open(self._path(key), "rb")
        except FileNotFoundError:
            raise KeyError(key) from None

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list(self, prefix: str) -> list[str]:
        base = self._path(prefix.rstrip("/")) if prefix.strip("/") else self.root
        # os.walk skips a directory removed meanwhile (Path.rglob raised FileNotFoundError).
        return sorted(os.path.relpath(os.path.join(top, name), self.root)
                      for top, _dirs, names in os.walk(base) for name in names
                      if not name.startswith("."))

    def delete_prefix(self, prefix: str) -> int:
        """Safe while others delete or write the same keys."""
        keys = self.list(prefix)
        for key in keys:
            self._path(key).unlink(missing_ok=True)
        base = self._path(prefix.rstrip("/"))
        if base.is_dir():
            shutil.rmtree(base, ignore_errors=True)
        return len(keys)

    def link(self, key: str, file_name: str, ttl: int) -> str:
        expires = int(time.time()) + ttl
        sig = sign_link(self.secret, key, expires, file_name)
        return (f"{self.api_url}/download/{quote(key)}?expires={expires}"
                f"&name={quote(file_name)}&sig={sig}")


class S3Store:
    """Objects in an S3 bucket under ``prefix``. ``public_url``: the endpoint as downloaders reach
    it (compose: ``localhost:9000`` beside ``minio:9000``); links are signed for it, since SigV4
    signs the ``Host``."""

    #: S3's minimum part is 5 MiB.
    PART_BYTES = 8 * 1024 * 1024

    def __init__(self, bucket: str, prefix: str = "", endpoint_url: str = "",
                 region: str = "us-east-1", public_url: str = "") -> None:
        import boto3
        from botocore.config import Config

        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.client = boto3.client(
            "s3", endpoint_url=endpoint_url or None, region_name=region,
            config=Config(connect_timeout=5, read_timeout=30,
                          retries={"max_attempts": 5, "mode": "standard"}))
        # presigning is local (no request): a second client only names another host
        self.signer = self.client if not public_url else boto3.client(
            "s3", endpoint_url=public_url, region_name=region,
            config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))

    def _k(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def put_file(self, key: str, path: Path) -> None:
        from boto3.s3.transfer import TransferConfig

        cfg = TransferConfig(multipart_threshold=self.PART_BYTES,
                             multipart_chunksize=self.PART_BYTES, use_threads=False)
        self.client.upload_file(str(path), self.bucket, self._k(key), Config=cfg)

    def put_bytes(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._k(key), Body=data)

    def get_bytes(self, key: str) -> bytes:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._k(key))["Body"].read()
        except self.client.exceptions.NoSuchKey:
            raise KeyError(key) from None

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self._k(key))
            return True
        except ClientError:
            return False

    def list(self, prefix: str) -> list[str]:
        keys: list[str] = []
        strip = len(self.prefix) + 1 if self.prefix else 0
        for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self._k(prefix)):
            keys.extend(o["Key"][strip:] for o in page.get("Contents", []))
        return sorted(keys)

    def delete_prefix(self, prefix: str) -> int:
        """Safe while others delete or write the same keys."""
        keys = self.list(prefix)
        for i in range(0, len(keys), 1000):
            chunk = [{"Key": self._k(k)} for k in keys[i:i + 1000]]
            self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": chunk})
        return len(keys)

    def link(self, key: str, file_name: str, ttl: int) -> str:
        return self.signer.generate_presigned_url(
            "get_object", ExpiresIn=ttl,
            Params={"Bucket": self.bucket, "Key": self._k(key),
                    "ResponseContentDisposition": content_disposition(file_name)})


def open_store(storage_url: str, api_url: str, secret: str, s3_endpoint_url: str = "",
               s3_region: str = "us-east-1", s3_public_url: str = "") -> LocalStore | S3Store:
    """Build the store named by ``storage_url``: ``file:///dir`` (or ``file://./rel``)
    or ``s3://bucket/prefix`` (links signed for ``s3_public_url`` when given).
    Raises ``ValueError`` for another scheme."""
    parsed = urlparse(storage_url)
    if parsed.scheme == "file":
        return LocalStore(Path(parsed.netloc + parsed.path), api_url, secret)
    if parsed.scheme == "s3":
        return S3Store(parsed.netloc, parsed.path, s3_endpoint_url, s3_region, s3_public_url)
    raise ValueError(f"storage_url: scheme must be file:// or s3://, got {storage_url!r}")
