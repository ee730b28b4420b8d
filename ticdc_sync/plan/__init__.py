"""The plan: every decision of a run, made once, shown for review and executed as shown.

- `build`: project + warehouse state -> `Plan` (routes, keys, DDL timeline, decisions,
  Delta commits, where each target's rows stop), from its parts: `target` (one target's
  plan), `target_ddl` (its DDL with decisions), `ddl_parts` (a decided change's Delta
  commits), `features` (table features), `loads` (initial loads from Dumpling exports),
  `project_parts` (output, defaults, routes, overrides, digest). Its `Planner` makes the
  plan again as a run's state changes, deciding again only what the change touched.
- `model`: the Plan's dataclasses.
- `render`: text (like `terraform plan`) and JSON.
- `saved`: `run --plan FILE` refuses a saved plan that is not what a plan made now does.

Pure Python: never imports pyspark.
"""

from ticdc_sync.plan.build import Planner, build_plan
from ticdc_sync.plan.model import Plan, TargetPlan
from ticdc_sync.plan.project_parts import display_location, project_digest
from ticdc_sync.plan.render import plan_dict, render_json, render_text
from ticdc_sync.plan.saved import check_saved, load_saved

__all__ = [
    "Plan",
    "Planner",
    "TargetPlan",
    "build_plan",
    "check_saved",
    "display_location",
    "load_saved",
    "plan_dict",
    "project_digest",
    "render_json",
    "render_text",
]
