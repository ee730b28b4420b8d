"""Load a project folder into `model.Project`: YAML -> env values -> JSON Schema -> semantics.

Every problem in every file is collected and raised together as one `ProjectError`, each
rendered `file:line: key.path: message (hint: ...)` with project-relative file names.
Warnings (valid but worth knowing) go to `Project.warnings`. This module reads files only;
it never imports pyspark and never writes anything.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from ticdc_sync.errors import DdlError, Issue, ProjectError
from ticdc_sync.model import (
    DEFAULT_DDL_POLICY,
    Action,
    BadMessagePolicy,
    DdlKind,
    DdlOverride,
    Defaults,
    DumplingOptions,
    ExportFiletype,
    FeatureUse,
    InitialLoad,
    Origin,
    Output,
    OverrideAction,
    Project,
    Protocol,
    Source,
    SourceOptions,
    TableEntry,
    TableFeatures,
    Transport,
    TransportKind,
)
from ticdc_sync.upstream import TableSchema

PROJECT_FILE = "ticdc_sync.yml"
PROFILES_FILE = "profiles.yml"
PROFILES_DIR_ENV = "TICDC_SYNC_PROFILES_DIR"
DEFAULT_TARGET = "dev"

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
}

ENV_MISSING = "environment variable"
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_ENV = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


# --------------------------------------------------------------------------- YAML


class LineDict(dict):
    """A YAML mapping that remembers the line of each key (1-based) and its own line."""

    line: int | None = None
    key_lines: dict[Any, int]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key_lines = {}


class LineList(list):
    """A YAML sequence that remembers the line of each item."""

    line: int | None = None
    item_lines: list[int]

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.item_lines = []


class _LineLoader(yaml.SafeLoader):
    """SafeLoader that keeps line numbers and reports duplicate keys instead of overwriting."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        # key, line, first line, the mapping holding it
        self.duplicates: list[tuple[str, int, int, LineDict]] = []


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    out = LineDict()
    out.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if isinstance(key, (dict, list)):
            raise yaml.constructor.ConstructorError(
                None, None, "a mapping key must be a scalar", key_node.start_mark
            )
        if key in out:
            loader.duplicates.append((str(key), line, out.key_lines[key], out))
            continue
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = line
    return out


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode) -> LineList:
    out = LineList(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    out.item_lines = [child.start_mark.line + 1 for child in node.value]
    return out


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load_yaml(text: str, file: str) -> tuple[Any, list[Issue]]:
    """Parse YAML keeping lines; duplicate keys and syntax errors become Issues."""
    loader = _LineLoader(text)
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark else None
        problem = getattr(exc, "problem", None) or str(exc)
        return None, [
            Issue(file, line, "", f"invalid YAML: {problem}", "check indentation and quoting")
        ]
    finally:
        loader.dispose()
    issues = [
        Issue(
            file,
            line,
            key_path((*(_find(data, owner) or ()), key)),
            f"duplicate key {key!r} (first at line {first})",
            "keep one of them",
        )
        for key, line, first, owner in loader.duplicates
    ]
    return data, issues


def _find(node: Any, target: Any, path: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
    """The key path of container `target` inside `node` (by identity)."""
    if node is target:
        return path
    children = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for k, v in children:
        found = _find(v, target, (*path, k))
        if found is not None:
            return found
    return None


def line_of(data: Any, path: tuple[Any, ...]) -> int | None:
    """The line of the deepest node along `path` that exists."""
    line = getattr(data, "line", None)
    node = data
    for part in path:
        if isinstance(node, LineDict) and part in node:
            line = node.key_lines.get(part, line)
            node = node[part]
        elif isinstance(node, LineList) and isinstance(part, int) and part < len(node):
            line = node.item_lines[part]
            node = node[part]
        else:
            break
    return line


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


def key_path(path: tuple[Any, ...]) -> str:
    """`sources[0].options.time-zone` style path."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# --------------------------------------------------------------------------- env


def interpolate(
    data: Any, file: str, issues: list[Issue], path: tuple[Any, ...] = (), root: Any = None
) -> Any:
    """Replace `${VAR}` / `${VAR:-default}` in string values (`$$` is a literal `$`).

    Containers are updated in place so line information survives.
    """
    root = data if root is None else root
    if isinstance(data, LineDict):
        for k in list(data):
            data[k] = interpolate(data[k], file, issues, (*path, k), root)
        return data
    if isinstance(data, LineList):
        for i, v in enumerate(data):
            data[i] = interpolate(v, file, issues, (*path, i), root)
        return data
    if not isinstance(data, str) or "$" not in data:
        return data

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, default = m.group(1), m.group(2)
        value = os.environ.get(name)
        if value is None or (value == "" and default is not None):
            if default is not None:
                return default
            issues.append(
                Issue(
                    file,
                    line_of(root, path),
                    key_path(path),
                    f"{ENV_MISSING} {name} is not set",
                    f"export {name}=... or write ${{{name}:-default}}",
                )
            )
            return ""
        return value

    return _ENV.sub(sub, data)


# --------------------------------------------------------------------------- schema


_SCHEMA: dict[str, Any] | None = None


def json_schema() -> dict[str, Any]:
    """The packaged project JSON Schema (Draft 2020-12)."""
    global _SCHEMA
    if _SCHEMA is None:
        text = (
            resources.files("ticdc_sync").joinpath("schemas/project.schema.json").read_text("utf-8")
        )
        _SCHEMA = json.loads(text)
    return _SCHEMA


def _validator(kind: str) -> jsonschema.Draft202012Validator:
    schema = json_schema()
    return jsonschema.Draft202012Validator({"$ref": f"#/$defs/{kind}", "$defs": schema["$defs"]})


_HINTS = {
    "keys": "omit `keys` to use the upstream primary key",
    "upstream": 'write "db.table"; globs like shop.* or shop.orders_* are allowed',
    "name": "letters, digits, _ and -; start with a letter or _",
}


def schema_issues(data: Any, kind: str, file: str) -> list[Issue]:
    """Validate one file against its `$defs` entry; one Issue per problem (extra keys one each)."""
    issues: list[Issue] = []
    for err in _validator(kind).iter_errors(data):
        issues.extend(_render_error(err, data, file))
    return issues


def _render_error(err: jsonschema.ValidationError, data: Any, file: str) -> list[Issue]:
    path = tuple(err.absolute_path)
    last = next((p for p in reversed(path) if isinstance(p, str)), "")
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = sorted((err.schema.get("properties") or {}).keys())
        extra = sorted(
            (k for k in err.instance if k not in allowed),
            key=lambda k: line_of(data, (*path, k)) or 0,
        )
        if not allowed:  # a map whose values failed; nothing is "extra"
            return []
        return [
            Issue(
                file,
                line_of(data, (*path, k)),
                key_path((*path, k)),
                f"unknown key {k!r}",
                "allowed keys: " + ", ".join(allowed),
            )
            for k in extra
        ]
    if err.validator == "not" and err.validator_value == {}:  # excluded by an if/then branch
        kind = ""
        if len(path) >= 2 and isinstance(parent := _get(data, path[:-1]), dict):
            kind = f" for {parent.get('type')!r}"
        return [
            Issue(file, line_of(data, path), key_path(path), f"key {last!r} is not allowed{kind}")
        ]
    if err.validator == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        return [
            Issue(file, line_of(data, path), key_path(path), f"missing required key {missing!r}")
        ]
    if err.validator == "enum":
        allowed = ", ".join(str(x) for x in err.validator_value)
        return [
            Issue(
                file,
                line_of(data, path),
                key_path(path),
                f"{err.instance!r} is not one of the allowed values",
                f"use one of: {allowed}",
            )
        ]
    if err.validator == "type":
        want = err.validator_value
        want = " or ".join(want) if isinstance(want, list) else want
        got = type(err.instance).__name__.replace("LineDict", "mapping").replace("LineList", "list")
        got = {"str": "string", "NoneType": "nothing", "int": "integer", "bool": "boolean"}.get(
            got, got
        )
        return [Issue(file, line_of(data, path), key_path(path), f"expected {want}, got {got}")]
    if err.validator == "minItems" and err.validator_value == 1:
        return [
            Issue(
                file, line_of(data, path), key_path(path), "must not be empty", _HINTS.get(last, "")
            )
        ]
    if err.validator == "pattern":
        return [
            Issue(
                file,
                line_of(data, path),
                key_path(path),
                f"{err.instance!r} is not a valid {last or 'value'}",
                _HINTS.get(last, f"must match {err.validator_value}"),
            )
        ]
    return [Issue(file, line_of(data, path), key_path(path), err.message)]


# --------------------------------------------------------------------------- loading


@dataclass
class _Ctx:
    root: Path
    issues: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    paths: dict[int, str] = field(default_factory=dict)  # id(Source|TableEntry) -> key path
    # id(Source|TableEntry) -> (its file's parsed data, its key path there): for key lines
    nodes: dict[int, tuple[Any, tuple[Any, ...]]] = field(default_factory=dict)
    raw: dict[Path, Any] = field(default_factory=dict)  # parsed files (dicts only)
    declared_sources: set[str] = field(default_factory=set)

    def schema_issues(self, data: Any, kind: str, file: str) -> list[Issue]:
        """Schema problems, minus those at a value whose env variable is missing (reported)."""
        env_failed = {(i.file, i.path) for i in self.issues if i.message.startswith(ENV_MISSING)}
        return [i for i in schema_issues(data, kind, file) if (i.file, i.path) not in env_failed]

    def path(self, obj: object, key: str = "") -> str:
        base = self.paths.get(id(obj), "")
        return f"{base}.{key}" if key else base

    def line(self, obj: Source | TableEntry, key: str = "") -> int | None:
        """The line of `key` inside the entry `obj` (the entry's own line without a key, or
        when the key is not written there)."""
        data, base = self.nodes.get(id(obj), (None, ()))
        if data is None:
            return obj.origin.line
        return line_of(data, (*base, key) if key else base)

    def rel(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return str(path)

    def read_yaml(self, path: Path, kind: str) -> tuple[Any, str]:
        """Read, check duplicates, interpolate env (not for profiles: only the selected output)."""
        file = self.rel(path)
        try:
            text = path.read_text("utf-8")
        except OSError as exc:
            self.issues.append(Issue(file, None, "", f"cannot read: {exc.strerror}"))
            return None, file
        data, issues = load_yaml(text, file)
        self.issues.extend(issues)
        if data is None and not issues:
            self.issues.append(
                Issue(file, None, "", "file is empty", f"see the {kind} reference in README.md")
            )
        if kind != "profiles_file" and data is not None:
            data = interpolate(data, file, self.issues)
        if isinstance(data, dict):
            self.raw[path] = data
        return data, file


def load_project(
    root: Path, target: str | None = None, profiles_dir: Path | None = None
) -> Project:
    """Load and check the project at `root` for profile target `target` (default: the
    profile's); profiles.yml from `profiles_dir` if given (else `profiles_path`)."""
    root = Path(root)
    ctx = _Ctx(root)
    if not (root / PROJECT_FILE).is_file():
        raise ProjectError(
            [
                Issue(
                    ctx.rel(root / PROJECT_FILE) if root.is_dir() else str(root),
                    None,
                    "",
                    "no ticdc-sync project here",
                    "pass --project DIR, or create one with `ticdc-sync init DIR`",
                )
            ]
        )

    proj_data, proj_file = ctx.read_yaml(root / PROJECT_FILE, "project_file")
    proj_ok = _check(ctx, proj_data, "project_file", proj_file)
    # name and profile are used even if another part of the file has a problem, so the
    # profile (and everything after it) is still checked.
    raw = proj_data if isinstance(proj_data, dict) else {}
    name = raw.get("name") if isinstance(raw.get("name"), str) else root.name
    profile_name = raw.get("profile") if isinstance(raw.get("profile"), str) else name
    defaults = _defaults(proj_data.get("defaults") if proj_ok else None)
    overrides = _ddl_overrides(ctx, proj_data, proj_file) if proj_ok else []

    output = _load_output(ctx, profile_name, target, proj_data, profiles_dir)

    sources: list[Source] = []
    for path in sorted((root / "sources").glob("*.y*ml")):
        data, file = ctx.read_yaml(path, "sources_file")
        for i in _check_items(ctx, data, "sources_file", file, "sources"):
            item = data["sources"][i]
            sources.append(_source(ctx, item, file, line_of(data, ("sources", i)), f"sources[{i}]"))
            ctx.paths[id(sources[-1])] = f"sources[{i}]"
            ctx.nodes[id(sources[-1])] = (data, ("sources", i))

    tables: list[TableEntry] = []
    for path in sorted((root / "tables").glob("*.y*ml")):
        data, file = ctx.read_yaml(path, "tables_file")
        for i in _check_items(ctx, data, "tables_file", file, "tables"):
            item = data["tables"][i]
            tables.append(_table(ctx, item, file, line_of(data, ("tables", i)), f"tables[{i}]"))
            ctx.paths[id(tables[-1])] = f"tables[{i}]"
            ctx.nodes[id(tables[-1])] = (data, ("tables", i))

    seeds = _seed_schemas(ctx, root)
    # Sources with problems of their own still exist for `source:` references.
    ctx.declared_sources = {
        str(item["name"])
        for path in sorted((root / "sources").glob("*.y*ml"))
        for item in ctx.raw.get(path, {}).get("sources") or []
        if isinstance(item, dict) and "name" in item
    }
    _check_source_refs(ctx, root)
    for o in overrides:
        if o.source is not None and o.source not in ctx.declared_sources:
            known = ", ".join(sorted(ctx.declared_sources)) or "none defined"
            ctx.issues.append(
                Issue(
                    o.origin.file,
                    o.origin.line,
                    "ddl_overrides",
                    f"unknown source {o.source!r}",
                    f"use one of: {known}",
                )
            )
    _semantic_checks(ctx, sources, tables, seeds)
    if output is not None:
        _capture_folder_warnings(ctx, output, sources)

    if ctx.issues:
        raise ProjectError(sorted(ctx.issues, key=_issue_order))
    return Project(
        name=name,
        root=root,
        output=output or Output(name=target or DEFAULT_TARGET),
        defaults=defaults,
        sources=tuple(sources),
        tables=tuple(tables),
        seed_schemas=seeds,
        warnings=tuple(w.render() for w in sorted(ctx.warnings, key=_issue_order)),
        ddl_overrides=tuple(overrides),
        staging_retention_ms=_duration_ms(
            ((proj_data.get("staging") or {}) if proj_ok else {}).get("retention", "7d")
        ),
    )


def _issue_order(i: Issue) -> tuple[str, int, str, str]:
    return (i.file, i.line or 0, i.path, i.message)


def _check(ctx: _Ctx, data: Any, kind: str, file: str) -> bool:
    """Schema-check one file; False if it is unusable (so semantic checks skip it)."""
    if data is None:
        return False
    issues = ctx.schema_issues(data, kind, file)
    ctx.issues.extend(issues)
    return not issues


def _check_items(ctx: _Ctx, data: Any, kind: str, file: str, list_key: str) -> list[int]:
    """Schema-check a file holding one list; the indices of the items that passed.

    Items with problems are left out of semantic checks (their problems are reported),
    so one mistake does not hide the others in the same file.
    """
    if data is None:
        return []
    issues = ctx.schema_issues(data, kind, file)
    ctx.issues.extend(issues)
    items = data.get(list_key) if isinstance(data, dict) else None
    if not isinstance(items, list):
        return []
    bad: set[int] = set()
    env = [i for i in ctx.issues if i.file == file and i.message.startswith(ENV_MISSING)]
    for issue in [*issues, *env]:
        m = re.match(rf"{re.escape(list_key)}\[(\d+)\]", issue.path)
        if not m:
            return []  # a file-level problem: nothing in it can be trusted
        bad.add(int(m.group(1)))
    return [i for i in range(len(items)) if i not in bad]


def _defaults(d: Any) -> Defaults:
    if not d:
        return Defaults()
    policy = dict(DEFAULT_DDL_POLICY)
    policy.update({DdlKind(k): Action(v) for k, v in (d.get("ddl") or {}).items()})
    return Defaults(
        ddl=policy,
        on_bad_message=BadMessagePolicy(d.get("on_bad_message", BadMessagePolicy.FAIL.value)),
        table_features=TableFeatures().with_overrides(_table_features(d)),
    )


def _table_features(d: Any) -> dict[str, object]:
    """`table_features` of a defaults block or a table entry, as TableFeatures fields."""
    out: dict[str, object] = {}
    for k, v in (d.get("table_features") or {}).items():
        out[k] = v if k == "deletion_vectors" else FeatureUse(v)
    return out


def profiles_path(root: Path) -> Path:
    """profiles.yml: `$TICDC_SYNC_PROFILES_DIR` first, then the project folder."""
    env_dir = os.environ.get(PROFILES_DIR_ENV)
    if env_dir and (Path(env_dir) / PROFILES_FILE).is_file():
        return Path(env_dir) / PROFILES_FILE
    return root / PROFILES_FILE


def _load_output(
    ctx: _Ctx,
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
    if not _check(ctx, data, "profiles_file", file):
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
    return Output(
        name=chosen,
        spark_master=str(spark.get("master", "local[*]")),
        spark_conf={str(k): _conf_str(v) for k, v in sorted((spark.get("conf") or {}).items())},
        jars_dir=spark.get("jars_dir"),
        warehouse=str(out.get("warehouse", "warehouse")),
        transport=transport,
        **{
            name: float(lease[key])
            for key, name in (("ttl_seconds", "run_lease_ttl"), ("wait_seconds", "run_lease_wait"))
            if key in lease
        },
    )


def _conf_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _source(ctx: _Ctx, item: Any, file: str, line: int | None, kp: str) -> Source:
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
    )
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
    ctx: _Ctx,
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


def _table(ctx: _Ctx, item: Any, file: str, line: int | None, kp: str) -> TableEntry:
    name = item.get("name", "{table}")
    bad = sorted({p for p in _PLACEHOLDER.findall(name) if p not in ("db", "table")})
    if bad:
        ctx.issues.append(
            Issue(
                file,
                item.key_lines.get("name", line),
                f"{kp}.name",
                f"unknown placeholder {{{bad[0]}}} in {name!r}",
                "only {db} and {table} are available",
            )
        )
    return TableEntry(
        upstream=item["upstream"],
        name=name,
        source=item.get("source"),
        keys=tuple(item.get("keys") or ()),
        ddl={DdlKind(k): Action(v) for k, v in (item.get("ddl") or {}).items()},
        on_bad_message=BadMessagePolicy(item["on_bad_message"])
        if "on_bad_message" in item
        else None,
        ignore_columns=tuple(str(c).lower() for c in item.get("ignore_columns") or ()),
        table_features=_table_features(item),
        origin=Origin(file, line),
        initial_load=bool(item.get("initial_load", True)),
    )


_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def _duration_ms(text: str) -> int:
    """`7d`, `12h`, `30m`, `45s` (the JSON Schema checks the form) in milliseconds."""
    return int(text[:-1]) * _UNIT_MS[text[-1]]


def _ddl_overrides(ctx: _Ctx, data: Any, file: str) -> list[DdlOverride]:
    """`ddl_overrides` of ticdc_sync.yml; the SQL of apply_as/applied must be readable."""
    from ticdc_sync.ddl import parse_ddl
    from ticdc_sync.ddl.statements import Unknown

    out: list[DdlOverride] = []
    seen: dict[tuple[str | None, str, int], int] = {}
    for i, item in enumerate(data.get("ddl_overrides") or []):
        kp = f"ddl_overrides[{i}]"
        line = line_of(data, ("ddl_overrides", i))
        action = OverrideAction(item["action"])
        sql = item.get("sql")
        upstream = str(item["upstream"])
        if action is not OverrideAction.SKIP and not sql:
            ctx.issues.append(
                Issue(
                    file,
                    line,
                    kp,
                    f"action {action.value} needs `sql`",
                    "give the DDL as "
                    "ticdc-sync should read it, e.g. the statement without the option it cannot read",
                )
            )
            continue
        if sql:
            db = upstream.split(".", 1)[0]
            unknown = [s for s in parse_ddl(sql, db) if isinstance(s, Unknown)]
            if unknown:
                ctx.issues.append(
                    Issue(
                        file,
                        item.key_lines.get("sql", line),
                        f"{kp}.sql",
                        f"not understood by ticdc-sync either: {unknown[0].reason}",
                        "write plain MySQL DDL (ALTER TABLE ... ADD COLUMN ...)",
                    )
                )
                continue
        key = (item.get("source"), upstream.lower(), int(item["commit_ts"]))
        if key in seen:
            ctx.issues.append(
                Issue(
                    file,
                    line,
                    kp,
                    f"a second override of {upstream} at commit_ts "
                    f"{key[2]} (first at line {seen[key]})",
                    "keep one",
                )
            )
            continue
        seen[key] = line or 0
        out.append(
            DdlOverride(
                upstream=upstream,
                commit_ts=int(item["commit_ts"]),
                action=action,
                sql=sql,
                source=item.get("source"),
                note=item.get("note"),
                origin=Origin(file, line),
            )
        )
    return out


def _seed_schemas(ctx: _Ctx, root: Path) -> dict[tuple[str, str], TableSchema]:
    files = sorted((root / "schema").glob("*.sql"))
    if not files:
        return {}
    # Imported here so a project without schema/ needs nothing from the DDL module.
    from ticdc_sync.ddl import parse_schema_sql

    out: dict[tuple[str, str], TableSchema] = {}
    seen: dict[tuple[str, str], str] = {}
    for path in files:
        file = ctx.rel(path)
        try:
            schemas = parse_schema_sql(path.read_text("utf-8"), path.stem, file)
        except DdlError as exc:
            ctx.issues.append(
                Issue(file, _line_from(str(exc)), "", str(exc), "fix the SQL or remove the file")
            )
            continue
        for s in schemas:
            k = (s.db.lower(), s.table.lower())
            if k in out:
                ctx.issues.append(
                    Issue(
                        file,
                        None,
                        "",
                        f"table {s.qualified} is already defined in {seen[k]}",
                        "define it once",
                    )
                )
                continue
            out[k] = s
            seen[k] = file
    return dict(sorted(out.items()))


def _line_from(message: str) -> int | None:
    m = re.search(r"\bline (\d+)", message)
    return int(m.group(1)) if m else None


# --------------------------------------------------------------------------- semantics


def _is_glob(text: str) -> bool:
    return any(ch in text for ch in "*?[")


def target_glob(entry: TableEntry) -> str:
    """The set of target names an entry can produce, as one fnmatch pattern (lower case)."""
    return (
        entry.name.replace("{db}", entry.upstream_db)
        .replace("{table}", entry.upstream_table)
        .lower()
    )


def is_shard_merge(entry: TableEntry) -> bool:
    """A table-pattern route whose name template does not vary with the table: merge shards."""
    return _is_glob(entry.upstream_table) and "{table}" not in entry.name


def _sources_overlap(a: TableEntry, b: TableEntry) -> bool:
    return a.source is None or b.source is None or a.source == b.source


def _check_source_refs(ctx: _Ctx, root: Path) -> None:
    """`source:` of every table item, even items with other problems, must name a source."""
    known = ", ".join(sorted(ctx.declared_sources)) or "none defined"
    for path in sorted((root / "tables").glob("*.y*ml")):
        data = ctx.raw.get(path) or {}
        items = data.get("tables")
        for i, item in enumerate(items if isinstance(items, list) else []):
            src = item.get("source") if isinstance(item, dict) else None
            if isinstance(src, str) and src not in ctx.declared_sources:
                ctx.issues.append(
                    Issue(
                        ctx.rel(path),
                        line_of(data, ("tables", i, "source")),
                        f"tables[{i}].source",
                        f"unknown source {src!r}",
                        f"sources: {known}",
                    )
                )


def _capture_folder_warnings(ctx: _Ctx, output: Output, sources: list[Source]) -> None:
    """A files-transport topic without a capture folder reads nothing, ever: most likely a
    typo in `topics:` (with Kafka, a missing topic is an error when `run` reads it)."""
    t = output.transport
    if t.kind is not TransportKind.FILES:
        return
    folder = Path(t.captures or "captures")
    root = folder if folder.is_absolute() else ctx.root / folder
    for s in sources:
        for topic in s.topics:
            if not (root / topic).is_dir():
                shown = f"{t.captures or 'captures'}/{topic}"
                ctx.warnings.append(
                    Issue(
                        s.origin.file,
                        s.origin.line,
                        ctx.path(s),
                        f"topic {topic} has no capture folder {shown}: nothing will be read "
                        "from it",
                        "check the topic name, or record it with `ticdc-sync capture`",
                        severity="warning",
                    )
                )


def _semantic_checks(
    ctx: _Ctx,
    sources: list[Source],
    tables: list[TableEntry],
    seeds: dict[tuple[str, str], TableSchema],
) -> None:
    names: dict[str, Source] = {}
    for s in sources:
        if s.name in names:
            ctx.issues.append(
                Issue(
                    s.origin.file,
                    s.origin.line,
                    ctx.path(s),
                    f"source {s.name!r} is already defined at {names[s.name].origin.render()}",
                    "source names must be unique",
                )
            )
        names.setdefault(s.name, s)
        if s.protocol is Protocol.CANAL_JSON and not s.options.enable_tidb_extension:
            ctx.warnings.append(
                Issue(
                    s.origin.file,
                    s.origin.line,
                    ctx.path(s),
                    "canal-json without enable-tidb-extension has no commit_ts and no watermarks: "
                    "changes are ordered by partition offset and `es` only",
                    "create the changefeed with enable-tidb-extension=true",
                    severity="warning",
                )
            )
    topic_owner: dict[str, Source] = {}
    for s in sources:
        for t in s.topics:
            if t in topic_owner and topic_owner[t].protocol != s.protocol:
                ctx.issues.append(
                    Issue(
                        s.origin.file,
                        ctx.line(s, "topics"),
                        ctx.path(s, "topics"),
                        f"topic {t!r} is also read by source {topic_owner[t].name!r} with another protocol",
                        "a topic carries one protocol",
                    )
                )
            topic_owner.setdefault(t, s)

    for i, e in enumerate(tables):
        where = e.origin
        if _is_glob(e.upstream_db) and "{db}" not in e.name:
            ctx.issues.append(
                Issue(
                    where.file,
                    ctx.line(e, "name"),
                    ctx.path(e, "name"),
                    f"{e.upstream!r} spans databases but name {e.name!r} has no {{db}}: "
                    "tables of different databases would land in one target",
                    'use a name like "{db}_{table}", or one entry per database',
                )
            )
        for prev in tables[:i]:
            _pair_checks(ctx, prev, e)
        for (db, tbl), schema in seeds.items():
            if e.keys and e.matches(db, tbl):
                missing = [k for k in e.keys if schema.column(k) is None]
                if missing:
                    ctx.issues.append(
                        Issue(
                            where.file,
                            ctx.line(e, "keys"),
                            ctx.path(e, "keys"),
                            f"{schema.qualified} has no column {missing[0]!r}",
                            "columns: " + ", ".join(schema.column_names()),
                        )
                    )


def _pair_checks(ctx: _Ctx, prev: TableEntry, e: TableEntry) -> None:
    where = e.origin
    if _sources_overlap(prev, e):
        if not _is_glob(e.upstream) and e.upstream.lower() == prev.upstream.lower():
            ctx.issues.append(
                Issue(
                    where.file,
                    ctx.line(e, "upstream"),
                    ctx.path(e, "upstream"),
                    f"{e.upstream} is already claimed by the entry at {prev.origin.render()}",
                    "one entry per upstream table and source; set `source:` to route sources apart",
                )
            )
            return
        if (
            not _is_glob(e.upstream)
            and prev.is_pattern
            and prev.matches(e.upstream_db, e.upstream_table)
        ):
            ctx.issues.append(
                Issue(
                    where.file,
                    ctx.line(e, "upstream"),
                    ctx.path(e, "upstream"),
                    f"{e.upstream} is already claimed by pattern {prev.upstream!r} at {prev.origin.render()}; "
                    "entries match in order, so this one is never used",
                    "move this entry before the pattern (files are read in name order)",
                )
            )
            return
    a, b = target_glob(prev), target_glob(e)
    collide = (
        a == b
        or (not _is_glob(a) and fnmatch.fnmatchcase(a, b))
        or (not _is_glob(b) and fnmatch.fnmatchcase(b, a))
    )
    if collide:
        ctx.issues.append(
            Issue(
                where.file,
                ctx.line(e, "name"),
                ctx.path(e, "name"),
                f"target {e.name!r} of {e.upstream} can collide with target {prev.name!r} of {prev.upstream} at {prev.origin.render()}",
                "give the routes distinct names, e.g. a prefix per source",
            )
        )
