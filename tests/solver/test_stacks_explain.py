"""A search over several stacks that none answers is explained over all of them
(solver/stacks_explain.py): the smallest conflict of any stack, a change that fits on any stack
with its best plan, and no switch to a stack the search already had. Found by a metamorphic scan
of solve: `--stack any` answered with the first stack's (hf's) explanation alone."""

from __future__ import annotations

import pytest

from vramplan.models.core.choices import NOT_IN_ANY, STACKS
from vramplan.models.core.setup import Job
from vramplan.solver.api import solve
from vramplan.solver.query import Explanation, Mitigation, PlanChoice, SolveQuery
from vramplan.solver.stacks_explain import merged_explanation, stack_change

# Llama 3.1 70B full fine-tune at 8k on at most 32 RTX 4090s over every stack (`--stack any`): none has a plan
ANY = tuple(stack for stack in STACKS if stack not in NOT_IN_ANY)
QUERY = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=64, tokens=1e9, objective="cost",
                   gpus=("rtx4090-24gb",), max_gpus=32, stacks=ANY)


@pytest.fixture(scope="module")
def answer(catalogue):
    return solve(catalogue, QUERY)


def test_the_conflict_named_is_the_smallest_any_stack_has(catalogue, answer):
    e = answer.explanation
    assert answer.status == "infeasible" and not answer.plans
    assert e.conflicting_restrictions == ["--gpu rtx4090-24gb"]  # the hf stack's alone named --max-days 365 too
    assert e.summary.startswith("no plan on any of the 7 stacks searched (hf, deepspeed, megatron, torchtitan")
    lifted = solve(catalogue, QUERY.model_copy(update={"gpus": ()}), explain_infeasible=False)
    assert lifted.plans  # lifting it gives a plan


def test_a_change_fits_when_it_fits_on_any_stack_with_its_best_plan(catalogue, answer):
    by_change = {m.change: m for m in answer.explanation.mitigations}
    lora = by_change["LoRA instead of full fine-tuning (--method lora)"]
    direct = solve(catalogue, QUERY.model_copy(update={"job": QUERY.job.model_copy(update={"method": "lora"})}),
                   explain_infeasible=False)
    assert lora.fits and lora.objective_value == pytest.approx(direct.plans[0].objective_value)
    assert lora.plan.stack == direct.plans[0].plan.stack  # the hf stack's own explanation priced it there
    assert not any(stack_change(m.change, ANY) for m in answer.explanation.mitigations)  # none to a searched stack


def _explanation(conflicts: list[str], mitigations: list[Mitigation], smallest: str | None = None) -> Explanation:
    return Explanation(summary=f"conflicts {conflicts}", conflicting_restrictions=conflicts, mitigations=mitigations,
                       smallest_change=smallest)


def _fits(change: str, value: float, stack: str) -> Mitigation:
    plan = PlanChoice(gpu="h100-sxm-80gb", offering="x/y", num_gpus=8, dp=8, zero=3, recompute="full",
                      precision="bf16", micro_batch=1, grad_accum=1, optimizer="adamw", attention="flash",
                      kernels="eager", offload="none", method="full", stack=stack, seq_len=8192)
    return Mitigation(change=change, fits=True, plan=plan, objective_value=value)


def test_the_merge_rules():
    hf = _explanation(["--gpu a", "--max-days 365"], [Mitigation(change="LoRA", fits=False),
                                                         _fits("bigger GPUs", 900.0, "hf"),
                                                         _fits("the megatron stack (--stack megatron)", 100.0, "megatron")])
    megatron = _explanation(["--gpu a"], [_fits("LoRA", 500.0, "megatron"), _fits("bigger GPUs", 800.0, "megatron")])
    merged = merged_explanation(("hf", "megatron"), [("hf", hf), ("megatron", megatron)], "cost")
    assert merged.conflicting_restrictions == ["--gpu a"] and "the smallest conflict is megatron's" in merged.summary
    changes = {m.change: m for m in merged.mitigations}
    assert set(changes) == {"LoRA", "bigger GPUs"}  # the switch to megatron, which was searched, is dropped
    assert changes["LoRA"].fits and changes["LoRA"].objective_value == 500.0
    assert changes["bigger GPUs"].objective_value == 800.0 and changes["bigger GPUs"].plan.stack == "megatron"
    assert merged.smallest_change == "LoRA"  # megatron's own had none: the first change that fits
    # throughput: the higher value is the better plan
    merged = merged_explanation(("hf", "megatron"), [("hf", hf), ("megatron", megatron)], "throughput")
    assert {m.change: m.objective_value for m in merged.mitigations}["bigger GPUs"] == 900.0
    # a stack the limits left unexplained is named, and the answer stays a merge of the others
    merged = merged_explanation(("hf", "megatron", "torchtitan"), [("hf", hf), ("megatron", megatron)],
                                "cost", ("hf", "megatron", "torchtitan"))
    assert "no plan on any of the 3 stacks searched" in merged.summary
    assert "(the limits ran out before torchtitan explained)" in merged.summary
