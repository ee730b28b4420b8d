"""Spark SQL text for the statements a run issues: identifiers, target paths, CREATE and MERGE.

Shared by `plan` (which prints the SQL for review) and the Spark runner (which executes the
very same text), so what reviewers read is what runs. Pure Python; no pyspark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

COMMIT_TS = "_commit_ts"
# Internal columns of a MERGE source (never written to targets).
OP_COL = "__op"


def quote(name: str) -> str:
    """Backtick-quote an identifier; a backtick inside is doubled (Spark SQL rule)."""
    return "`" + name.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def table_ref(location: str) -> str:
    """A path-based Delta table reference usable in SQL."""
    return "delta." + quote(location)


def create_table_sql(
    ref: str,
    columns: Sequence[tuple[str, str]],
    comment: str | None = None,
    properties: Mapping[str, str] | None = None,
    extra: Sequence[tuple[str, str]] = (),
    partition_by: Sequence[str] = (),
    cluster_by: Sequence[str] = (),
) -> str:
    """CREATE TABLE for a target: upstream columns in order plus `_commit_ts` and the
    `extra` columns of its mode (`sqlgen_history`), with the table properties the plan
    chose (`table_features.create_properties`) and its layout (`plan.layout`)."""
    cols = [f"  {quote(n)} {t}" for n, t in columns]
    cols.append(f"  {quote(COMMIT_TS)} BIGINT")
    cols += [f"  {quote(n)} {t.upper()}" for n, t in extra]
    text = f"CREATE TABLE IF NOT EXISTS {ref} (\n" + ",\n".join(cols) + "\n) USING delta"
    if partition_by:
        text += f"\nPARTITIONED BY ({', '.join(quote(c) for c in partition_by)})"
    if cluster_by:
        text += f"\nCLUSTER BY ({', '.join(quote(c) for c in cluster_by)})"
    if comment:
        text += f"\nCOMMENT {sql_string(comment)}"
    if properties:
        props = ",\n".join(f"  {sql_string(k)} = {sql_string(v)}" for k, v in properties.items())
        text += f"\nTBLPROPERTIES (\n{props}\n)"
    return text


def insert_sql(ref: str, source_view: str, columns: Sequence[str]) -> str:
    """What `merge_sql` does to a target without rows: insert the source's upserts."""
    cols = ", ".join(quote(c) for c in [*columns, COMMIT_TS])
    return (
        f"INSERT INTO {ref} ({cols})\nSELECT {cols} FROM {quote(source_view)} WHERE {OP_COL} <> 'D'"
    )


def merge_sql(
    ref: str,
    source_view: str,
    keys: Sequence[str],
    columns: Sequence[str],
    key_range: tuple[str, str] | None = None,
) -> str:
    """The one MERGE per target per window segment.

    The source holds one row per key (its last change in the segment) with `__op` = 'D' for
    a delete. The guard `t._commit_ts <= s._commit_ts` means a MERGE never regresses a row
    to an older commit, whatever order replays arrive in (DESIGN.md §2).
    `key_range`: SQL literals (lo, hi) bounding the source's first key. The bound on the
    target side lets Delta skip the files whose key range lies outside the batch's; every
    target row a source key can match lies inside it, so the result is unchanged.
    """
    on = " AND ".join(f"t.{quote(k)} <=> s.{quote(k)}" for k in keys)
    if key_range is not None:
        on += f" AND t.{quote(keys[0])} BETWEEN {key_range[0]} AND {key_range[1]}"
    all_cols = [*columns, COMMIT_TS]
    sets = ", ".join(f"t.{quote(c)} = s.{quote(c)}" for c in all_cols)
    ins_cols = ", ".join(quote(c) for c in all_cols)
    ins_vals = ", ".join(f"s.{quote(c)}" for c in all_cols)
    guard = f"(t.{quote(COMMIT_TS)} IS NULL OR t.{quote(COMMIT_TS)} <= s.{quote(COMMIT_TS)})"
    return (
        f"MERGE INTO {ref} t\n"
        f"USING {quote(source_view)} s\n"
        f"ON {on}\n"
        f"WHEN MATCHED AND s.{OP_COL} = 'D' AND {guard} THEN DELETE\n"
        f"WHEN MATCHED AND s.{OP_COL} <> 'D' AND {guard} THEN UPDATE SET {sets}\n"
        f"WHEN NOT MATCHED AND s.{OP_COL} <> 'D' THEN INSERT ({ins_cols}) VALUES ({ins_vals})"
    )
