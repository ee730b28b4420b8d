"""The exit codes of `ticdc-sync` (`cli`'s docstring says when each is returned)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_USER_ERROR = 1
EXIT_PENDING = 2
EXIT_CRASH = 3
# `verify`: the lake differs from the export (the command worked, and found a difference).
EXIT_DIFFERENT = 2
# `status --fail-over-lag`: a target is past its target_lag (like `plan --detailed-exitcode`'s
# 2: the command worked, and what it found asks for attention).
EXIT_OVER_LAG = 2
