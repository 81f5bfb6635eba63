"""Conflicting restrictions when the conflict model's answer needs model parallelism.

The conflict model (solver/restrictions.py) enumerates the least parallel layouts only, so for a
model that fits only with TP x PP it can name a restriction the full space meets: Llama 3.1 70B
at 8k on RTX 4090s alone "conflicts" on data parallelism, yet 64 of them fit with TP 4 x PP 8.
The explanation then asks the full space (explain.smallest_conflict): the real conflict is the
GPU type together with the GPU limit. Before, it reported no conflict at all. Up to 6
restrictions are searched so (at most 63 questions); more go to the conflict-set model."""

from __future__ import annotations

import pytest

from vramplan.commands.solve import solve_command
from vramplan.models.core.setup import Job
from vramplan.sheets.rows import INPUT_COLUMNS
from vramplan.solver.api import plan_exists, solve
from vramplan.solver.explain import smallest_conflict
from vramplan.solver.query import DEFAULT_MAX_GPUS, SolveQuery
from vramplan.solver.restrictions import only_restrictions, relaxed_query, restrictions_of

GPU, LIMIT = "--gpu rtx4090-24gb", "--max-gpus 4"
# Without the efficiency floor (--min-mfu 0 --max-days 0): the 64 RTX 4090s that hold the job sit in
# 8 RunPod pods on 100 Mbps, at 0.008% MFU (test_the_floor_names_itself_where_only_waiting_plans_fit).
QUERY = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), gpus=("rtx4090-24gb",), max_gpus=4, min_mfu=0,
                   max_days=0)


def test_the_conflict_of_a_model_parallel_job_is_found_on_the_full_space(catalogue) -> None:
    result = solve(catalogue, QUERY)
    assert result.status == "infeasible"
    assert result.explanation.conflicting_restrictions == [GPU, LIMIT]
    assert f"conflicting restrictions: {GPU}, {LIMIT}" in result.explanation.summary
    # Each alone leaves plans (the GPU type with TP x PP on more of them; four bigger GPUs), so the
    # set is the smallest: neither restriction is the conflict by itself.
    alone = {label: solve(catalogue, only_restrictions(QUERY, [label])) for label in (GPU, LIMIT)}
    assert {label: r.status for label, r in alone.items()} == {GPU: "optimal", LIMIT: "optimal"}
    plan = alone[GPU].plans[0].plan
    assert plan.gpu == "rtx4090-24gb" and plan.tp * plan.pp > 1


def test_the_floor_names_itself_where_only_waiting_plans_fit(catalogue) -> None:
    """With the default floor, the RTX 4090 plans that hold the job run at 0.008% MFU and take 18
    years: the GPU type conflicts with the floor, and the explanation says so."""
    result = solve(catalogue, QUERY.model_copy(update={"min_mfu": 0.05, "max_days": 365.0}))
    assert result.status == "infeasible"
    conflict = result.explanation.conflicting_restrictions
    assert GPU in conflict and {"--min-mfu 0.05", "--max-days 365"} & set(conflict), conflict


def _fake_solver(conflict: set[str], calls: list[frozenset[str]]):
    """A solve_one whose query is infeasible exactly when it keeps every label of `conflict`."""
    def solve_one(query: SolveQuery):
        kept = frozenset(r.label for r in restrictions_of(query))
        calls.append(kept)
        return None if conflict <= kept else object()
    return solve_one


FOUR = SolveQuery(model="llama-3.1-8b", job=Job(seq_len=2048), gpus=("l40s-48gb",), max_gpus=8,
                  pins={"zero": 1, "offload": "none"}, min_mfu=0, max_days=0)


