"""`status` as text: one line per target, the blocked DDL, what pending and waiting mean,
and values with tabs or line breaks kept on one line."""

from __future__ import annotations

from ticdc_sync.commands.status import format_rows, render


def target(name: str, **kw) -> dict:
    base = {
        "name": name,
        "applied_ts": 445644800028999106,
        "applied_at": "2023-11-14 22:13:20.110Z",
        "current_at": "2023-11-14 22:13:20.110Z",
        "staleness_seconds": 1.5,
        "target_lag_seconds": 60.0,
        "over_lag": False,
        "pending_events": 0,
        "waiting_events": 0,
        "quarantined": 0,
        "blocked": None,
        "blocked_ddl": None,
    }
    return {**base, **kw}


def test_render_explains_pending_waiting_and_the_blocked_ddl() -> None:
    rep = {
        "targets": [
            target(
                "orders", pending_events=2, waiting_events=1, staleness_seconds=75.0, over_lag=True
            ),
            target(
                "items",
                blocked="narrow_column blocked",
                blocked_ddl={
                    "commit_ts": 445644800022034230,
                    "where": "shop_canal/0/17",
                    "sql": "ALTER TABLE items\nMODIFY qty INT",
                    "reason": "narrowing bigint -> int",
                    "setting": "ddl.narrow_column: rebuild on tables/shop.yml:4",
                },
            ),
        ],
        "sources": {
            "canal": {
                "resolved_ts": 445644800028999106,
                "resolved_at": "2023-11-14 22:13:20.110Z",
                "staging_lag_seconds": 2.0,
            }
        },
        "over_lag": ["orders"],
        "consistent_read": {
            "tso": 445644800022034229,
            "at": "2023-11-14 22:13:20.000Z",
            "held_by": "target items: DDL at commit_ts 445644800022034230 not applied yet",
            "absent": {"clients": "shop.clients created at TSO 445644800030000000"},
        },
        "quarantined_total": 3,
        "run_lease": {"state": "released", "summary": "released by db1 pid 7 at 2026-11-26"},
    }
    lines = render(rep).splitlines()
    assert lines[1].split() == [
        "orders",
        "445644800028999106",
        "2023-11-14",
        "22:13:20.110Z",
        "75.0s!",
        "60.0s",
        "2",
        "1",
        "0",
    ]
    assert lines[2].split()[4:6] == ["1.5s", "60.0s"]
    assert (
        "source canal: resolved ts 445644800028999106 (2023-11-14 22:13:20.110Z), staging lag 2.0s"
    ) in lines
    assert (
        "consistent read: up to TSO 445644800022034229 (2023-11-14 22:13:20.000Z), held by "
        "target items: DDL at commit_ts 445644800022034230 not applied yet (`ticdc-sync "
        "snapshot`, the as_of reader)"
    ) in lines
    assert (
        "  absent then (no upstream table; a read leaves it out): clients: shop.clients created "
        "at TSO 445644800030000000"
    ) in lines
    assert any(ln.startswith("over their target_lag (!): orders: ") for ln in lines)
    assert (
        "blocked: items at commit_ts 445644800022034230 (shop_canal/0/17): ALTER TABLE "
        "items\\nMODIFY qty INT: narrowing bigint -> int (hint: ddl.narrow_column: rebuild on "
        "tables/shop.yml:4)"
    ) in lines
    assert lines[-4] == "quarantined records in total: 3"
    assert lines[-3].startswith("pending: staged changes the next run applies; waiting: ")
    assert lines[-2] == "list them with `ticdc-sync status --quarantine N`"
    assert lines[-1] == "run lease: released by db1 pid 7 at 2026-11-26"


def test_rows_with_tabs_and_newlines_stay_on_one_line() -> None:
    text = format_rows(["id", "note"], [[1, "a\tb\nc\\d"], [2, None]])
    assert text.splitlines() == [
        "id | note",
        "---+-----------",
        "1  | a\\tb\\nc\\\\d",
        "2  | NULL",
    ]
