"""The documentation: every key of the project schema is described, docs/reference/keys.md is
what docs/gen_keys.py makes of it, every CLI command and flag is on the commands page, every
relative link and `#anchor` in README.md and docs/ resolves (anchors as MkDocs makes them from
headings, and as GitHub does), README.md stays a front page that links every page, and the
MkDocs site builds with no warning.

Pure Python, no JVM; the last test runs `mkdocs build --strict` in a child process.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
import unicodedata
from pathlib import Path
from types import ModuleType

import pytest

from ticdc_sync.commands.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
README = REPO / "README.md"
SCHEMA = REPO / "ticdc_sync" / "schemas" / "project.schema.json"
COMMANDS_PAGE = DOCS / "commands.md"
README_MAX_LINES = 300
# In docs/ but not a page of the site (mkdocs.yml `exclude_docs`).
NOT_PAGES = {"TEAM.md"}


def _gen_keys() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_keys", DOCS / "gen_keys.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if p.name not in NOT_PAGES)


# --- the schema's keys --------------------------------------------------------------------


def undocumented_keys(schema: dict) -> list[str]:
    """JSON pointers of the keys (`properties`, and every definition) whose description is
    empty, neither their own nor that of the definition they `$ref`. The `not` schemas under
    `allOf` (a key not allowed for a transport type) are rules, not keys."""
    defs = schema.get("$defs", {})

    def described(node: dict) -> bool:
        if str(node.get("description", "")).strip():
            return True
        ref = node.get("$ref", "")
        target = defs.get(ref.rsplit("/", 1)[-1]) if ref.startswith("#/$defs/") else None
        return bool(target and str(target.get("description", "")).strip())

    missing: list[str] = []

    def walk(node: object, pointer: str) -> None:
        if isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{pointer}/{i}")
            return
        if not isinstance(node, dict):
            return
        for key, child in node.items():
            if key == "allOf":
                continue
            if key in ("properties", "$defs") and isinstance(child, dict):
                for name, sub in child.items():
                    if isinstance(sub, dict) and not described(sub):
                        missing.append(f"{pointer}/{key}/{name}")
            walk(child, f"{pointer}/{key}")

    walk(schema, "#")
    return missing


def test_every_key_of_the_schema_has_a_description() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert undocumented_keys(schema) == [], (
        f"add a `description` to these keys of {SCHEMA.relative_to(REPO)}, "
        "then run python docs/gen_keys.py"
    )


def test_a_key_without_description_is_found() -> None:
    schema = {
        "$defs": {
            "thing": {"type": "object", "description": "A thing."},
            "bare": {"type": "string"},
            "file": {
                "type": "object",
                "description": "A file.",
                "properties": {
                    "ok": {"type": "string", "description": "Fine."},
                    "empty": {"type": "string", "description": " "},
                    "by_ref": {"$ref": "#/$defs/thing"},
                    "bare_ref": {"$ref": "#/$defs/bare"},
                    "nested": {
                        "type": "object",
                        "description": "Nested.",
                        "properties": {"inner": {"type": "integer"}},
                    },
                },
            },
        }
    }
    assert undocumented_keys(schema) == [
        "#/$defs/bare",
        "#/$defs/file/properties/empty",
        "#/$defs/file/properties/bare_ref",
        "#/$defs/file/properties/nested/properties/inner",
    ]


def test_keys_page_is_what_the_generator_makes_of_the_schema() -> None:
    gen = _gen_keys()
    expected = gen.render(json.loads(SCHEMA.read_text(encoding="utf-8")))
    page = DOCS / "reference" / "keys.md"
    assert page.read_text(encoding="utf-8") == expected, (
        f"{page.relative_to(REPO)} is stale: run python docs/gen_keys.py"
    )
    # Deterministic: the same schema gives the same bytes.
    assert gen.render(json.loads(SCHEMA.read_text(encoding="utf-8"))) == expected


def test_keys_page_lists_every_key_of_the_schema() -> None:
    text = (DOCS / "reference" / "keys.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([^`]+)` \|", text, flags=re.M))
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    for name in ("project_file", "sources_file", "tables_file"):
        for key in schema["$defs"][name]["properties"]:
            assert key in rows, key
    for key, sub in (("sources[]", "source"), ("tables[]", "table")):
        for name in schema["$defs"][sub]["properties"]:
            assert f"{key}.{name}" in rows, f"{key}.{name}"
    for name in schema["$defs"]["output"]["properties"]:
        assert f"<profile>.outputs.<target>.{name}" in rows, name
    for name in schema["$defs"]["ddl_policy"]["properties"]:
        assert name in rows, name


def test_the_generator_refuses_a_key_without_description() -> None:
    gen = _gen_keys()
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    del schema["$defs"]["project_file"]["properties"]["profile"]["description"]
    with pytest.raises(gen.SchemaDocError, match="profile"):
        gen.render(schema)


# --- the commands page --------------------------------------------------------------------


def cli_words(parser: argparse.ArgumentParser) -> list[str]:
    """`ticdc-sync COMMAND` for every command, and every option string (`--out`, `-v`) of the
    program and of each command, walked from the argparse parser itself."""
    words: list[str] = []

    def options(p: argparse.ArgumentParser) -> None:
        for action in p._actions:
            for opt in action.option_strings:
                if opt not in ("-h", "--help") and opt not in words:
                    words.append(opt)

    options(parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                words.append(f"ticdc-sync {name}")
                options(sub)
    return words


def unmentioned(words: list[str], text: str) -> list[str]:
    """The words that do not occur in `text` as a whole word (`--out` not inside `--outer`)."""
    return [w for w in words if not re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", text)]


def test_every_command_and_flag_is_on_the_commands_page() -> None:
    words = cli_words(build_parser())
    assert "ticdc-sync run" in words and "--follow" in words and "--verbose" in words
    missing = unmentioned(words, COMMANDS_PAGE.read_text(encoding="utf-8"))
    assert missing == [], f"document these in {COMMANDS_PAGE.relative_to(REPO)}"


def test_an_undocumented_flag_or_command_is_found() -> None:
    parser = argparse.ArgumentParser(prog="ticdc-sync")
    parser.add_argument("--debug", action="store_true")
    sub = parser.add_subparsers()
    p = sub.add_parser("run")
    p.add_argument("--follow", action="store_true")
    p.add_argument("-x", "--explode", action="store_true")
    sub.add_parser("frobnicate")
    text = "`ticdc-sync run --follow`, `--debug`, `--exploded`"
    assert unmentioned(cli_words(parser), text) == ["-x", "--explode", "ticdc-sync frobnicate"]


# --- links and anchors --------------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"\[[^\]]*\]\(([^()\s]+)\)")
_CODE = re.compile(r"`[^`]*`")


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code."""
    out, fenced = [], False
    for number, line in enumerate(text.split("\n"), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, line))
    return out


