"""Which TBLPROPERTIES a table entry's `properties` may set, each key with why.

Three kinds of `delta.*` key (Delta 4.x's own names; `ticdc_sync.*` are always ticdc-sync's):

- managed (`MANAGED`): a setting of ticdc-sync decides it; the entry is refused, the error
  naming that setting.
- safe (`SAFE`): tunes how Delta writes or keeps files and statistics; every reader still
  reads the table and delta-rs still commits to it.
- any other `delta.*` key (`READER_LOSS` names the known ones, with why; an unknown one counts
  the same): it may raise the table's protocol past what some readers (polars, DuckDB,
  Trino's older connectors...) or delta-rs's commits support. Refused unless the entry says
  `accept_reader_loss: true`; such a target then takes Spark's writers only
  (`plan.write_path`).

Keys are compared without case, as Delta compares its own. Pure data and lookups.
"""

from __future__ import annotations

from enum import StrEnum

OWN_PREFIX = "ticdc_sync."
DELTA_PREFIX = "delta."
# The keys a table entry's `properties` set on a target (a JSON list): what a later change of
# the entry may unset; properties set by hand are never in it.
ENTRY_PROPERTIES = "ticdc_sync.entry_properties"
# Table properties Spark reserves (it refuses them in TBLPROPERTIES).
SPARK_RESERVED = ("comment", "external", "is_managed_location", "location", "owner", "provider")

# key -> (the setting that manages it, "" for none: ticdc-sync itself, why)
MANAGED: dict[str, tuple[str, str]] = {
    "delta.enabledeletionvectors": ("table_features", "deletion vectors follow the setting"),
    "delta.columnmapping.mode": ("table_features", "column mapping comes with the DDL needing it"),
    "delta.columnmapping.maxcolumnid": ("table_features", "Delta's own counter"),
    "delta.enabletypewidening": ("table_features", "type widening comes with the DDL needing it"),
    "delta.appendonly": ("", "every target takes updates and deletes"),
    "delta.minreaderversion": ("table_features", "the protocol follows the table's features"),
    "delta.minwriterversion": ("table_features", "the protocol follows the table's features"),
    "delta.deletedfileretentionduration": (
        "maintenance.retain",
        "ticdc-sync's VACUUM keeps removed files that long",
    ),
    "delta.autooptimize.autocompact": (
        "maintenance.compact_small_files",
        "ticdc-sync compacts between its commits",
    ),
}

# key -> why it keeps every reader (and delta-rs's commits)
SAFE: dict[str, str] = {
    "delta.dataskippingnumindexedcols": "how many columns get file statistics",
    "delta.dataskippingstatscolumns": "which columns get file statistics",
    "delta.checkpointinterval": "how often Delta's writer checkpoints the log",
    "delta.logretentionduration": "how long log entries stay (time travel's reach)",
    "delta.randomizefileprefixes": "random prefixes in new files' names",
    "delta.randomprefixlength": "their length",
    "delta.autooptimize.optimizewrite": "Delta's writer shuffles rows into fewer files",
}

# key (or `prefix*`) -> what it takes away
READER_LOSS: dict[str, str] = {
    "delta.feature.*": "adds a table feature to the protocol",
    "delta.checkpointpolicy": "v2 checkpoints: a reader feature",
    "delta.enableicebergcompatv1": "a writer feature delta-rs does not commit to",
    "delta.enableicebergcompatv2": "a writer feature delta-rs does not commit to",
    "delta.universalformat.enabledformats": "needs Iceberg compatibility (a writer feature)",
    "delta.enablerowtracking": "a writer feature delta-rs does not commit to",
    "delta.enablechangedatafeed": "change files only Delta's writer writes (writer 4)",
    "delta.enableincommittimestamps": "a writer feature delta-rs does not commit to",
}


class Kind(StrEnum):
    PLAIN = "plain"  # not `delta.*`: a free-form property
    OWN = "own"  # `ticdc_sync.*`
    RESERVED = "reserved"  # Spark refuses it
    MANAGED = "managed"
    SAFE = "safe"
    READER_LOSS = "reader_loss"


def kind(key: str) -> Kind:
    k = key.lower()
    if k.startswith(OWN_PREFIX):
        return Kind.OWN
    if k in SPARK_RESERVED:
        return Kind.RESERVED
    if not k.startswith(DELTA_PREFIX):
        return Kind.PLAIN
    if k in MANAGED:
        return Kind.MANAGED
    if k in SAFE:
        return Kind.SAFE
    return Kind.READER_LOSS


def loss_why(key: str) -> str:
    """What a `READER_LOSS` key takes away."""
    k = key.lower()
    for name, why in READER_LOSS.items():
        if k == name or (name.endswith("*") and k.startswith(name[:-1])):
            return why
    return "a Delta property ticdc-sync does not know to keep every reader"


def refusal(key: str, accepts_loss: bool) -> tuple[str, str] | None:
    """(what is wrong, how to fix) for `key` in a table entry's `properties`, or None."""
    k = kind(key)
    if k is Kind.OWN:
        return f"table property {key!r} is ticdc-sync's own", "use another name"
    if k is Kind.RESERVED:
        return (
            f"table property {key!r} is reserved by Spark, which refuses it",
            "use another name (a table's comment is the entry's `comment`)",
        )
    if k is Kind.MANAGED:
        setting, why = MANAGED[key.lower()]
        if not setting:
            return (
                f"table property {key!r} is managed by ticdc-sync ({why})",
                "drop it (`mode: history` keeps every change as a row of its own)",
            )
        return (
            f"table property {key!r} is managed by ticdc-sync's `{setting}` ({why})",
            f"set `{setting}` instead (docs/catalog.md, Table properties)",
        )
    if k is Kind.READER_LOSS and not accepts_loss:
        return (
            f"table property {key!r} may take readers away ({loss_why(key)}); such a target "
            "takes Spark's writers only",
            "set `accept_reader_loss: true` on the entry to accept that, or drop the property",
        )
    return None


def spark_only(properties: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """The keys of `properties` only Spark's writers keep (accepted reader losses)."""
    return tuple(k for k, _ in properties if kind(k) is Kind.READER_LOSS)
