"""Every tensor of a plan, computed by fbnops: the shapes, dtypes and values a target's program needs."""

from __future__ import annotations

import numpy as np

from fbnops.framework.session import Session

from ._plan import ExportPlan


def plan_values(plan: ExportPlan) -> dict[str, np.ndarray]:
    """``{"op:i": value}`` for every output of every op of ``plan`` (placeholders: their feeds)."""
    feeds = {name: plan.arrays[path] for name, path in plan.feeds.items()}
    wanted = [t.name for op in plan.ops if op.type != "Placeholder" for t in op.outputs]
    got = dict(zip(wanted, Session(plan.graph).run(wanted, feeds) if wanted else [], strict=True))
    for name, value in feeds.items():  # bfloat16 crosses the files as float32; the tensor is bfloat16
        got[f"{name}:0"] = np.asarray(value).astype(plan.graph.get_operation(name).attrs["dtype"])
    return got