@pytest.mark.parametrize(("conflict", "expected"), [
    ({"--max-gpus 8", "--zero 1"}, ["--max-gpus 8", "--zero 1"]),
    ({"--offload none"}, ["--offload none"]),
    ({"--gpu l40s-48gb", "--offload none"}, ["--gpu l40s-48gb", "--offload none"]),
    (set(), []),
])
def test_smallest_conflict_is_the_first_infeasible_subset_smallest_first(conflict, expected) -> None:
    seven = FOUR.model_copy(update={"providers": ("aws",), "min_mfu": 0.05, "max_days": 365})
    # gpu, provider, max-gpus, the default MFU floor and days, zero, offload: over the limit of 6
    assert len(restrictions_of(seven)) == 7
    assert smallest_conflict(seven, _fake_solver(conflict, [])) is None
    six = FOUR.model_copy(update={"min_mfu": 0.05, "max_days": 365})  # a batch row with two pins: searched
    assert len(restrictions_of(six)) == 6 and smallest_conflict(six, _fake_solver(conflict, [])) == expected
    labels = sorted(r.label for r in restrictions_of(FOUR))
    assert labels == ["--gpu l40s-48gb", "--max-gpus 8", "--offload none", "--zero 1"]
    calls: list[frozenset[str]] = []
    assert smallest_conflict(FOUR, _fake_solver(conflict, calls)) == expected
    assert all(len(a) <= len(b) for a, b in zip(calls, calls[1:]))  # smallest subsets first


def test_smallest_conflict_falls_back_to_all_after_every_smaller_subset() -> None:
    labels = sorted(r.label for r in restrictions_of(FOUR))
    calls: list[frozenset[str]] = []
    # Only all four together conflict: every smaller subset (1 + 4 + 6 + 4) is asked, and fits.
    found = smallest_conflict(FOUR, _fake_solver(set(labels), calls))
    assert found == labels
    assert len(calls) == 15 and frozenset() in calls and frozenset(labels) not in calls


# The batch benchmark's row job-5443: Qwen3-235B-A22B, full fine-tune at 8k on A10Gs, pinned to
# ZeRO-2 and selective recompute, at most 64 GPUs. The conflict-set model's set (least parallel
# layouts) held on the full space, so it named none; the subset search names the pair that
# alone leaves nothing to fit.
QWEN = SolveQuery(model="qwen3-235b-a22b", job=Job(seq_len=8192, stack="custom"), gpus=("a10g-24gb",), max_gpus=64,
                  objective="throughput", tokens=1e9, pins={"zero": 2, "recompute": "selective"}, min_mfu=0, max_days=0)


def test_four_restrictions_get_the_smallest_conflict_proven_on_the_full_space(catalogue) -> None:
    assert len(restrictions_of(QWEN)) == 4
    result = solve(catalogue, QWEN)
    assert result.status == "infeasible"
    pair = ["--gpu a10g-24gb", "--recompute selective"]
    assert result.explanation.conflicting_restrictions == pair
    assert f"conflicting restrictions: {', '.join(pair)}" in result.explanation.summary
    assert not plan_exists(catalogue, only_restrictions(QWEN, pair))
    assert all(plan_exists(catalogue, only_restrictions(QWEN, [label])) for label in pair)


@pytest.mark.parametrize("query", [
    QUERY,
    SolveQuery(model="mixtral-8x7b", job=Job(seq_len=4096), gpus=("a100-sxm-40gb",), max_gpus=8, pins={"offload": "none"},
               min_mfu=0, max_days=0),
])
def test_untimed_shape_tables_hold_the_same_points_without_step_times(catalogue, query: SolveQuery) -> None:
    """Without a budget or deadline the conflict model reads only memory and host RAM, so its
    shape tables skip the step times (candidates.shape_table(timed=False)): the same fitting
    points with the same memory and host RAM per shape, step_us 0."""
    from vramplan.solver.fitting import shape_table
    from vramplan.solver.restrictions import relaxed_query
    from vramplan.solver.space_build import build_space

    relaxed = build_space(catalogue, relaxed_query(query))
    timed, untimed = shape_table(relaxed, True), shape_table(relaxed, False)
    assert timed.keys() == untimed.keys() and sum(map(len, timed.values())) > 0
    for shape in timed:
        assert {inner: m._replace(step_us=0) for inner, m in timed[shape]} == dict(untimed[shape])
        assert all(m.step_us == 0 for _, m in untimed[shape]) and all(m.step_us > 0 for _, m in timed[shape])


