"""Saved plans (`plan --out FILE --format json`, then `run --plan FILE`), as Terraform does.

A saved plan is executed only if the plan made now, from the same project files and the
warehouse as it is now, is the plan that was saved: anything else (an edited file, a run in
between, a plan edited by hand) is refused, naming what differs. Pure Python.
"""

from __future__ import annotations

import json
from typing import Any

from ticdc_sync.core.errors import UserError
from ticdc_sync.plan.model import FORMAT_VERSION, Plan
from ticdc_sync.plan.render import fingerprint, plan_dict

MAX_SHOWN = 12


def load_saved(text: str, where: str) -> dict[str, Any]:
    try:
        saved = json.loads(text)
    except ValueError as e:
        raise UserError(
            f"{where}: not a saved plan ({e}) (hint: write one with "
            "`ticdc-sync plan --format json --out FILE`)"
        ) from None
    if not isinstance(saved, dict) or "fingerprint" not in saved:
        raise UserError(
            f"{where}: not a saved plan (hint: write one with `ticdc-sync plan --format json "
            "--out FILE`)"
        )
    if saved.get("format_version") != FORMAT_VERSION:
        raise UserError(
            f"{where}: plan format {saved.get('format_version')!r}, this ticdc-sync reads "
            f"{FORMAT_VERSION} (hint: make the plan again with this version)"
        )
    return saved


def check_saved(saved: dict[str, Any], fresh: Plan, where: str) -> None:
    """Raise a UserError naming what changed unless `fresh` is the saved plan."""
    now = plan_dict(fresh)
    edited = fingerprint(saved) != saved.get("fingerprint")
    if now == saved:
        return
    lines = []
    if edited:
        lines.append(f"{where} was edited after it was made (its fingerprint does not match)")
    if saved.get("project_digest") != now["project_digest"]:
        lines.append("the project files changed since the plan was made")
    diffs = list(_diff(saved, now, ""))
    for path, a, b in diffs[:MAX_SHOWN]:
        lines.append(f"{path}: planned {_short(a)}, now {_short(b)}")
    if len(diffs) > MAX_SHOWN:
        lines.append(f"... and {len(diffs) - MAX_SHOWN} more difference(s)")
    raise UserError(
        f"{where}: the saved plan is not what a plan made now would do; nothing was run:\n"
        + "\n".join(f"  {x}" for x in lines)
        + "\n(hint: make and review the plan again: `ticdc-sync plan --format json --out FILE`)"
    )


def _diff(a: Any, b: Any, path: str):
    if path in ("fingerprint",):
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k == "fingerprint" and not path:
                continue
            yield from _diff(a.get(k), b.get(k), f"{path}.{k}" if path else k)
        return
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            name = x.get("name") if isinstance(x, dict) else None
            yield from _diff(x, y, f"{path}[{name or i}]")
        return
    if a != b:
        yield path, a, b


def _short(v: Any) -> str:
    text = json.dumps(v, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."


def hold_unreviewed(plan: Plan, saved: dict[str, Any], memo: dict | None = None) -> Plan:
    """`plan` limited to what the saved plan showed: DDL staged after it was made waits
    (its target's rows stop just before it), and targets it did not show are not touched;
    the next plan shows them for review. `memo`: kept by a caller that holds plan after
    plan back (a run's re-plans): a target's plan that is the one held last time is not
    looked at again."""
    from dataclasses import replace

    from ticdc_sync.plan.model import HELD, READY, Create
    from ticdc_sync.plan.target import with_steps

    memo = {} if memo is None else memo
    if "reviewed" not in memo:
        memo["reviewed"] = {
            t["name"]: {d["commit_ts"] for d in t.get("ddl", [])} for t in saved.get("targets", [])
        }
        memo["held"] = {}
    reviewed = memo["reviewed"]
    done: dict[str, tuple[Any, Any]] = memo["held"]  # target -> (its plan, held)
    targets = []
    for t in plan.targets:
        if t.name not in reviewed:
            continue
        last = done.get(t.name)
        if last is not None and last[0] is t:
            targets.append(last[1])
            continue
        ddl = []
        stop = t.stop_ts
        for d in t.ddl:
            if d.status == READY and d.commit_ts not in reviewed[t.name]:
                d = replace(d, status=HELD, reason="staged after the saved plan was made")
                if stop is not None and stop >= d.commit_ts:
                    stop = d.commit_ts - 1
            ddl.append(d)
        held = replace(t, ddl=tuple(ddl), stop_ts=stop)
        if held != t:
            # The steps and columns follow the held DDL and the earlier stop.
            sp = plan.source_plan(t.source)
            assert sp is not None
            props = next((s.properties for s in t.steps if isinstance(s, Create)), ())
            held = with_steps(held, sp.timeline, props)
        done[t.name] = (t, held)
        targets.append(held)
    return replace(plan, targets=tuple(targets))
