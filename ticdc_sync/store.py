"""Small files in the warehouse, wherever it is: read one, and name a Delta table's commit by
the hash of its commit file.

Object stores are reached through delta-rs's object-store layer (`DeltaStorageHandler`)
with the same storage options as `lake` (from the environment), so the same credentials
reach the same store.

Must not: import pyspark, write anything, or read anything but small files.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow.fs as pafs
from deltalake.fs import DeltaStorageHandler

from ticdc_sync.lake import is_local, storage_options, table_uri


def _split(location: str) -> tuple[str, str]:
    """(folder URI as delta-rs opens it, file name)."""
    uri = table_uri(location)
    folder, _, name = uri.rstrip("/").rpartition("/")
    return folder, name


def _remote(folder: str) -> pafs.FileSystem:
    return pafs.PyFileSystem(DeltaStorageHandler(folder, storage_options(folder)))


def read_bytes(location: str) -> bytes | None:
    """The file's bytes; None where it is absent or cannot be read (the caller rebuilds)."""
    folder, name = _split(location)
    try:
        if is_local(folder):
            return (Path(folder) / name).read_bytes()
        with _remote(folder).open_input_stream(name) as f:
            return f.read()
    except (OSError, ValueError):
        # delta-rs reports a missing object as FileNotFoundError, a refused request as
        # OSError; a malformed location as ValueError.
        return None


def commit_key(table_location: str, version: int) -> tuple[int, str] | None:
    """(version, SHA-256 of `_delta_log/<version>.json`) of a Delta table, or None where
    that file cannot be read. Commit files are never rewritten, so the pair names one
    commit of one table, also across a table deleted and made anew at the same place."""
    data = read_bytes(f"{table_location.rstrip('/')}/_delta_log/{version:020d}.json")
    if data is None:
        return None
    return version, hashlib.sha256(data).hexdigest()
