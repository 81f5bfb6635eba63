"""Random solve queries (seeded): the CP-SAT vs brute-force oracle's cases (solver/test_engines.py),
also used by solver/test_answers.py to check reported conflicts; and the oracle's check of one
config.json's query (`both_engines_best`, the families' solve tests)."""

from __future__ import annotations

import random

from helpers.catalogue import packaged_catalogue
from vramplan.models.core.setup import Job, Plan
from vramplan.solver.api import solve
from vramplan.solver.query import Pins, SolveQuery

MODELS = ["gpt2-124m", "gpt2-1.5b", "llama-3.1-8b", "mistral-7b", "qwen2.5-7b", "gemma-2-9b", "llama-2-13b",
          "mixtral-8x7b", "llama-3.1-70b"]
GPUS = sorted(packaged_catalogue().gpus)


def random_query(rng: random.Random) -> SolveQuery:
    model = rng.choice(MODELS)
    seq_len = rng.choice([256, 512, 1024] if model.startswith("gpt2") else [512, 2048, 4096, 8192])
    method = rng.choice(["full", "full", "lora", "qlora"])
    job = Job(method=method, seq_len=seq_len, optimizer=rng.choice(["adamw", "adamw-8bit", "sgd"]),
              accounting=rng.choice(["zero", "hf"]), attention=rng.choice(["flash", "eager"]),
              capacity_fraction=rng.choice([0.8, 0.9, 0.95]), stack="custom")  # every layout: the oracle's space
    # TP, PP (and EP for Mixtral) are free in every full fine-tune's space; CP enters when pinned
    # (it is searched from 16k tokens of context on), and some queries pin TP or PP.
    max_gpus = rng.choice([1, 2, 4, 8, 16])
    parallel = method == "full" and not model.startswith("gpt2") and max_gpus >= 8
    pins = Pins(
        zero=rng.choice([None, None, 0, 1, 2, 3]),
        recompute=rng.choice([None, None, "none", "full"]),
        offload=rng.choice([None, None, "none"]),
        micro_batch=rng.choice([None, None, None, 1, 2]),
        tp=rng.choice([None, None, None, 2]) if parallel else None,
        pp=rng.choice([None, None, None, 2]) if parallel else None,
        cp=rng.choice([None, None, 2]) if parallel and job.attention == "flash" else None,
    )
    tokens = rng.choice([1e8, 1e9, 2e10])
    if rng.random() < 0.25:  # drawn last: the earlier draws, and so the queries without it, stay as they were
        job = job.model_copy(update={"activation_offload": True})
    return SolveQuery(
        model=model, job=job, global_batch=rng.choice([4, 8, 12, 16, 32]), tokens=tokens,
        objective=rng.choice(["cost", "time", "throughput", "hourly"]),
        gpus=tuple(rng.sample(GPUS, rng.randint(1, 3))), max_gpus=max_gpus,
        budget_usd=rng.choice([None, None, 50.0, 5000.0]), deadline_hours=rng.choice([None, None, 10.0, 1000.0]),
        pricing=rng.choice(["on-demand", "on-demand", "spot"]), pins=pins, top_k=rng.choice([1, 1, 3]),
    )


# Spaces whose parallel traffic each recompute changes differently: the traffic-recompute and grid
# tests (tests/solver/test_traffic_recompute.py, test_grid_terms.py) walk their layouts.
TRAFFIC_QUERIES = {
    # MoE with EP, partial recompute and uneven splits (Megatron): the expert FLOPs and permutation bytes
    "deepseek-v3 megatron": SolveQuery(model="deepseek-v3", job=Job(seq_len=4096, stack="megatron"), global_batch=1024,
                                       tokens=1e12, objective="time", max_gpus=1024, gpus=("h100-sxm-80gb",)),
    # torch's ring attention (its bytes grow with the recomputed forward), fp8, async TP
    "llama 70b torchtitan cp": SolveQuery(
        model="llama-3.1-70b", job=Job(seq_len=65536, stack="torchtitan", tp_overlap=True, compile="model"),
        global_batch=64, tokens=1e10, objective="time", max_gpus=256, gpus=("h100-sxm-80gb",)),
}


def both_engines_best(model: str, job: Job, objective: str, max_gpus: int = 16,
                      gpus: tuple[str, ...] = ("h100-sxm-80gb", "a100-sxm-80gb")) -> Plan:
    """The best plan CP-SAT and the brute-force enumerator return for the query (global batch 32, 1e9
    tokens), asserting both prove it optimal and agree."""
    plans = []
    for engine in ("cpsat", "brute"):
        query = SolveQuery(model=model, job=job, global_batch=32, tokens=1e9, objective=objective, max_gpus=max_gpus,
                           gpus=gpus, engine=engine)
        result = solve(packaged_catalogue(), query)
        assert result.status == "optimal"
        plans.append(result.plans[0].plan)
    assert plans[0] == plans[1]
    return plans[0]


def write_config(folder, config: dict) -> str:
    """A config.json of `config` in `folder` (a test's tmp_path), as a path string for SolveQuery.model."""
    import json

    path = folder / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


def any_stack_plans(model: str) -> list[Plan]:
    """The top 3 plans `--stack any` finds for the model (4k tokens, global batch 64, 1e9 tokens, the fastest on up to
    64 H100s), asserting they are proven optimal: the family-solve tests check which stacks they name."""
    from vramplan.solver.query_fields import query_from_fields

    query = query_from_fields({"model": model, "seq_len": 4096, "global_batch": 64, "tokens": 1e9, "stack": "any",
                               "objective": "time", "max_gpus": 64, "gpus": "h100-sxm-80gb"}, top_k=3)
    result = solve(packaged_catalogue(), query)
    assert result.status == "optimal"
    return [p.plan for p in result.plans]
