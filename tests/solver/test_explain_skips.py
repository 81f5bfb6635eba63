"""Fixes the explanation need not solve: a query within one that nothing fits has nothing to fit.

restrictions.within says when every plan of one query is a plan of another; explain.mitigations
skips each fix within the proven conflict (the user's conflicting restrictions alone) and, after
one question, every "more GPUs" count when no count up to the largest fits. The fixes reported
must be those of solving every fix, with fewer solves."""

from __future__ import annotations

import pytest
from helpers.catalogue import packaged_catalogue

from vramplan.models.core.setup import Job
from vramplan.solver.api import plan_exists, solve
from vramplan.solver.explain import mitigations
from vramplan.solver.query import Pins, SolveQuery
from vramplan.solver.restrictions import only_restrictions, relaxed_query, within
from vramplan.solver.space_build import build_space

BASE = SolveQuery(model="llama-3.1-8b", gpus=("l40s-48gb",), max_gpus=8, pins=Pins(zero=1))


@pytest.mark.parametrize(("update", "inside"), [
    ({}, True),
    ({"gpus": ("l40s-48gb", "h100-sxm-80gb")}, False),  # a GPU the bound does not allow
    ({"gpus": ()}, False),  # no GPUs named: every GPU
    ({"max_gpus": 16}, False),
    ({"max_gpus": 4}, True),
    ({"max_nodes": 1}, True),
    ({"pins": Pins()}, False),  # the bound's ZeRO pin dropped
    ({"pins": Pins(zero=1, recompute="full")}, True),
    ({"pins": Pins(zero=2)}, False),
    ({"providers": ("aws",)}, False),  # providers decide the offerings (list/ rows need --provider list)
    ({"pricing": "spot"}, False),
    ({"budget_usd": 100.0}, True),
    ({"global_batch": 64}, False),
    ({"job": Job(method="lora")}, False),
    ({"objective": "time", "top_k": 3}, True),  # what is optimised does not change what fits
])
def test_within_holds_exactly_when_every_restriction_of_the_bound_is_kept(update, inside) -> None:
    assert within(BASE.model_copy(update=update), BASE) is inside


def test_within_a_budget_and_node_limit_needs_them_at_most_as_large() -> None:
    bound = BASE.model_copy(update={"budget_usd": 100.0, "max_nodes": 2})
    assert within(BASE.model_copy(update={"budget_usd": 50.0, "max_nodes": 1}), bound)
    assert not within(BASE.model_copy(update={"budget_usd": 150.0, "max_nodes": 1}), bound)
    assert not within(BASE.model_copy(update={"budget_usd": 50.0}), bound)  # no node limit: more nodes
    assert within(BASE, relaxed_query(BASE))  # every query is within its relaxed query


# Gemma 2 9B LoRA at 8k (the batch benchmark's row job-1800) on DeepSpeed: its 256k-vocabulary
# logits make one sequence's activations too large for an L40S at any count (DeepSpeed trains LoRA
# data-parallel and sharded only, catalogues/stack_capabilities.csv), so the GPU type alone is the
# conflict; the GPU limit of 8 is not. (The hf stack fits it with TP: PEFT under a tp_plan.)
QUERY = SolveQuery(model="gemma-2-9b", job=Job(method="lora", seq_len=8192, stack="deepspeed"), gpus=("l40s-48gb",),
                   max_gpus=8)
CONFLICT = only_restrictions(QUERY, ["--gpu l40s-48gb"])


def _counting_solver(asked: list[SolveQuery]):
    def solve_one(query: SolveQuery):
        asked.append(query)
        result = solve(packaged_catalogue(), query.model_copy(update={"top_k": 1}), explain_infeasible=False)
        return result.plans[0] if result.plans else None
    return solve_one


def test_fixes_within_the_proven_conflict_or_a_count_cover_are_not_solved(catalogue) -> None:
    assert solve(catalogue, QUERY).status == "infeasible" and not plan_exists(catalogue, CONFLICT)
    space = build_space(catalogue, QUERY)
    every: list[SolveQuery] = []
    reference = mitigations(QUERY, space, catalogue, _counting_solver(every))
    more = [q for q in every if q.pins.num_gpus is not None]
    assert [q.pins.num_gpus for q in more] == [16, 32, 64, 128]  # up to the global batch of 128; none fits

    asked: list[SolveQuery] = []
    skipped = mitigations(QUERY, space, catalogue, _counting_solver(asked), conflict=CONFLICT)
    assert skipped == reference
    assert all(q.pins.num_gpus is None for q in asked)  # every count is within the conflict
    assert len(asked) == len(every) - len(more)

    # Without the conflict, one question about every count up to the largest does the same.
    questions: list[SolveQuery] = []

    def fits(query: SolveQuery) -> bool:
        questions.append(query)
        return plan_exists(catalogue, query)
    asked = []
    assert mitigations(QUERY, space, catalogue, _counting_solver(asked), fits) == reference
    assert [(q.max_gpus, q.pins.num_gpus) for q in questions] == [(128, None)]
    assert len(asked) == len(every) - len(more)
    fixes = {m.change.split(" (")[0]: m.fits for m in reference}
    assert fixes["bigger GPUs"] and not fixes.get("more GPUs", False)


def test_a_count_that_fits_is_still_found_after_the_cover_question(catalogue) -> None:
    # Llama 3.1 8B full fine-tune on at most 2 L4s without offload: 8 of them fit (TP x PP).
    query = SolveQuery(model="llama-3.1-8b", gpus=("l4-24gb",), max_gpus=2, pins=Pins(offload="none"))
    space = build_space(catalogue, query)
    assert solve(catalogue, query).status == "infeasible"
    reference = mitigations(query, space, catalogue, _counting_solver([]))
    found = mitigations(query, space, catalogue, _counting_solver([]), lambda q: plan_exists(catalogue, q))
    assert found == reference
    assert [m.change for m in found if m.change.startswith("more GPUs")] == ["more GPUs (8)"]
