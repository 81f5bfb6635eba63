"""Library-call latency of the README's headline query with both engines, in one run.

    python bench/solve_bench.py [--repeats N] [--json]

The headline query: Llama-3.1-70B full fine-tune at 8k context, global batch 64, 2e9 tokens,
objective cost, default catalogues, top 1. Also reports how both engines grow with the catalogue
(GPU subsets) and with --max-gpus (which widens the global batch so more counts are possible).
The last line of --json output is one JSON object with cpsat_p50_ms, brute_p50_ms, space_size.
Timings are measured here, never asserted in tests: this machine is shared and noisy, so compare
the ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vramplan.models.catalogue import load_catalogue  # noqa: E402
from vramplan.models.setup import Job  # noqa: E402
from vramplan.solver.api import solve  # noqa: E402
from vramplan.solver.query import SolveQuery  # noqa: E402

HEADLINE = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=64, tokens=2e9, objective="cost")


def p50_ms(catalogue, query: SolveQuery, repeats: int) -> tuple[float, int, str]:
    solve(catalogue, query)  # warm caches and imports
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = solve(catalogue, query)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), result.space_size, result.status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    args = parser.parse_args()
    catalogue = load_catalogue()

    cpsat, size, status = p50_ms(catalogue, HEADLINE, args.repeats)
    brute, _, brute_status = p50_ms(catalogue, HEADLINE.model_copy(update={"engine": "brute"}), args.repeats)
    assert status == brute_status
    print(f"headline query ({status}, {size:,} combinations): CP-SAT p50 {cpsat:.1f} ms, brute force p50 {brute:.1f} ms, "
          f"brute/CP-SAT {brute / cpsat:.2f}x")

    gpus = sorted(catalogue.gpus)
    growth = []
    for count in (2, 4, 8, len(gpus)):
        query = HEADLINE.model_copy(update={"gpus": tuple(gpus[:count])})
        c_ms, c_size, _ = p50_ms(catalogue, query, max(3, args.repeats // 3))
        b_ms, _, _ = p50_ms(catalogue, query.model_copy(update={"engine": "brute"}), max(3, args.repeats // 3))
        growth.append({"gpus": count, "space_size": c_size, "cpsat_ms": round(c_ms, 1), "brute_ms": round(b_ms, 1)})
        print(f"  {count:2d} GPU types: {c_size:>9,} combinations, CP-SAT {c_ms:7.1f} ms, brute {b_ms:7.1f} ms")
    for max_gpus in (64, 256, 1024):
        query = HEADLINE.model_copy(update={"max_gpus": max_gpus, "global_batch": max_gpus})
        c_ms, c_size, _ = p50_ms(catalogue, query, max(3, args.repeats // 3))
        b_ms, _, _ = p50_ms(catalogue, query.model_copy(update={"engine": "brute"}), max(3, args.repeats // 3))
        growth.append({"max_gpus": max_gpus, "space_size": c_size, "cpsat_ms": round(c_ms, 1), "brute_ms": round(b_ms, 1)})
        print(f"  max-gpus {max_gpus:5d} (global batch {max_gpus}): {c_size:>9,} combinations, CP-SAT {c_ms:7.1f} ms, "
              f"brute {b_ms:7.1f} ms")
    if args.json:
        print(json.dumps({"cpsat_p50_ms": round(cpsat, 2), "brute_p50_ms": round(brute, 2), "space_size": size,
                          "growth": growth}))


if __name__ == "__main__":
    main()
