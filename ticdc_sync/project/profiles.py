"""profiles.yml -> `Output`: the selected profile target (Spark, warehouse, transport, run
lease), dbt-style.

Only the selected output is interpolated, so a variable of another target need not be
set. This module reads profiles.yml only; it never connects to anything.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ticdc_sync.core.errors import Issue
from ticdc_sync.core.model import CatalogOutput, Output, Transport, TransportKind
from ticdc_sync.project.context import PROJECT_FILE, Ctx, check_file
from ticdc_sync.project.yaml_lines import interpolate, line_of

PROFILES_FILE = "profiles.yml"
PROFILES_DIR_ENV = "TICDC_SYNC_PROFILES_DIR"
DEFAULT_TARGET = "dev"


def profiles_path(root: Path) -> Path:
    """profiles.yml: `$TICDC_SYNC_PROFILES_DIR` first, then the project folder."""
    env_dir = os.environ.get(PROFILES_DIR_ENV)
    if env_dir and (Path(env_dir) / PROFILES_FILE).is_file():
        return Path(env_dir) / PROFILES_FILE
    return root / PROFILES_FILE


def load_output(
    ctx: Ctx,
    profile_name: str,
    target: str | None,
    project: Any = None,
    profiles_dir: Path | None = None,
) -> Output | None:
    """The selected output of the profile; `project` is ticdc_sync.yml's data (for the
    line of a profile that does not exist)."""
    if profiles_dir is not None:
        path = Path(profiles_dir) / PROFILES_FILE
        if not path.is_file():
            ctx.issues.append(
                Issue(
                    str(path),
                    None,
                    "",
                    f"--profiles-dir {profiles_dir}: no {PROFILES_FILE} there",
                    "point --profiles-dir at the folder holding profiles.yml",
                )
            )
            return None
    else:
        path = profiles_path(ctx.root)
    if not path.is_file():
        ctx.issues.append(
            Issue(
                ctx.rel(path),
                None,
                "",
                "profiles.yml not found",
                f"create it in the project or in ${PROFILES_DIR_ENV}",
            )
        )
        return None
    data, file = ctx.read_yaml(path, "profiles_file")
    if not check_file(ctx, data, "profiles_file", file):
        return None
    if profile_name not in data:
        # The mistake is in ticdc_sync.yml (a `profile:` naming no profile, or a project
        # name used as the profile): point there, not at profiles.yml.
        key = "profile" if isinstance(project, dict) and "profile" in project else "name"
        implicit = (
            "" if key == "profile" else " (`profile:` is not set, so the project name is used)"
        )
        ctx.issues.append(
            Issue(
                PROJECT_FILE,
                line_of(project, (key,)) if isinstance(project, dict) else None,
                key,
                f"profile {profile_name!r} not found in {file}{implicit}",
                "profiles there: "
                + (", ".join(sorted(map(str, data))) or "none")
                + f"; set `profile:` in {PROJECT_FILE} to one of them, or add the profile",
            )
        )
        return None
    profile = data[profile_name]
    chosen = target or str(profile.get("target", DEFAULT_TARGET))
    outputs = profile["outputs"]
    if chosen not in outputs:
        ctx.issues.append(
            Issue(
                file,
                line_of(
                    data,
                    (
                        profile_name,
                        "target" if target is None and "target" in profile else "outputs",
                    ),
                ),
                f"{profile_name}.outputs",
                f"target {chosen!r} not found",
                "targets: " + ", ".join(sorted(map(str, outputs))),
            )
        )
        return None
    # Only the selected output is rendered, as dbt does: a prod-only variable need not be
    # set to work on dev.
    out = interpolate(outputs[chosen], file, ctx.issues, (profile_name, "outputs", chosen), data)
    # No re-check needed: the schema already checked these values, and interpolation only
    # replaces text inside strings.
    spark = out.get("spark") or {}
    lease = out.get("run_lease") or {}
    run = out.get("run") or {}
    tr = out.get("transport") or {"type": "files"}
    if tr.get("type") == "kafka":
        transport = Transport(
            TransportKind.KAFKA,
            bootstrap_servers=str(tr.get("bootstrap_servers", "")),
            kafka_options={
                str(k): _conf_str(v) for k, v in sorted((tr.get("options") or {}).items())
            },
            starting_offsets=str(tr.get("starting_offsets", "earliest")),
        )
    else:
        transport = Transport(TransportKind.FILES, captures=str(tr.get("captures", "captures")))
    remote = _remote(spark, ctx, file, data, (profile_name, "outputs", chosen, "spark"))
    cat = out.get("catalog")
    if remote is not None and isinstance(cat, dict) and "metastore" in cat:
        _remote_metastore(ctx, file, data, (profile_name, "outputs", chosen, "catalog"), remote)
    return Output(
        name=chosen,
        spark_master=str(spark.get("master", "local[*]")),
        spark_remote=remote,
        spark_conf={str(k): _conf_str(v) for k, v in sorted((spark.get("conf") or {}).items())},
        jars_dir=spark.get("jars_dir"),
        warehouse=str(out.get("warehouse", "warehouse")),
        transport=transport,
        apply_workers=int(run["apply_workers"]) if "apply_workers" in run else None,
        metrics_port=int(run["metrics_port"]) if "metrics_port" in run else None,
        metrics_address=str(run["metrics_address"]) if "metrics_address" in run else None,
        catalog=(
            CatalogOutput(
                name=str(cat.get("name", "spark_catalog")),
                metastore=str(cat["metastore"]) if "metastore" in cat else None,
            )
            if isinstance(cat, dict)
            else None
        ),
        **{
            name: float(lease[key])
            for key, name in (("ttl_seconds", "run_lease_ttl"), ("wait_seconds", "run_lease_wait"))
            if key in lease
        },
    )


# pyspark's own variable for a Spark Connect server: `sc://host:port`.
SPARK_REMOTE_ENV = "SPARK_REMOTE"


def _remote(spark: dict, ctx: Ctx, file: str, data: Any, where: tuple) -> str | None:
    """The Spark Connect server of the output: its `spark.remote`, else $SPARK_REMOTE
    (None: a classic session). A `spark.remote` beside a master or a jar folder is an
    issue: the server has both; $SPARK_REMOTE, as in pyspark, wins over them."""
    remote = spark.get("remote") or os.environ.get(SPARK_REMOTE_ENV) or None
    if remote is None:
        return None
    remote = str(remote).strip()
    named = "spark.remote" if spark.get("remote") else f"${SPARK_REMOTE_ENV}"
    if not remote.startswith("sc://"):
        ctx.issues.append(
            Issue(
                file,
                line_of(data, (*where, "remote")) if spark.get("remote") else None,
                ".".join(map(str, (*where, "remote"))),
                f"{named} {remote!r} is not a Spark Connect address",
                "write it as sc://host:port (15002 is Spark Connect's default port)",
            )
        )
        return None
    for key, why in (("master", "the server's own master"), ("jars_dir", "the server's jars")):
        if key in spark and spark.get("remote"):
            ctx.issues.append(
                Issue(
                    file,
                    line_of(data, (*where, key)),
                    ".".join(map(str, (*where, key))),
                    f"spark.{key} cannot be used with {named} (a Spark Connect server runs "
                    f"with {why})",
                    f"remove spark.{key}, or the remote to run a Spark session here",
                )
            )
    return remote


def _remote_metastore(ctx: Ctx, file: str, data: Any, where: tuple, remote: str) -> None:
    """`catalog.metastore` with a Spark Connect server: a client cannot set it (the session
    catalog is the server's, configured when the server starts), so it would be ignored."""
    ctx.issues.append(
        Issue(
            file,
            line_of(data, (*where, "metastore")),
            ".".join(map(str, (*where, "metastore"))),
            f"catalog.metastore cannot be used with the Spark Connect server {remote}: its "
            "session catalog is the server's own, configured when the server starts",
            "remove catalog.metastore and start the server with the metastore "
            "(spark.sql.catalogImplementation=hive, spark.hadoop.hive.metastore.uris="
            "thrift://host:port); the targets are registered in the server's catalog "
            "(catalog.name)",
        )
    )


def _conf_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)
