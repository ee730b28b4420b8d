"""A source's large-message options (TiCDC's `[sink.kafka-config.large-message-handle]`):
`large-message-handle-option`, `claim-check-storage-uri`, `claim-check-raw-value` and
`large-message-handle-compression`, checked as TiCDC checks them and for what ticdc-sync
can read.

TiCDC's rules (tiflow and ticdc `pkg/config/large_message.go` `AdjustAndValidate`): the
compression applies to any protocol; the option only to open-protocol and canal-json
(simple too, which ticdc-sync does not read), canal-json only with
`enable-tidb-extension`; `claim-check` needs a storage URI; `claim-check-raw-value` is
refused for open-protocol. ticdc-sync's own: the URI must be a local folder or S3
(`core.claim_store.uri_problem`), and `handle-key-only` is refused for open-protocol: the
new TiCDC (pingcap/ticdc `pkg/sink/codec/open/codec.go` `encodeRowChangedEvent`) writes no
`ohk` marker on such messages, so they could not be told from complete rows and their
other columns would land as NULL. Which option applies to which protocol at all is
`sources.OPTION_PROTOCOLS`. Reads no file and no storage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ticdc_sync.core.claim_store import uri_problem
from ticdc_sync.core.errors import Issue
from ticdc_sync.core.model import Compression, LargeMessageHandle, Protocol
from ticdc_sync.project.context import Ctx

OPTION = "large-message-handle-option"
URI = "claim-check-storage-uri"
RAW = "claim-check-raw-value"
COMPRESSION = "large-message-handle-compression"
RECONFIGURE = (
    "update the changefeed with large-message-handle-option=claim-check and a "
    "claim-check-storage-uri ticdc-sync can read, then set both here (docs/kafka.md, "
    "Large messages)"
)


def large_message_fields(
    ctx: Ctx,
    opts: Any,
    protocol: Protocol,
    applies: Callable[[str], bool],
    file: str,
    line: int | None,
    kp: str,
) -> dict[str, Any]:
    """The `SourceOptions` fields of the large-message options in `opts` (already checked
    by the JSON Schema); an option that does not `applies` to the protocol (an issue of its
    own, `OPTION_PROTOCOLS`) is read as unset. Adds an issue per rule broken."""
    lines = getattr(opts, "key_lines", {})
    given = {k: v for k, v in opts.items() if applies(k)}

    def issue(key: str, message: str, hint: str) -> None:
        ctx.issues.append(Issue(file, lines.get(key, line), f"{kp}.options.{key}", message, hint))

    option = LargeMessageHandle(given.get(OPTION, LargeMessageHandle.NONE.value))
    uri = given.get(URI)
    raw = bool(given.get(RAW, False))
    claim = option is LargeMessageHandle.CLAIM_CHECK
    canal = protocol is Protocol.CANAL_JSON
    if (
        option is not LargeMessageHandle.NONE
        and canal
        and given.get("enable-tidb-extension") is False
    ):
        issue(
            OPTION,
            f"TiCDC handles large canal-json messages only with enable-tidb-extension "
            f"(it refuses {option.value} without it)",
            "set enable-tidb-extension: true, as the changefeed must have it",
        )
    if option is LargeMessageHandle.HANDLE_KEY_ONLY and protocol is Protocol.OPEN_PROTOCOL:
        issue(
            OPTION,
            "handle-key-only messages cannot be read (the row would have to be re-read from "
            "TiDB at its commit_ts), and TiCDC's open-protocol encoder (pingcap/ticdc) does "
            "not mark them: their non-key columns would land as NULL",
            RECONFIGURE,
        )
    if claim and not uri:
        issue(
            OPTION,
            "claim-check needs claim-check-storage-uri: where TiCDC writes the large messages",
            "set claim-check-storage-uri to the changefeed's",
        )
    if uri and not claim:
        issue(
            URI,
            "claim-check-storage-uri applies only with large-message-handle-option: claim-check",
            "set large-message-handle-option: claim-check, as the changefeed has it, or remove it",
        )
    if uri and (why := uri_problem(str(uri))):
        issue(URI, f"cannot read claim-check files from {uri}: {why}", "")
    if raw and not claim:
        issue(
            RAW,
            "claim-check-raw-value applies only with large-message-handle-option: claim-check",
            "remove it, or set large-message-handle-option: claim-check as the changefeed has it",
        )
    return {
        "large_message_handle_option": option,
        "large_message_handle_compression": Compression(
            given.get(COMPRESSION, Compression.NONE.value)
        ),
        "claim_check_storage_uri": str(uri) if uri else None,
        "claim_check_raw_value": raw,
    }


def handle_key_only_warning(
    ctx: Ctx, protocol: Protocol, option: LargeMessageHandle, file: str, line: int | None, kp: str
) -> None:
    """A canal-json source that declares handle-key-only is valid (TiCDC marks each such
    message `_tidb.onlyHandleKey`), but none of those messages can be applied."""
    if option is LargeMessageHandle.HANDLE_KEY_ONLY and protocol is Protocol.CANAL_JSON:
        ctx.warnings.append(
            Issue(
                file,
                line,
                f"{kp}.options.{OPTION}",
                "handle-key-only messages cannot be read (the row would have to be re-read "
                "from TiDB at its commit_ts): each one is a bad message, failing or "
                "quarantined by its table's on_bad_message",
                RECONFIGURE,
                severity="warning",
            )
        )
