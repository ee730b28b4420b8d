"""The project: its folder (ticdc_sync.yml, profiles.yml, sources/, tables/, schema/) loaded
and checked into a frozen `model.Project`.

- `load`: `load_project`, the one entry point; puts the parts below together.
- `yaml_lines`: YAML with the line of every key, and `${VAR}` environment values.
- `schema_check`: JSON Schema validation, its errors as `file:line: key.path` messages.
- `context`: one load's problems, warnings and entry locations.
- `profiles`: profiles.yml -> `Output`.
- `sources`: sources/*.yml -> `Source` (with its `initial_load`).
- `tables`: tables/*.yml -> `TableEntry`; `defaults`, `ddl_overrides`, schema/*.sql seeds.
- `checks`: checks across entries (shadowed or colliding routes, unknown sources, ...).

Reads files only: never imports pyspark, never writes anything.
"""

from ticdc_sync.project.checks import is_shard_merge, target_glob
from ticdc_sync.project.context import PROJECT_FILE
from ticdc_sync.project.load import load_project
from ticdc_sync.project.profiles import (
    DEFAULT_TARGET,
    PROFILES_DIR_ENV,
    PROFILES_FILE,
    profiles_path,
)
from ticdc_sync.project.schema_check import json_schema, schema_issues
from ticdc_sync.project.sources import OPTION_PROTOCOLS
from ticdc_sync.project.yaml_lines import (
    ENV_MISSING,
    LineDict,
    LineList,
    interpolate,
    key_path,
    line_of,
    load_yaml,
)

__all__ = [
    "DEFAULT_TARGET",
    "ENV_MISSING",
    "OPTION_PROTOCOLS",
    "PROFILES_DIR_ENV",
    "PROFILES_FILE",
    "PROJECT_FILE",
    "LineDict",
    "LineList",
    "interpolate",
    "is_shard_merge",
    "json_schema",
    "key_path",
    "line_of",
    "load_project",
    "load_yaml",
    "profiles_path",
    "schema_issues",
    "target_glob",
]
