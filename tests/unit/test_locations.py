"""Target folder names: safe, distinct, without `%` (which Delta readers decode once too
often), and a target at the folder name an earlier version gave it is still found there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ticdc_sync.warehouse.locations import (
    find_target,
    legacy_path_segment,
    path_segment,
    target_location,
)

HOSTILE = [
    "orders",
    "Orders",
    "odd name",
    "odd%20name",
    "odd~20name",
    "~",
    "%",
    "../etc",
    "..",
    ".",
    "",
    ".hidden",
    "a/b",
    "a\\b",
    "ünï`x",
    "名前",
    "tab\there",
    "nul\x00x",
    "\x00",
    "a b.c",
]


@pytest.mark.parametrize("name", HOSTILE)
def test_a_folder_name_is_one_safe_segment_without_percent(name: str) -> None:
    seg = path_segment(name)
    assert seg and "%" not in seg and "/" not in seg and "\\" not in seg
    assert not seg.startswith(".")
    assert all(ch.isascii() and (ch.isalnum() or ch in "_.-~") for ch in seg), seg


def test_distinct_names_get_distinct_folders() -> None:
    assert len({path_segment(n) for n in HOSTILE}) == len(set(HOSTILE))
    # The escape character itself is escaped, so no name can spell another's escape.
    assert path_segment("odd~20name") != path_segment("odd name")
    assert path_segment("odd name") == "odd~20name"
    assert path_segment("~") == "~7E"


@pytest.mark.parametrize("name", HOSTILE)
def test_nothing_escapes_the_warehouse(tmp_path: Path, name: str) -> None:
    wh = tmp_path / "wh"
    loc = target_location(str(wh), name)
    assert os.path.realpath(loc).startswith(os.path.realpath(wh / "tables") + os.sep)


def test_safe_names_are_where_they_always_were() -> None:
    for name in ("orders", "canal_orders", "a-b.c_d", "Orders2"):
        assert path_segment(name) == legacy_path_segment(name) == name


def test_a_target_at_its_old_folder_name_is_found_there(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    tables: set[str] = set()
    exists = tables.__contains__
    new = target_location(wh, "odd name")
    old = f"{wh}/tables/odd%20name"
    assert legacy_path_segment("odd name") == "odd%20name"
    # A new warehouse: the new folder name.
    assert find_target(wh, "odd name", exists) == new
    # A warehouse an earlier version wrote: the table stays where it is.
    tables.add(old)
    assert find_target(wh, "odd name", exists) == old
    # Both exist (the old one copied by hand, say): the new one wins.
    tables.add(new)
    assert find_target(wh, "odd name", exists) == new
    # A safe name never looks anywhere else.
    assert find_target(wh, "orders", lambda _: False) == f"{wh}/tables/orders"
