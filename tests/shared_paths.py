"""Where the shared reference material lives: `shared/` beside the repository root.

CI clones the repository with `shared/` beside it; TICDC_SYNC_SHARED overrides the place.
"""

from __future__ import annotations

import os
from pathlib import Path

SHARED = Path(os.environ.get("TICDC_SYNC_SHARED") or Path(__file__).resolve().parents[2] / "shared")