def _heading_text(raw: str) -> str:
    """A heading's text as rendered: code spans keep their text, links their label."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    out = []
    for i, part in enumerate(re.split(r"`([^`]*)`", text)):
        if i % 2 == 0:  # outside code: drop emphasis marks (not intraword `_`) and escapes
            part = re.sub(r"\\(.)", r"\1", part)
            part = re.sub(r"\*{1,2}([^*]+)\*{1,2}", r"\1", part)
            part = re.sub(r"(?<!\w)_{1,2}([^_]+)_{1,2}(?!\w)", r"\1", part)
        out.append(part)
    return "".join(out)


def mkdocs_slug(text: str) -> str:
    """Python-Markdown's toc slugify, which MkDocs uses for heading ids."""
    value = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    value = re.sub(r"[^\w\s-]", "", value).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


def github_slug(text: str) -> str:
    """GitHub's heading ids: lower case, punctuation dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(text: str) -> tuple[set[str], set[str]]:
    """The heading ids of a Markdown text: (MkDocs's, GitHub's), duplicates numbered as each
    numbers them (`x_1`, `x-1`)."""
    mk: set[str] = set()
    gh: set[str] = set()
    gh_seen: dict[str, int] = {}
    for _, line in _prose_lines(text):
        m = _HEADING.match(line)
        if not m:
            continue
        title = _heading_text(m.group(2))
        slug = mkdocs_slug(title)
        if slug in mk or not slug:
            n = 1
            while f"{slug}_{n}" in mk:
                n += 1
            slug = f"{slug}_{n}"
        mk.add(slug)
        base = github_slug(title)
        n = gh_seen.get(base, 0)
        gh.add(base if n == 0 else f"{base}-{n}")
        gh_seen[base] = n + 1
    return mk, gh


def broken_links(files: list[Path], root: Path) -> list[str]:
    """`file:line: target (why)` for each relative link (outside code) whose file is missing,
    or whose `#anchor` is not a heading of the Markdown file it names."""
    problems: list[str] = []
    for path in files:
        for number, line in _prose_lines(path.read_text(encoding="utf-8")):
            for target in _LINK.findall(_CODE.sub(lambda m: " " * len(m.group(0)), line)):
                if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
                    continue  # a URL (http:, mailto:) or an absolute path: not ours to check
                file, _, anchor = target.partition("#")
                dest = (path.parent / file).resolve() if file else path
                where = f"{path.relative_to(root)}:{number}: {target}"
                if not dest.exists():
                    problems.append(f"{where} (no such file)")
                    continue
                if not anchor:
                    continue
                if dest.suffix != ".md":
                    problems.append(f"{where} (an anchor into a file that is not Markdown)")
                    continue
                mk, gh = anchors(dest.read_text(encoding="utf-8"))
                if anchor not in mk:
                    problems.append(f"{where} (no heading with MkDocs id {anchor!r})")
                elif anchor not in gh:
                    problems.append(f"{where} (no heading with GitHub id {anchor!r})")
    return problems


def test_links_and_anchors_in_readme_and_docs_resolve() -> None:
    assert broken_links([README, *_pages()], REPO) == []


def test_a_broken_link_or_anchor_is_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(
        "# A page\n\n## `ticdc_sync.yml`\n\n## Object storage (S3, ADLS, GCS)\n\n"
        "## Object storage (S3, ADLS, GCS)\n\n```\n# not a heading\n```\n"
    )
    (tmp_path / "README.md").write_text(
        "# R\n\n"
        "[ok](docs/a.md#ticdc_syncyml) [ok](docs/a.md#object-storage-s3-adls-gcs) [ok](#r)\n"
        "[gone](docs/b.md) [bad anchor](docs/a.md#nope) [code only](docs/a.md#not-a-heading)\n"
        "[mkdocs only](docs/a.md#object-storage-s3-adls-gcs_1) [url](https://x.invalid/#y)\n"
        "`[in code](docs/missing.md)`\n"
    )
    assert broken_links([tmp_path / "README.md"], tmp_path) == [
        "README.md:4: docs/b.md (no such file)",
        "README.md:4: docs/a.md#nope (no heading with MkDocs id 'nope')",
        "README.md:4: docs/a.md#not-a-heading (no heading with MkDocs id 'not-a-heading')",
        "README.md:5: docs/a.md#object-storage-s3-adls-gcs_1 "
        "(no heading with GitHub id 'object-storage-s3-adls-gcs_1')",
    ]


# --- the front page -----------------------------------------------------------------------


def test_readme_is_a_front_page_that_links_every_page() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines: keep it a front page (<= {README_MAX_LINES}) and move "
        "reference text to docs/"
    )
    linked = {
        (REPO / target.partition("#")[0]).resolve()
        for _, line in _prose_lines(text)
        for target in _LINK.findall(line)
    }
    unlinked = [str(p.relative_to(REPO)) for p in _pages() if p.resolve() not in linked]
    assert unlinked == [], "README.md's 'where to go next' should link these pages"
    for command in ("./scripts/example.sh", "./scripts/test.sh"):
        assert command in text


# --- the site -----------------------------------------------------------------------------


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None,
    reason="mkdocs is not installed (it is in the dev extras: pip install -e '.[dev]')",
)
def test_mkdocs_builds_the_site_with_no_warning(tmp_path: Path) -> None:
    site = tmp_path / "site"
    # Not --quiet: it drops warnings before --strict counts them (mkdocs 1.6).
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert (site / "index.html").is_file()
    for page in _pages():
        rel = page.relative_to(DOCS).with_suffix("")
        assert (site / rel / "index.html").is_file(), rel
