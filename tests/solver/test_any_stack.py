"""`--stack any` and several stacks: the search chooses the stack too, and every plan names the
stack that runs it (issue 31)."""

from __future__ import annotations

import json

from helpers.cli import invoke, invoke_batch, one_line_error
from helpers.sheets import read_rows, write_csv

from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.catalogue.stack import restacked
from vramplan.models.core.setup import Job
from vramplan.solver.api import solve
from vramplan.solver.query import SolveQuery
from vramplan.solver.query_fields import query_from_fields

HEADLINE = {"model": "llama-3.1-70b", "seq_len": 8192, "global_batch": 64, "tokens": 2e9}


def test_several_stacks_answer_the_best_of_each_and_name_it(catalogue) -> None:
    query = query_from_fields({**HEADLINE, "stack": "hf,megatron"}, top_k=3)
    assert query.stacks == ("hf", "megatron") and query.job.stack == "hf"
    both = solve(catalogue, query)
    alone = {s: solve(catalogue, SolveQuery(model="llama-3.1-70b", job=restacked(query.job, s, load_stacks()),
                                            global_batch=64, tokens=2e9)).objective.value for s in ("hf", "megatron")}
    assert both.status == "optimal" and both.objective.value == min(alone.values())
    assert both.plans[0].plan.stack == "megatron"  # TP 8 + SP without recompute: 954 USD against hf's 1,119
    assert [p.objective_value for p in both.plans] == sorted(p.objective_value for p in both.plans)


def test_any_is_every_current_stack_and_the_launch_config_is_the_chosen_ones(tmp_path) -> None:
    path = tmp_path / "launch"
    result = invoke("solve", "--model", "llama-3.1-70b", "--seq-len", "8192", "--global-batch", "64", "--tokens", "2e9",
                    "--stack", "any", "--format", "json", "--launch-config", str(path))
    assert result.exit_code == 0, result.stderr
    best = json.loads(result.stdout)["plans"][0]["plan"]
    assert best["stack"] == "megatron" and "--tensor-model-parallel-size 8" in path.read_text(encoding="utf-8")
    # not custom (no limits), nor litgpt-fsdp1 (lit-gpt up to v0.5.7, which today's litgpt replaced), nor
    # torchtitan-root-fsdp (torchtitan before 83e6941, which today's torchtitan replaced)
    assert query_from_fields({**HEADLINE, "stack": "any"}).stacks == tuple(
        s for s in load_stacks() if s not in ("custom", "litgpt-fsdp1", "torchtitan-root-fsdp"))


def test_a_stack_the_job_cannot_use_drops_out_and_one_stack_is_for_estimate() -> None:
    from vramplan.models.catalogue.catalogue import load_catalogue

    qlora = query_from_fields({"model": "llama-3.1-8b", "seq_len": 4096, "method": "qlora", "stack": "megatron,hf"})
    result = solve(load_catalogue(), qlora)  # Megatron trains no QLoRA: the hf plans answer
    assert result.status == "optimal" and {p.plan.stack for p in result.plans} == {"hf"}
    assert Job().stack == "hf"
    line = one_line_error(invoke("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--stack", "any"))
    assert "a job runs on one stack" in line
    # `any` in a list reached the job as a stack name, and solve was told several are "for solve"
    line = one_line_error(invoke("solve", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--stack", "any,custom"))
    assert line == ("error: stack='any,custom': any means every current stack, so it stands alone: give `any`, "
                    "or list the stacks (custom among them)")


def test_a_batch_row_may_name_several_stacks(tmp_path) -> None:
    jobs = write_csv(tmp_path / "jobs.csv", [{"id": "a", **HEADLINE, "stack": "hf;megatron"}])
    out = tmp_path / "plans.csv"
    assert invoke_batch(str(jobs), "-o", str(out)).exit_code == 0
    (row,) = read_rows(out)
    assert row["status"] == "optimal" and float(row["usd_total"]) < 1700  # megatron's TP 8 + SP: 1,630 USD; hf's 2,018


def test_the_order_of_the_stacks_changes_nothing_and_no_plan_is_listed_twice(catalogue) -> None:
    """A review of 2026-12-06: `--stack hf,deepspeed --top 3` listed one plan twice (1 x B200,
    ZeRO-0: the same memory, time and cost, only the stack's name differed), and `deepspeed,hf` gave
    another best plan; under `any` a litgpt plan of equal cost and time with the larger micro-batch
    was left out or not, by the list's order. Plans of several stacks now merge by the objective,
    then the engines' own tie-breaks (solver/api.py plan_tie_key), then the stack's name, and an
    equal plan no leaner is dropped as distinct_choices drops it within one stack."""
    fields = {"model": "llama-3.1-8b", "seq_len": 4096, "global_batch": 64, "tokens": 1e9}

    def answer(stacks: str, top_k: int, pareto: bool = False) -> str:
        query = query_from_fields({**fields, "stack": stacks}, top_k=top_k).model_copy(update={"pareto": pareto})
        result = solve(catalogue, query)
        assert all(abs(a.memory.total_bytes - b.memory.total_bytes) * 100 >= b.memory.total_bytes
                   or (a.cost.usd_total, a.cost.hours) != (b.cost.usd_total, b.cost.hours)
                   for i, a in enumerate(result.plans) for b in result.plans[:i])  # no plan twice
        return result.model_dump_json(exclude={"solve_time_s", "search", "space_size"})

    assert answer("hf,deepspeed", 3) == answer("deepspeed,hf", 3)
    every = ",".join(("unsloth", "torchtune", "litgpt", "deepspeed", "torchtitan", "megatron", "hf"))
    assert answer("any", 5, pareto=True) == answer(every, 5, pareto=True)
