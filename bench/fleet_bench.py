"""`vramplan fleet` at 20, 50 and 200 jobs over 3, 5 and 10 pools, in one run.

    python bench/fleet_bench.py [--time-limit 60] [--workers 2] [--sizes 20x3,50x5,200x10] [--json]

Each fleet is seeded: jobs drawn from a few shapes (model, method, context) with random token
budgets, windows and priorities over one quarter; pools are reserved (committed) or priced
inventory of real offerings, sized so that committed pools hold half of the jobs' GPU-hours and
priced pools 90% (about 70% booked overall, and the cheapest schedule is not free). The
planner's candidates (solve() per job, pool and cluster size) are timed separately from CP-SAT and
cached by job shape across fleets. Reported per fleet: planner seconds (calls, cache hits), time
to the first schedule, time to proof (all stages optimal) or the gap of the cost stage at the
limit, and the jobs served. Timings are measured here, never asserted in tests; this machine is
shared, so compare within one run.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vramplan.fleet.candidates import CandidateCache
from vramplan.fleet.inputs import FleetJob, FleetQuery, Pool, PoolWindow
from vramplan.fleet.planner import finish, prepare, session
from vramplan.models.catalogue.catalogue import load_catalogue
from vramplan.models.core.setup import Job
from vramplan.solver.query import SolveQuery

SHAPES = [("llama-3.1-8b", "full", 4096), ("llama-3.1-8b", "lora", 8192), ("qwen2.5-7b", "full", 4096),
          ("mistral-7b", "lora", 4096), ("llama-3.1-70b", "lora", 8192), ("gemma-2-9b", "full", 8192),
          ("llama-3.1-70b", "full", 8192), ("mixtral-8x7b", "full", 4096)]
OFFERINGS = ["aws/p5.48xlarge", "lambda/gpu_8x_a100_80gb_sxm4", "runpod/8x_H200-SXM_SECURE",
             "lambda/gpu_8x_b200_sxm6", "lambda/gpu_8x_h100_sxm5", "aws/p4de.24xlarge", "runpod/8x_H100-SXM_SECURE",
             "aws/p5en.48xlarge", "lambda/gpu_8x_a100", "aws/p6-b200.48xlarge"]
HORIZON_H = 91 * 24
COMMITTED_SHARE, PRICED_SHARE = 0.5, 0.9


def fleet_query(num_jobs: int, num_pools: int, seed: int, time_limit_s: float, workers: int) -> FleetQuery:
    rng = random.Random(seed)
    jobs = []
    for _ in range(num_jobs):
        model, method, seq_len = rng.choice(SHAPES)
        tokens = rng.choice([1e9, 2e9, 5e9, 1e10, 2e10]) * (1 if method == "lora" else 2)
        start = rng.uniform(0, HORIZON_H * 0.6)
        deadline = min(HORIZON_H, start + rng.uniform(200, 900))
        query = SolveQuery(model=model, job=Job(method=method, seq_len=seq_len), tokens=tokens, max_gpus=64)
        jobs.append(FleetJob(query=query, earliest_start_hours=round(start), deadline_hours=round(deadline),
                             priority=rng.choice([1, 1, 2, 3]), required=rng.random() < 0.1))
    pools = []
    for p in range(num_pools):
        committed = p % 2 == 0
        pools.append(Pool(name=f"pool{p}", offering=OFFERINGS[p % len(OFFERINGS)], committed=committed,
                          windows=(PoolWindow(from_hours=0 if committed else rng.choice([0, 168, 336]),
                                              num_gpus=8 * rng.choice([4, 8, 12, 16])),)))
    return FleetQuery(jobs=tuple(jobs), pools=tuple(pools), time_limit_s=time_limit_s, num_workers=workers,
                      random_seed=seed, explain_limit=0)


def scale_pools(query: FleetQuery, demand_gpu_hours: float) -> FleetQuery:
    """Size the pools from the jobs' least GPU-hours: committed pools hold COMMITTED_SHARE of them,
    priced pools PRICED_SHARE (so the inventory is about 70% booked and the cost is not zero)."""
    def scaled(pools: list[Pool], share: float) -> list[Pool]:
        available = sum(w.num_gpus * (HORIZON_H - w.from_hours) for p in pools for w in p.windows or ())
        factor = share * demand_gpu_hours / max(1.0, available)
        return [p.model_copy(update={"windows": tuple(
            PoolWindow(from_hours=w.from_hours, num_gpus=max(8, 8 * round(w.num_gpus * factor / 8)))
            for w in p.windows or ())}) for p in pools]

    committed = scaled([p for p in query.pools if p.committed], COMMITTED_SHARE)
    priced = scaled([p for p in query.pools if not p.committed], PRICED_SHARE)
    by_name = {p.name: p for p in committed + priced}
    return query.model_copy(update={"pools": tuple(by_name[p.name] for p in query.pools)})


def with_market(query: FleetQuery, catalogue) -> FleetQuery:
    providers = sorted({o.provider for o in catalogue.offerings.values()} - {"list"})
    market = tuple(Pool(name=f"market:{p}", market_provider=p) for p in providers)
    return query.model_copy(update={"pools": query.pools + market})


def run(num_jobs: int, num_pools: int, time_limit_s: float, workers: int, cache: CandidateCache,
        market: bool) -> dict:
    catalogue = load_catalogue()
    query = fleet_query(num_jobs, num_pools, seed=num_jobs * 100 + num_pools, time_limit_s=time_limit_s,
                        workers=workers)
    calls, hits, began = cache.calls, cache.hits, time.perf_counter()
    prepared = prepare(catalogue, query, cache)  # the jobs' shapes at the unscaled pools' sizes
    planner_s = time.perf_counter() - began
    gpu_hours = sum(min((c.gpus * c.hours for c in found), default=0) for found in prepared.candidates)
    query = scale_pools(query, gpu_hours)
    if market:
        query = with_market(query, catalogue)
    began = time.perf_counter()
    prepared = prepare(catalogue, query, cache)  # the pools' sizes changed: new cluster sizes, new calls
    planner_s += time.perf_counter() - began
    began = time.perf_counter()
    schedule = session(prepared).run()
    solve_s = time.perf_counter() - began
    result = finish(prepared, schedule, solve_s, explain=False)
    first = next((s.first_solution_s for s in schedule.stages if s.first_solution_s is not None), None)
    cost = next(s for s in result.stages if s.name == "cost")
    return {"jobs": num_jobs, "pools": num_pools, "market": market, "candidates": result.num_candidates,
            "planner_s": round(planner_s, 2), "planner_calls": cache.calls - calls, "cache_hits": cache.hits - hits,
            "first_schedule_s": None if first is None else round(first, 2),
            "proof_s": round(solve_s, 2) if result.status == "optimal" else None,
            "solve_s": round(solve_s, 2), "status": result.status, "cost_gap": cost.gap,
            "served": sum(a.status != "unserved" for a in result.assignments),
            "usd_marginal": result.usd_marginal_total, "stages": [s.model_dump() for s in result.stages]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sizes", default="20x3,50x5,200x10")
    parser.add_argument("--market", choices=["off", "on", "both"], default="both",
                        help="also offer the on-demand market (every provider but list prices, no quota)")
    parser.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    args = parser.parse_args()
    cache = CandidateCache()
    rows = []
    markets = {"off": [False], "on": [True], "both": [False, True]}[args.market]
    for size, market in [(size, market) for market in markets for size in args.sizes.split(",")]:
        num_jobs, num_pools = (int(x) for x in size.split("x"))
        row = run(num_jobs, num_pools, args.time_limit, args.workers, cache, market)
        rows.append(row)
        gap = "-" if row["cost_gap"] is None else f"{100 * row['cost_gap']:.2f}%"
        print(f"{num_jobs:4d} jobs x {num_pools:2d} pools{' + market' if market else ''}: {row['candidates']:5d} candidates, planner "
              f"{row['planner_s']:6.1f} s ({row['planner_calls']} calls, {row['cache_hits']} hits), first schedule "
              f"{row['first_schedule_s']} s, proof {row['proof_s']} s, {row['status']}, cost gap {gap}, "
              f"served {row['served']}/{num_jobs}", flush=True)
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
