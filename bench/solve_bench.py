"""Library-call latency of `solve`: the README's headline query, Llama-3.1-405B pre-training, and
how solve time grows with the search space (combinations = the product of the decision domains).

    python bench/solve_bench.py [--repeats N] [--json]
    python bench/solve_bench.py --answers > answers.json   # every row's SolveResult, to compare two builds

Headline: Llama-3.1-70B full fine-tune at 8k context, global batch 64, 2e9 tokens, objective cost,
default catalogues, top 1. 405B pre-training: 8k context, global batch 2048 (16M tokens per step,
Llama 3's), 15.6e12 tokens (Llama 3's pre-training corpus), fused kernels, the fastest plan on up to
4,096 H100s (queries may ask for up to 16,384, what Llama 3 ran on), on the default stack and with
`--stack megatron` (which adds partial recompute to the search). DeepSeek-V3 pre-training with
every degree free, EP included: its report's 4k context, global batch 15,360 and 14.8e12 tokens,
the fastest plan on up to 2,048 H100s (it ran on 2,048 H800s), `--stack megatron` (Megatron-Core's
MoE all-to-all dispatcher and partial recompute; the slowest query of issue 35, 87% of it the
step-time bounds). The brute-force
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
# vramplan solve --model deepseek-v3 --seq-len 4096 --global-batch 15360 --tokens 14.8e12 --gpu h100-sxm-80gb
#   --max-gpus 2048 --objective time --stack megatron
DEEPSEEK_V3 = SolveQuery(model="deepseek-v3", job=Job(seq_len=4096, stack="megatron"), global_batch=15360,
                         tokens=14.8e12, objective="time", max_gpus=2048, gpus=("h100-sxm-80gb",))
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
                         f"CP{p.plan.cp} EP{p.plan.ep} DP{p.plan.dp}, ZeRO-{p.plan.zero}, "
                         f"recompute {p.plan.recompute_label}, {p.plan.micro_batch} x {p.plan.grad_accum}, "
                         f"MFU {p.performance.mfu_fraction:.1%}")
    brute = "-" if entry["brute_ms"] is None else f"{entry['brute_ms']:.1f}"
    print(f"| {label} | {result.status} | {entry['combinations']:,} | {entry['evaluations']:,} | {entry['cpsat_models']} / "
          f"{entry['cpsat_solves']} | {entry['cpsat_ms']:.0f} | {entry['cpsat_cpu_ms']:.0f} | {brute} |")
    return entry


def queries(catalogue) -> list[tuple[str, str, SolveQuery, bool]]:
    """(key, label, query, whether it runs the full repeats) of every row, in table order."""
    megatron = PRETRAIN_405B.model_copy(update={"job": PRETRAIN_405B.job.model_copy(update={"stack": "megatron"})})
    rows = [("headline", "headline (70B, 8k, gb 64)", HEADLINE, True),
            ("pretrain_405b", "405B pre-training (8k, gb 2048, <= 4,096 H100, time)", PRETRAIN_405B, False),
            ("pretrain_405b_megatron", "405B pre-training, --stack megatron", megatron, False),
            ("deepseek_v3", "DeepSeek-V3 pre-training (4k, gb 15360, <= 2,048 H100, time, megatron, EP free)",
             DEEPSEEK_V3, False)]
    gpus = sorted(catalogue.gpus)
    for count in (2, 4, 8, len(gpus)):
        rows.append(("growth", f"headline, {count} GPU types", HEADLINE.model_copy(update={"gpus": tuple(gpus[:count])}),
                     False))
    for max_gpus in (256, 1024, 4096):
        rows.append(("growth", f"headline, global batch = max GPUs = {max_gpus}",
                     HEADLINE.model_copy(update={"max_gpus": max_gpus, "global_batch": max_gpus}), False))
    for global_batch in (16384, 65536):
        rows.append(("growth", f"headline, global batch {global_batch}, <= 4,096 GPUs, 1e13 tokens",
                     HEADLINE.model_copy(update={"max_gpus": 4096, "global_batch": global_batch, "tokens": 1e13}), False))
    return rows


def answers(catalogue) -> dict[str, dict]:
    """Every row's whole SolveResult but its wall-clock time, by label: what two builds compare."""
    return {label: solve(catalogue, query).model_dump(mode="json", exclude={"solve_time_s"})
            for _, label, query, _ in queries(catalogue)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    parser.add_argument("--answers", action="store_true",
                        help="print every row's SolveResult (but its wall time) as one JSON object, no timing")
    args = parser.parse_args()
    catalogue = load_catalogue()
    if args.answers:
        print(json.dumps(answers(catalogue), sort_keys=True, indent=1))
        return
    small = max(3, args.repeats // 3)

    print("| query | status | combinations | models/ evaluations | CP-SAT models / solves | CP-SAT p50 ms | "
          "CP-SAT CPU p50 ms | brute p50 ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    entries: dict[str, dict | list] = {"growth": []}
    for key, label, query, full in queries(catalogue):
        entry = row(catalogue, label, query, args.repeats if full else small)
        if key == "growth":
            entries["growth"].append(entry)  # type: ignore[union-attr]
        else:
            entries[key] = entry
    for key, name in (("headline", "headline"), ("pretrain_405b", "405B"), ("pretrain_405b_megatron", "405B, megatron stack"),
                      ("deepseek_v3", "DeepSeek-V3")):
        print(f"{name} plan: {entries[key].get('plan')}")  # type: ignore[union-attr]
    if args.json:
        print(json.dumps(entries))


if __name__ == "__main__":
    main()
