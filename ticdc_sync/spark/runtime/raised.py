"""Bad input found inside a Spark job: the job calls `raise_error('ticdc-sync: ...')`
(so it fails on the first bad row without an extra pass), and the driver turns the JVM
exception back into a plain `UserError` with that message. Nothing else is translated."""

from __future__ import annotations

from ticdc_sync.core.errors import UserError

PREFIX = "ticdc-sync: "


def user_error(e: BaseException) -> UserError | None:
    """The UserError a `raise_error(PREFIX + message)` inside the failed job carried, if any."""
    text = str(e)
    at = text.find(PREFIX)
    if at < 0:
        return None
    return UserError(text[at + len(PREFIX) :].split("\n")[0].removesuffix(" SQLSTATE: P0001"))
