"""How the hf stack runs a plan's data parallelism (DP_ENGINE_BY_PLAN_STACKS): the rule both the
launch configuration (launch/hf.py) and the models that depend on the engine
(models/memory/accumulation_note.py) read."""

from __future__ import annotations

from typing import Literal

from vramplan.models.core.setup import Plan

HfEngine = Literal["plain", "fsdp", "distributed", "deepspeed"]


def hf_engine(plan: Plan) -> HfEngine:
    """How the hf stack runs the plan's data parallelism: plain, fsdp, distributed (sharded at load) or deepspeed."""
    if plan.num_gpus == 1:
        return "deepspeed" if plan.zero >= 1 else "plain"
    if plan.tp > 1 or plan.ep > 1:
        loads_sharded = plan.zero == 3 or (plan.zero == 0 and plan.dp == 1)
        if loads_sharded and plan.cp == 1 and plan.offload != "optimizer" and (plan.tp == 1 or plan.ep == 1):
            return "distributed"
        return "deepspeed"
    if plan.zero >= 2 and plan.offload != "optimizer":
        return "fsdp"
    return "deepspeed" if plan.zero >= 1 or plan.cp > 1 else "plain"
