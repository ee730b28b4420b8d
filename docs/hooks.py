"""MkDocs hooks: the repository's README.md is the site's home page, and links between the
README, docs/ and benchmarks/README.md work both on the site and when the files are read in
the repository.

The Markdown files are written for the repository: README.md links `docs/commands.md`, a page
in docs/ links `../benchmarks/README.md`. MkDocs sees only docs/, so this hook adds the two
files outside it as pages (`REPO_PAGES`) and rewrites each relative link to the page it names
on the site. A link to any other file outside docs/ is left as it is, and `mkdocs build
--strict` fails on it: link only files the site has.

It must not change any text but link targets, and it reads nothing but the files it adds.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

# repository path -> the page's path on the site (relative to docs/)
REPO_PAGES = {
    "README.md": "index.md",
    "benchmarks/README.md": "benchmark-figures.md",
}

# `[text](target)`: the target has no spaces and no parentheses (ours never do).
_LINK = re.compile(r"(\]\()([^()\s]+)(\))")
_FENCE = re.compile(r"^(```|~~~)")


def _repo_root(config: MkDocsConfig) -> Path:
    return Path(config.config_file_path).resolve().parent


def on_files(files: Files, config: MkDocsConfig) -> Files:
    root = _repo_root(config)
    for repo_path, site_path in sorted(REPO_PAGES.items()):
        text = (root / repo_path).read_text(encoding="utf-8")
        files.append(File.generated(config, site_path, content=text))
    return files


def _site_target(origin: str, target: str, docs: str) -> str | None:
    """The site path (relative to docs/) of a relative link in repository file `origin`, or
    None when it does not name a file of the site."""
    path = posixpath.normpath(posixpath.join(posixpath.dirname(origin), target))
    if path in REPO_PAGES:
        return REPO_PAGES[path]
    if path.startswith(docs + "/"):
        return path[len(docs) + 1 :]
    return None


def rewrite_links(markdown: str, origin: str, site_path: str, docs: str = "docs") -> str:
    """Rewrite the relative links of `origin` (a repository path) for its page at
    `site_path`; links in fenced code are left alone."""
    out = []
    fenced = False
    for line in markdown.split("\n"):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
        if not fenced:
            line = _LINK.sub(lambda m: _rewrite(m, origin, site_path, docs), line)
        out.append(line)
    return "\n".join(out)


def _rewrite(m: re.Match[str], origin: str, site_path: str, docs: str) -> str:
    target = m.group(2)
    if "://" in target or target.startswith(("#", "mailto:", "/")):
        return m.group(0)
    path, sep, anchor = target.partition("#")
    site = _site_target(origin, path, docs)
    if site is None:
        return m.group(0)
    rel = posixpath.relpath(site, posixpath.dirname(site_path) or ".")
    return f"{m.group(1)}{rel}{sep}{anchor}{m.group(3)}"


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    site_path = page.file.src_uri
    origins = {v: k for k, v in REPO_PAGES.items()}
    docs = Path(config.docs_dir).resolve().relative_to(_repo_root(config)).as_posix()
    origin = origins.get(site_path, f"{docs}/{site_path}")
    return rewrite_links(markdown, origin, site_path, docs)
