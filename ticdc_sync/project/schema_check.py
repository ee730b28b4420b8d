"""JSON Schema validation of one parsed project file, and its errors as readable `Issue`s.

Each problem is rendered `key.path: message (hint: ...)` at the line it was written on.
This module checks form only (keys, types, allowed values); meaning across entries is
`checks`. It never reads project files.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import jsonschema

from ticdc_sync.core.errors import Issue
from ticdc_sync.project.yaml_lines import key_path, line_of

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
DURATION_HINT = "a whole number with its unit (ms, s, m, h, d), e.g. 500ms, 30s, 1m, 2h, 1d; or 0"


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
    if err.validator in ("pattern", "minimum", "maximum") and _is_duration(err.schema):
        # One definition for every duration key: a bare number other than 0 has no unit.
        return [
            Issue(
                file,
                line_of(data, path),
                key_path(path),
                f"{err.instance!r} is not a valid duration",
                DURATION_HINT,
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


def _is_duration(schema: Any) -> bool:
    return schema == json_schema()["$defs"]["duration"]


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data
