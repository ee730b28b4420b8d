"""Where the shared reference material lives: `shared/` beside the repository root.

`shared/` holds a third-party corpus of CDC messages and DDL (`corpus/`, copied from
public repositories, each folder citing its origin) and TiCDC's protocol docs
(`protocols/`). It is not part of the repository: CI clones the repository with
`shared/` beside it, and TICDC_SYNC_SHARED overrides the place. Tests that read it carry
the `needs_shared` mark; when it is absent, tests/conftest.py skips them, all with one
reason, and the rest run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("TICDC_SYNC_SHARED") or Path(__file__).resolve().parents[2] / "shared")


def shared_present() -> bool:
    return SHARED.is_dir()


SHARED_ABSENT = (
    f"needs ../shared (third-party TiCDC corpus), absent at {SHARED}: "
    "set TICDC_SYNC_SHARED or place shared/ beside the repo"
)

needs_shared = pytest.mark.needs_shared
