"""TiCDC's claim-check storage: the folder a changefeed's `claim-check-storage-uri` names, and
reading one claimed message from it by file name.

Facts this follows (tiflow and ticdc `pkg/sink/kafka/claimcheck/claim_check.go`): TiCDC
writes each claimed message to `<uuid v4>.json` at the root of that storage, and names it
in the Kafka record as `storage.URI() + "/" + file name` (older tiflow joined the two with
`filepath.Join`, which turns `s3://b/p` into `s3:/b/p`). TiCDC's own consumer
(`canal_json_decoder.go` `assembleClaimCheckRowChangedEvent`, `open/decoder.go`
`assembleEventFromClaimCheckStorage`) reads only the location's base name, from the storage
it is itself configured with: so does this module, so a location's folder (or a copy of
the storage elsewhere) never matters.

A local folder (`file:///abs`, `local:///abs`, `/abs`) or S3 (`s3://`, `s3a://`) is read
through delta-rs's object store, as `core.lake` reads the warehouse: credentials, region
and endpoint come from the environment (`lake.storage_options`), never from project files,
so a URI with a query string (TiCDC accepts `?access-key=...` there) is refused by
`uri_problem`. Pure Python, no pyspark; used inside Spark tasks
(`spark.staging.large_messages`) and by `project` to check the URI. Reads only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import urlsplit

LOCAL_SCHEMES = ("file", "local")
S3_SCHEMES = ("s3", "s3a")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def uri_problem(uri: str) -> str | None:
    """Why ticdc-sync cannot read claim-check files from `uri`, or None when it can."""
    if "://" not in uri:
        if not uri.startswith("/"):
            return "a local folder must be an absolute path, as TiCDC's file:// URIs are"
        return None
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if parts.query or parts.fragment:
        return (
            "the URI has a query string; ticdc-sync takes S3 credentials, region and endpoint "
            "from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, "
            "AWS_ENDPOINT_URL, docs/object-storage.md), never from project files"
        )
    if scheme in LOCAL_SCHEMES:
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            return f"a {scheme}:// URI must name an absolute folder: {scheme}:///path/to/folder"
        return None
    if scheme in S3_SCHEMES:
        return None if parts.netloc else "an s3:// URI must name a bucket: s3://bucket/prefix"
    return f"scheme {scheme}:// is not supported (use a local folder or s3://bucket/prefix)"


def root(uri: str) -> str:
    """The storage's root as delta-rs opens it: an absolute local path, or `s3://...`."""
    from ticdc_sync.core.lake import table_uri  # delta-rs and pyarrow: not for `validate`

    if "://" in uri and urlsplit(uri).scheme.lower() == "local":
        uri = "file" + uri[len("local") :]
    return table_uri(uri.rstrip("/") or "/")


def file_name(location: str) -> str:
    """The claimed file's name in a location: its last path segment (TiCDC's decoders take
    `filepath.Split(location)`'s file part)."""
    return location.rsplit("/", 1)[-1]


def shown(uri: str, name: str) -> str:
    """Where a claimed file is read from, for messages."""
    return f"{uri.rstrip('/')}/{name}"


def options(uri: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """delta-rs storage options for the storage `uri` (from the environment)."""
    from ticdc_sync.core.lake import storage_options

    return storage_options(root(uri), env)


class StorageError(OSError):
    """The claim-check storage could not be read (not a missing file): the storage is
    unreachable or refuses ticdc-sync. A file that is not there is FileNotFoundError."""


class ClaimStore:
    """One claim-check storage, opened lazily; `read` one file by name."""

    def __init__(self, uri: str, opts: Mapping[str, str]) -> None:
        self.uri = uri
        self._opts = dict(opts)
        self._fs = None

    def _files(self):
        if self._fs is None:
            self._fs = _opened(root(self.uri), tuple(sorted(self._opts.items())))
        return self._fs

    def __getstate__(self) -> dict:
        # Shipped to Spark tasks without its open file system (each process opens its own).
        return {"uri": self.uri, "_opts": self._opts, "_fs": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def read(self, name: str) -> bytes:
        """The file's bytes. FileNotFoundError when it is not there (or `name` is no file
        name); StorageError when the storage cannot be read (unreachable, refused, ...)."""
        if not name or "/" in name or name in (".", ".."):
            raise FileNotFoundError(f"{name!r} is not a file name")
        try:
            with self._files().open_input_file(name) as f:
                return f.read()
        except FileNotFoundError:
            raise FileNotFoundError("no such file") from None
        except Exception as e:  # noqa: BLE001 - the object store's errors, as text
            raise StorageError(f"{shown(self.uri, name)}: {first_line(e)}") from None


_OPEN: dict[tuple, object] = {}


def _opened(location: str, opts: tuple[tuple[str, str], ...]):
    """The object store of `location`, one per process (a Spark task's Python worker serves
    many tasks: one store, one connection pool)."""
    key = (location, opts)
    if key not in _OPEN:
        import pyarrow.fs as pafs
        from deltalake.fs import DeltaStorageHandler

        _OPEN[key] = pafs.PyFileSystem(DeltaStorageHandler(location, dict(opts)))
    return _OPEN[key]


def first_line(e: BaseException) -> str:
    """An object-store error's first line, without terminal colours."""
    text = _ANSI.sub("", str(e)).strip()
    return text.splitlines()[0].strip() if text else type(e).__name__
