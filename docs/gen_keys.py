"""Write docs/reference/keys.md, the reference of every key of the project files, from the JSON
Schema `ticdc_sync/schemas/project.schema.json` and its `description`s.

    python docs/gen_keys.py           # rewrite docs/reference/keys.md
    python docs/gen_keys.py --check   # exit 1 if the committed page is not what the schema gives

The page is generated here and committed, rather than by a MkDocs hook at build time: it is
read in the repository as much as on the site, and a change to a key shows the page's diff in
review next to the schema's. tests/unit/test_docs.py regenerates it and fails when the bytes
differ, so the schema and the page cannot disagree.

Pure Python (json and pathlib, no MkDocs), deterministic: keys come in the schema's own order.
It must not read anything but the schema, nor describe a key in words of its own: every word
of a row comes from the schema.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "ticdc_sync" / "schemas" / "project.schema.json"
PAGE = ROOT / "docs" / "reference" / "keys.md"

# (definition, file it checks, the page and anchor that explain that file with examples)
FILES = [
    ("project_file", "ticdc_sync.yml", "../project-files.md#ticdc_syncyml"),
    ("profiles_file", "profiles.yml", "../project-files.md#profilesyml"),
    ("sources_file", "sources/*.yml", "../project-files.md#sourcesyml"),
    ("tables_file", "tables/*.yml", "../project-files.md#tablesyml"),
]
# The name shown for a key the user chooses (`additionalProperties`), by the definition its
# value is; a map of plain values (Spark conf, Kafka options) gets no rows of its own.
NAMED_KEYS = {"profile": "<profile>", "output": "<target>"}

_CODE = re.compile(r"(`[^`]*`)")


class SchemaDocError(ValueError):
    """The schema cannot be rendered: a key without a description, or text a Markdown table
    cannot hold."""


def _text(s: str) -> str:
    """Schema text as Markdown table-cell text that GitHub and Python-Markdown render alike."""
    parts = _CODE.split(" ".join(s.split()))
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            if "|" in part:
                raise SchemaDocError(f"a `|` inside a code span cannot be put in a table: {s!r}")
            out.append(part)
            continue
        for ch, esc in (("\\", "\\\\"), ("|", "\\|"), ("<", "&lt;"), ("*", "\\*"), ("[", "\\[")):
            part = part.replace(ch, esc)
        out.append(part)
    return "".join(out)


class _Walk:
    def __init__(self, schema: dict) -> None:
        self.defs: dict[str, dict] = schema["$defs"]
        refs = Counter(re.findall(r'"\$ref": "#/\$defs/([^"]+)"', json.dumps(schema)))
        # A definition several keys share is described once, in a section of its own.
        self.shared = sorted(name for name, n in refs.items() if n > 1)
        self.used_by: dict[str, list[str]] = {name: [] for name in self.shared}

    def ref(self, node: dict) -> str | None:
        ref = node.get("$ref")
        return ref.rsplit("/", 1)[1] if ref else None

    def resolved(self, node: dict) -> dict:
        name = self.ref(node)
        return self.defs[name] if name else node

    def description(self, node: dict, key: str) -> str:
        text = node.get("description") or self.resolved(node).get("description") or ""
        if not text.strip():
            raise SchemaDocError(f"key {key} has no description in {SCHEMA.name}")
        return text

    def kind(self, node: dict) -> str:
        name = self.ref(node)
        if name in self.shared:
            return f"see [`{name}`](#{name})"
        node = self.resolved(node)
        if "enum" in node:
            return " \\| ".join(
                f"`{json.dumps(v)[1:-1] if isinstance(v, str) else v}`" for v in node["enum"]
            )
        types = node.get("type", "")
        types = types if isinstance(types, list) else [types]
        text = " or ".join(t for t in types if t)
        if text == "array":
            items = self.resolved(node.get("items", {}))
            item = items.get("type", "object")
            text = f"list of {item}s" if isinstance(item, str) else "list"
        elif text == "object" and isinstance(node.get("additionalProperties"), dict):
            value = node["additionalProperties"]
            if not self.ref(value):
                text = "map of " + " or ".join(
                    value["type"] if isinstance(value["type"], list) else [value["type"]]
                )
        return text

    def rows(self, node: dict, prefix: str) -> list[tuple[str, str, bool, str]]:
        """(key, type, required, description) for every key under `node`, depth first."""
        node = self.resolved(node)
        out: list[tuple[str, str, bool, str]] = []
        required = set(node.get("required", []))
        for name, child in node.get("properties", {}).items():
            out += self._key(f"{prefix}{name}", child, name in required)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and self.ref(extra) in NAMED_KEYS:
            out += self._key(f"{prefix}{NAMED_KEYS[self.ref(extra)]}", extra, False)
        return out

    def _key(self, key: str, child: dict, required: bool) -> list[tuple[str, str, bool, str]]:
        out = [(key, self.kind(child), required, self.description(child, key))]
        if self.ref(child) in self.shared:
            self.used_by[self.ref(child)].append(key)
            return out
        target = self.resolved(child)
        if target.get("type") == "array" and "items" in target:
            items = self.resolved(target["items"])
            if "properties" in items:
                out += self.rows(items, f"{key}[].")
        else:
            out += self.rows(target, f"{key}.")
        return out


def _table(rows: list[tuple[str, str, bool, str]]) -> list[str]:
    lines = ["| key | type | description |", "|---|---|---|"]
    for key, kind, required, text in rows:
        kind = f"{kind}, **required**" if required else kind
        lines.append(f"| `{key}` | {kind} | {_text(text)} |")
    return lines


def render(schema: dict) -> str:
    """The Markdown page for `schema` (the project schema as loaded from its JSON)."""
    walk = _Walk(schema)
    lines = [
        "# Keys reference",
        "",
        "<!-- Generated by docs/gen_keys.py from ticdc_sync/schemas/project.schema.json;"
        " do not edit. -->",
        "",
        "Every key of the project files, from the JSON Schema that `validate` checks them",
        "against (`ticdc_sync/schemas/project.schema.json`): a key not listed here is an error.",
        "`key[]` is an item of a list; `<profile>` and `<target>` are names you choose.",
        "Examples and more on each file: [Project files](../project-files.md).",
        "",
    ]
    for name, file, more in FILES:
        node = walk.defs[name]
        lines += [f"## `{file}`", "", _text(walk.description(node, file)), ""]
        lines += [f"Examples: [`{file}`]({more}).", ""]
        lines += _table(walk.rows(node, "")) + [""]
    for name in walk.shared:
        node = walk.defs[name]
        keys = [f"`{key}`" for key in walk.used_by[name]]
        used = ", ".join(keys[:-1]) + " and " + keys[-1] if len(keys) > 1 else keys[0]
        lines += [f"## `{name}`", "", _text(walk.description(node, name)), ""]
        lines += [f"The value of {used}.", ""]
        if "properties" in node:
            lines += _table(walk.rows(node, "")) + [""]
        else:
            lines += [f"Values: {walk.kind(node)}.", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    text = render(json.loads(SCHEMA.read_text(encoding="utf-8")))
    if argv[1:] == ["--check"]:
        if PAGE.read_text(encoding="utf-8") != text:
            print(
                f"{PAGE.relative_to(ROOT)} is stale: run python docs/gen_keys.py", file=sys.stderr
            )
            return 1
        return 0
    if argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
