"""Source entries of sources/*.yml -> `Source`: protocol, topics, protocol options, and the
source's `initial_load` (the Dumpling export and the flags it was made with).

Checks what one entry can say about itself; checks across entries are `checks`, and the
export itself is read by `dumpling`. This module never reads an export or a topic.
"""

from __future__ import annotations

import re
from typing import Any

from ticdc_sync.core.errors import Issue
from ticdc_sync.core.model import (
    DumplingOptions,
    ExportFiletype,
    InitialLoad,
    Origin,
    Protocol,
    Source,
    SourceOptions,
)
from ticdc_sync.project.context import Ctx
from ticdc_sync.project.large_messages import handle_key_only_warning, large_message_fields

# Which protocol options mean something for which protocol (codec facts 1.6, 3.4, 4.5;
# `content-compatible` is Canal-JSON only, `debezium-disable-schema` Debezium only, and
# the server time zone only matters where TIMESTAMP is a zone-less wall-clock string,
# codec facts 0.1; Debezium sends UTC).
OPTION_PROTOCOLS: dict[str, tuple[Protocol, ...]] = {
    "enable-tidb-extension": (Protocol.CANAL_JSON, Protocol.DEBEZIUM),
    "content-compatible": (Protocol.CANAL_JSON,),
    "only-output-updated-columns": (Protocol.CANAL_JSON, Protocol.OPEN_PROTOCOL),
    "debezium-disable-schema": (Protocol.DEBEZIUM,),
    "time-zone": (Protocol.CANAL_JSON, Protocol.OPEN_PROTOCOL),
    # TiCDC's large-message handling (`large_messages`): the option for open-protocol and
    # canal-json only, raw claim-check values for canal-json only, the compression for every
    # protocol (tiflow/ticdc pkg/config/large_message.go `AdjustAndValidate`).
    "large-message-handle-option": (Protocol.CANAL_JSON, Protocol.OPEN_PROTOCOL),
    "claim-check-storage-uri": (Protocol.CANAL_JSON, Protocol.OPEN_PROTOCOL),
    "claim-check-raw-value": (Protocol.CANAL_JSON,),
    "large-message-handle-compression": (
        Protocol.CANAL_JSON,
        Protocol.DEBEZIUM,
        Protocol.OPEN_PROTOCOL,
    ),
}


def parse_source(ctx: Ctx, item: Any, file: str, line: int | None, kp: str) -> Source:
    protocol = Protocol(item["protocol"])
    opts = item.get("options") or {}
    for key in opts:
        if protocol not in OPTION_PROTOCOLS[key]:
            applies = ", ".join(p.value for p in OPTION_PROTOCOLS[key])
            ctx.issues.append(
                Issue(
                    file,
                    opts.key_lines.get(key, line),
                    f"{kp}.options.{key}",
                    f"option {key!r} does not apply to {protocol.value}",
                    f"it applies to {applies}; remove it",
                )
            )
    if ("topics" in item) == ("topic_pattern" in item):
        ctx.issues.append(
            Issue(
                file,
                line,
                kp,
                "give exactly one of `topics` or `topic_pattern`",
                "topics: [my_topic] for a fixed list",
            )
        )
    if "topic_pattern" in item:
        try:
            re.compile(item["topic_pattern"])
        except re.error as exc:
            ctx.issues.append(
                Issue(
                    file,
                    item.key_lines.get("topic_pattern"),
                    f"{kp}.topic_pattern",
                    f"invalid regex: {exc}",
                )
            )
    options = SourceOptions(
        enable_tidb_extension=opts.get("enable-tidb-extension", True),
        content_compatible=opts.get("content-compatible", False),
        only_output_updated_columns=opts.get("only-output-updated-columns", False),
        debezium_disable_schema=opts.get("debezium-disable-schema", False),
        time_zone=str(opts.get("time-zone", "UTC")),
        **large_message_fields(
            ctx, opts, protocol, lambda k: protocol in OPTION_PROTOCOLS[k], file, line, kp
        ),
    )
    handle_key_only_warning(ctx, protocol, options.large_message_handle_option, file, line, kp)
    return Source(
        name=item["name"],
        protocol=protocol,
        topics=tuple(item.get("topics") or ()),
        topic_pattern=item.get("topic_pattern"),
        options=options,
        origin=Origin(file, line),
        initial_load=_initial_load(ctx, item, options, protocol, file, line, kp),
    )


# Dumpling flags that only mean something for CSV exports.
_CSV_FLAGS = (
    "csv-separator",
    "csv-delimiter",
    "csv-null-value",
    "csv-line-terminator",
    "no-header",
)


def _initial_load(
    ctx: Ctx,
    item: Any,
    options: SourceOptions,
    protocol: Protocol,
    file: str,
    line: int | None,
    kp: str,
) -> InitialLoad | None:
    """`initial_load` of a source (already schema-checked): the Dumpling export and the
    flags it was made with. The export itself is checked by `dumpling.check_exports`."""
    il = item.get("initial_load")
    if il is None:
        return None
    kp = f"{kp}.initial_load"
    il_line = item.key_lines.get("initial_load", line)
    opts = il.get("options") or {}

    def where(key: str) -> int | None:
        return opts.key_lines.get(key, il_line) if hasattr(opts, "key_lines") else il_line

    filetype = ExportFiletype(opts.get("filetype", ExportFiletype.SQL.value))
    if filetype is ExportFiletype.SQL:
        for key in _CSV_FLAGS:
            if key in opts:
                ctx.issues.append(
                    Issue(
                        file,
                        where(key),
                        f"{kp}.options.{key}",
                        f"option {key!r} applies to CSV exports only",
                        "set `filetype: csv` if the export was made with --filetype csv, or "
                        "remove the option",
                    )
                )
    if opts.get("escape-backslash") is False:
        ctx.issues.append(
            Issue(
                file,
                where("escape-backslash"),
                f"{kp}.options.escape-backslash",
                "exports made with --escape-backslash=false cannot be read exactly (a value "
                "may span lines, and a string equal to the null value reads as NULL)",
                "export again with Dumpling's default --escape-backslash=true",
            )
        )
    if not (protocol is not Protocol.CANAL_JSON or options.enable_tidb_extension):
        ctx.issues.append(
            Issue(
                file,
                il_line,
                kp,
                "an initial load needs the changefeed's commit_ts to join the stream at the "
                "snapshot TSO; canal-json without enable-tidb-extension has none",
                "create the changefeed with enable-tidb-extension=true",
            )
        )
    sep = str(opts.get("csv-separator", ","))
    delim = str(opts.get("csv-delimiter", '"'))
    if delim and (delim in sep or sep in delim):
        ctx.issues.append(
            Issue(
                file,
                where("csv-delimiter"),
                f"{kp}.options.csv-delimiter",
                f"csv-delimiter {delim!r} and csv-separator {sep!r} overlap: fields cannot "
                "be told apart",
                "use the flags the export was made with",
            )
        )
    return InitialLoad(
        dumpling=str(il["dumpling"]),
        options=DumplingOptions(
            filetype=filetype,
            csv_separator=sep,
            csv_delimiter=delim,
            csv_null_value=str(opts.get("csv-null-value", "\\N")),
            csv_line_terminator=str(opts.get("csv-line-terminator", "\r\n")),
            no_header=bool(opts.get("no-header", False)),
            escape_backslash=bool(opts.get("escape-backslash", True)),
            time_zone=str(opts.get("time-zone", "UTC")),
        ),
        origin=Origin(file, il_line),
    )
