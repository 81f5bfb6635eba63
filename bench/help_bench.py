"""Latency of `vramplan --help` and of each command's --help, and where the import time goes.

    python bench/help_bench.py [--repeats N] [--json]

Each case runs `python -m vramplan ... --help` in a fresh interpreter N times and reports the
median wall time and the median CPU time (user + system of the child, which is what a loaded
machine does not inflate); `python -c pass` is the interpreter's own start-up, for reference.
Then `python -X importtime -m vramplan --help` gives the modules with the most self time.
Timings are measured here, never asserted in tests (tests/commands/test_help_imports.py asserts
the behaviour behind them: no ortools, pandas or rich on --help).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CASES = [["-c", "pass"], ["-m", "vramplan", "--help"]] + [
    ["-m", "vramplan", name, "--help"] for name in ("estimate", "solve", "batch", "fleet", "gpus", "models", "offerings", "stacks")]


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one child run."""
    before = os.times()
    started = time.perf_counter()
    subprocess.run([sys.executable, *argv], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = os.times()
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def import_sinks(argv: list[str], top: int) -> list[tuple[str, float, float]]:
    """(module, self ms, cumulative ms) with the most self time under -X importtime."""
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True, text=True, check=True)
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = line.removeprefix("import time:").split("|")
        rows.append((name.strip(), int(self_us) / 1000, int(cumulative_us) / 1000))
    return sorted(rows, key=lambda row: -row[1])[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="End with one JSON line of the medians.")
    args = parser.parse_args()
    summary = {}
    print(f"{'command':<34} {'wall p50 ms':>12} {'cpu p50 ms':>11}")
    for argv in CASES:
        runs = [timed(argv) for _ in range(args.repeats)]
        wall = statistics.median(r[0] for r in runs) * 1000
        cpu = statistics.median(r[1] for r in runs) * 1000
        label = "python -c pass" if argv[0] == "-c" else "vramplan " + " ".join(argv[2:])
        summary[label] = {"wall_p50_ms": round(wall, 1), "cpu_p50_ms": round(cpu, 1)}
        print(f"{label:<34} {wall:>12.0f} {cpu:>11.0f}")
    print("\nimport self time, `vramplan --help` (top 10):")
    for name, self_ms, cumulative_ms in import_sinks(["-m", "vramplan", "--help"], 10):
        print(f"  {name:<40} self {self_ms:6.1f} ms  cumulative {cumulative_ms:6.1f} ms")
    print("\nimport cumulative time, `vramplan solve --help` (top 5 vramplan modules):")
    rows = [r for r in import_sinks(["-m", "vramplan", "solve", "--help"], 400) if r[0].startswith("vramplan")]
    for name, _, cumulative_ms in sorted(rows, key=lambda r: -r[2])[:5]:
        print(f"  {name:<40} cumulative {cumulative_ms:6.1f} ms")
    if args.json:
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
