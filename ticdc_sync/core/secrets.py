"""Which settings hold secrets, and how they are shown: the one redaction of the project.

A setting whose name contains one of `SECRET_WORDS` (Spark conf, Kafka client options) is a
secret: plans show `<redacted>` and logs and error messages show `****` instead of its
value. Pure Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SECRET_WORDS = ("password", "secret", "jaas", "token", "credential", "key")
IN_PLANS = "<redacted>"
IN_LOGS = "****"


def is_secret(name: str) -> bool:
    return any(w in name.lower() for w in SECRET_WORDS)


def redacted(options: Mapping[str, Any], mask: str = IN_LOGS) -> dict[str, Any]:
    """A copy of `options` with every secret value replaced by `mask`, keys sorted."""
    return {k: (mask if is_secret(k) else v) for k, v in sorted(options.items())}