# The batch benchmark's row job-9593: Llama 4 Scout, full fine-tune at 8k (global batch 128) on
# RTX 4090s or L4s, at most 8 GPUs, ZeRO-0 and no recompute pinned. The relaxed query used to cap
# the GPUs at the global batch (128, what data parallelism alone can use) and so named
# "--recompute none" alone; with the default limit of 512 GPUs that pin alone fits (pipeline x
# expert parallelism on 512 GPUs, as `vramplan solve --model llama-4-scout --seq-len 8192
# --recompute none` answers), and the conflict is the GPU types with the limit of 8.
SCOUT = SolveQuery(model="llama-4-scout", job=Job(seq_len=8192, stack="custom"), gpus=("rtx4090-24gb", "l4-24gb"), max_gpus=8,
                   objective="time", tokens=1e10, pins={"zero": 0, "recompute": "none"}, min_mfu=0, max_days=0)


def test_the_relaxed_query_keeps_the_default_gpu_limit_not_the_global_batch(catalogue) -> None:
    assert SCOUT.effective_global_batch == 128
    assert relaxed_query(SCOUT).max_gpus == 512
    assert "--max-gpus 256" in {r.label for r in restrictions_of(SCOUT.model_copy(update={"max_gpus": 256}))}
    assert "--max-gpus" not in " ".join(r.label for r in restrictions_of(SCOUT.model_copy(update={"max_gpus": 512})))
    recompute_alone = only_restrictions(SCOUT, ["--recompute none"])
    assert plan_exists(catalogue, recompute_alone)
    plan = solve(catalogue, recompute_alone).plans[0].plan
    assert plan.num_gpus > 128 and plan.recompute == "none"  # only model parallelism beyond the batch fits
    result = solve(catalogue, SCOUT)
    assert result.explanation.conflicting_restrictions == ["--gpu rtx4090-24gb,l4-24gb", "--max-gpus 8"]


def test_the_relaxed_gpu_limit_is_the_default_a_user_gets() -> None:
    """`vramplan solve` without --max-gpus and a batch row with an empty max_gpus search up to the
    same limit the explanations relax to (SolveQuery's default)."""
    option = next(p for p in solve_command.params if p.name == "max_gpus")
    assert option.default == DEFAULT_MAX_GPUS == SolveQuery(model="gpt2-124m", job=Job(seq_len=512)).max_gpus
    assert INPUT_COLUMNS["max_gpus"][0] == str(DEFAULT_MAX_GPUS)


def test_the_explanation_says_when_lifting_the_conflict_is_not_enough(catalogue) -> None:
    """A review of 2026-12-06: 405B on at most 8 A100s with `--recompute none` named `--max-gpus 8`
    as the conflict, and lifting it still left nothing (`--recompute none` alone conflicts too);
    the explanation now says so and names the smallest set whose lifting gives a plan
    (explain.smallest_lift), or the part of the conflict that is enough alone."""
    from vramplan.models.core.setup import Job as _Job
    from vramplan.solver.query import Pins

    base = SolveQuery(model="llama-3.1-405b", job=_Job(seq_len=8192), global_batch=64, tokens=1e9, gpus=("a100-sxm-80gb",),
                      max_gpus=8, pins=Pins(recompute="none"))
    summary = solve(catalogue, base).explanation.summary
    assert ("conflicting restrictions: --max-gpus 8 (lifting it is not enough: lifting --max-gpus 8, "
            "--recompute none gives a plan)") in summary
    assert plan_exists(catalogue, only_restrictions(base, [label.label for label in restrictions_of(base)
                                                            if label.label not in ("--max-gpus 8", "--recompute none")]))
    alone = SolveQuery(model="llama-3.1-70b", job=_Job(seq_len=8192), global_batch=64, tokens=2e9, gpus=("rtx4090-24gb",))
    assert "(lifting --gpu rtx4090-24gb alone gives a plan)" in solve(catalogue, alone).explanation.summary
