"""Library-call latency of `solve`: the README's headline query, Llama-3.1-405B pre-training, and
how solve time grows with the search space (combinations = the product of the decision domains).

    python bench/solve_bench.py [--repeats N] [--json]

Headline: Llama-3.1-70B full fine-tune at 8k context, global batch 64, 2e9 tokens, objective cost,
default catalogues, top 1. 405B pre-training: 8k context, global batch 2048 (16M tokens per step,
Llama 3's), 15.6e12 tokens (Llama 3's pre-training corpus), fused kernels, the fastest plan on up to
4,096 H100s (the most a query may ask for; Llama 3 ran on 16,384), on the default stack and with
`--stack megatron` (which adds partial recompute to the search). The brute-force
oracle runs where its space is small enough (<= 600,000 combinations). The last line of --json
output is one JSON object. Timings are measured here, never asserted in tests: this machine is
shared and noisy, so compare the ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vramplan.models.catalogue.catalogue import load_catalogue  # noqa: E402
from vramplan.models.core.setup import Job  # noqa: E402
from vramplan.solver.api import solve  # noqa: E402
from vramplan.solver.query import SolveQuery, SolveResult  # noqa: E402

HEADLINE = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=64, tokens=2e9, objective="cost")
PRETRAIN_405B = SolveQuery(model="llama-3.1-405b", job=Job(seq_len=8192, kernels="fused"), global_batch=2048,
                           tokens=15.6e12, objective="time", max_gpus=4096, gpus=("h100-sxm-80gb",))
BRUTE_MAX_COMBINATIONS = 600_000


def p50_ms(catalogue, query: SolveQuery, repeats: int) -> tuple[float, float, SolveResult]:
    """Median wall-clock and CPU milliseconds (CPU time is what the solve costs on a shared machine)."""
    solve(catalogue, query)  # warm caches and imports
    wall, cpu, result = [], [], None
    for _ in range(repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        result = solve(catalogue, query)
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
    return statistics.median(wall), statistics.median(cpu), result


def row(catalogue, label: str, query: SolveQuery, repeats: int) -> dict:
    c_ms, c_cpu, result = p50_ms(catalogue, query, repeats)
    entry = {"label": label, "status": result.status, "combinations": result.search.combinations,
             "evaluations": result.search.evaluations, "cpsat_models": result.search.cpsat_models,
             "cpsat_solves": result.search.cpsat_solves, "cpsat_ms": round(c_ms, 1), "cpsat_cpu_ms": round(c_cpu, 1),
             "brute_ms": None}
    if result.search.combinations <= BRUTE_MAX_COMBINATIONS:
        b_ms, _, brute = p50_ms(catalogue, query.model_copy(update={"engine": "brute"}), max(1, repeats // 3))
        assert brute.status == result.status and [p.plan for p in brute.plans] == [p.plan for p in result.plans]
        entry["brute_ms"] = round(b_ms, 1)
    if result.plans:
        p = result.plans[0]
        entry["plan"] = (f"{p.plan.num_gpus} x {p.plan.gpu} ({p.plan.offering}), TP{p.plan.tp} PP{p.plan.pp} "
                         f"CP{p.plan.cp} DP{p.plan.dp}, ZeRO-{p.plan.zero}, "
                         f"recompute {p.plan.recompute_label}, {p.plan.micro_batch} x {p.plan.grad_accum}, "
                         f"MFU {p.performance.mfu_fraction:.1%}")
    brute = "-" if entry["brute_ms"] is None else f"{entry['brute_ms']:.1f}"
    print(f"| {label} | {result.status} | {entry['combinations']:,} | {entry['evaluations']:,} | {entry['cpsat_models']} / "
          f"{entry['cpsat_solves']} | {entry['cpsat_ms']:.0f} | {entry['cpsat_cpu_ms']:.0f} | {brute} |")
    return entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    args = parser.parse_args()
    catalogue = load_catalogue()
    small = max(3, args.repeats // 3)

    print("| query | status | combinations | models/ evaluations | CP-SAT models / solves | CP-SAT p50 ms | "
          "CP-SAT CPU p50 ms | brute p50 ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    headline = row(catalogue, "headline (70B, 8k, gb 64)", HEADLINE, args.repeats)
    pretrain = row(catalogue, "405B pre-training (8k, gb 2048, <= 4,096 H100, time)", PRETRAIN_405B, small)
    megatron = PRETRAIN_405B.model_copy(update={"job": PRETRAIN_405B.job.model_copy(update={"stack": "megatron"})})
    pretrain_megatron = row(catalogue, "405B pre-training, --stack megatron", megatron, small)
    growth = []
    gpus = sorted(catalogue.gpus)
    for count in (2, 4, 8, len(gpus)):
        query = HEADLINE.model_copy(update={"gpus": tuple(gpus[:count])})
        growth.append(row(catalogue, f"headline, {count} GPU types", query, small))
    for max_gpus in (256, 1024, 4096):
        query = HEADLINE.model_copy(update={"max_gpus": max_gpus, "global_batch": max_gpus})
        growth.append(row(catalogue, f"headline, global batch = max GPUs = {max_gpus}", query, small))
    for global_batch in (16384, 65536):
        query = HEADLINE.model_copy(update={"max_gpus": 4096, "global_batch": global_batch, "tokens": 1e13})
        growth.append(row(catalogue, f"headline, global batch {global_batch}, <= 4,096 GPUs, 1e13 tokens", query, small))
    print(f"headline plan: {headline.get('plan')}")
    print(f"405B plan: {pretrain.get('plan')}")
    print(f"405B plan, megatron stack: {pretrain_megatron.get('plan')}")
    if args.json:
        print(json.dumps({"headline": headline, "pretrain_405b": pretrain, "pretrain_405b_megatron": pretrain_megatron,
                          "growth": growth}))


if __name__ == "__main__":
    main()
