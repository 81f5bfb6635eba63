"""The ranges of models/core/fidelity_ranges.py, derived from the evidence (tests/data): measured /
predicted per stack for memory (known misses left out), per stack and kind of run for throughput on
calibrated GPUs (known misses in, runs on hardware the catalogue does not describe out), with their
leave-one-out coverage. `python tests/fidelity_ranges.py --write` regenerates the block in models/core/fidelity_ranges.py
(without --write it prints it; with --table, docs/fidelity.md's throughput table);
tests/models/test_fidelity_ranges.py checks that the file and the docs hold them."""

from __future__ import annotations

import math
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import measured_peaks
import measured_throughput

from vramplan.models.catalogue.catalogue import load_catalogue
from vramplan.models.core.fidelity_ranges import ANY, MIN_RUNS, Range, throughput_keys

DIGITS = 2
SPREAD_RUNS = 3  # a stack's runs count towards the shared spread from this many (a median needs a few)
# Throughput misses measured on hardware the catalogue does not describe: out of every range.
OTHER_HARDWARE = {
    "power-limited-b200": "torchao's mx_formats B200 runs under a power cap the README does not state (1.8-2.2x "
                          "below the catalogue B200's prediction)",
}


def _bounds(ratios: list[float]) -> tuple[float, float]:
    """The lowest and highest ratio, widened to hold 1 (the estimate itself), rounded outwards."""
    low, high = min(min(ratios), 1.0), max(max(ratios), 1.0)
    scale = 10**DIGITS
    return math.floor(round(low * scale, 6)) / scale, math.ceil(round(high * scale, 6)) / scale


def _inside(ratio: float, bounds: tuple[float, float]) -> bool:
    return bounds[0] <= ratio <= bounds[1]


def _coverage(ratios: list[float], bounds_without) -> float:
    """The share of `ratios` inside the range made without each one (bounds_without(i))."""
    return round(sum(_inside(ratio, bounds_without(i)) for i, ratio in enumerate(ratios)) / len(ratios), 2)


def _range(ratios: list[float], what: str) -> Range:
    """The lowest and the highest of `ratios`, and their leave-one-out coverage."""
    coverage = _coverage(ratios, lambda i: _bounds(ratios[:i] + ratios[i + 1:]))
    return Range(*_bounds(ratios), len(ratios), coverage, _basis(len(ratios), what, coverage))


def _basis(runs: int, what: str, coverage: float) -> str:
    return f"{runs} published {what} (coverage {coverage:.0%} leave-one-out)"


def _spread(by_stack: dict[str, list[float]]) -> tuple[float, float]:
    """How far a run lands from its own stack's centre: the least and the largest ratio / the
    stack's median, over the stacks with SPREAD_RUNS runs or more."""
    spread = [ratio / statistics.median(ratios) for ratios in by_stack.values() if len(ratios) >= SPREAD_RUNS
              for ratio in ratios]
    return min(spread), max(spread)


def _stack_bounds(ratios: list[float], spread: tuple[float, float]) -> tuple[float, float]:
    """A stack's range: its own runs, and around their median the spread every stack's runs show
    (a stack's own few runs say where its centre is; how far one run strays is what is left
    unmodelled, shared by all stacks: with its own extremes alone a stack of n runs holds a new
    one with probability (n - 1) / (n + 1), 75% for 7)."""
    centre = statistics.median(ratios)
    return _bounds([*ratios, centre * spread[0], centre * spread[1]])


def _stack_range(stack: str, by_stack: dict[str, list[float]], where: str = "") -> Range:
    """A stack's range and its leave-one-out coverage: each run against the range made without it
    (its stack's runs and the shared spread both without it; the pooled runs without it where fewer
    than MIN_RUNS of its stack remain)."""
    ratios = by_stack[stack]
    return Range(*_stack_bounds(ratios, _spread(by_stack)), len(ratios),
                 coverage := _coverage(ratios, lambda i: _bounds_without(by_stack, stack, i)),
                 _basis(len(ratios), f"{stack} runs{where}", coverage))


def _bounds_without(by_stack: dict[str, list[float]], stack: str, i: int) -> tuple[float, float]:
    """The range a run of `stack` (its i-th) would get from the evidence without it."""
    others = {name: ratios[:i] + ratios[i + 1:] if name == stack else ratios for name, ratios in by_stack.items()}
    if len(others[stack]) < MIN_RUNS:
        return _bounds([ratio for ratios in others.values() for ratio in ratios])
    return _stack_bounds(others[stack], _spread(others))


def coverage(by_stack: dict[str, list[float]]) -> tuple[int, int]:
    """(runs inside, runs): every run that is not a known miss against the range its stack gets
    from the evidence without it (the pooled range for the stacks with few runs)."""
    inside = sum(_inside(ratio, _bounds_without(by_stack, stack, i))
                 for stack, ratios in by_stack.items() for i, ratio in enumerate(ratios))
    return inside, sum(len(ratios) for ratios in by_stack.values())


def memory_coverage() -> tuple[int, int]:
    return coverage(memory_ratios())


def memory_ratios() -> dict[str, list[float]]:
    """measured / predicted peak per stack, runs with a measured peak that are not known misses."""
    catalogue, by_stack = load_catalogue(), defaultdict(list)
    for run in measured_peaks.load_runs():
        if not run.oom and not run.known_miss:
            by_stack[run.cells["stack"]].append(1 / measured_peaks.compare(run, catalogue).ratio)
    return dict(sorted(by_stack.items()))


@dataclass(frozen=True)
class ThroughputRun:
    stack: str
    is_moe: bool
    precision: str
    ratio: float  # measured / predicted
    id: str

    @property
    def keys(self) -> list[tuple[str, str]]:
        """The pools it belongs to (models/core/fidelity_ranges.py throughput_keys)."""
        return throughput_keys(self.stack, self.is_moe, self.precision)


def throughput_runs() -> list[ThroughputRun]:
    """measured / predicted throughput of every run on a GPU generation with a calibrated
    efficiency, known misses included, but for those measured on other hardware (OTHER_HARDWARE)."""
    catalogue, runs = load_catalogue(), []
    for run in measured_throughput.load_runs():
        comparison = measured_throughput.compare(run, catalogue)
        if comparison.calibrated and run.known_miss not in OTHER_HARDWARE:
            _, plan = measured_peaks.job_and_plan(run.cells)
            runs.append(ThroughputRun(run.cells["stack"], measured_peaks.architecture(run.cells, catalogue).is_moe,
                                      plan.precision, 1 / comparison.ratio, run.id))
    return runs


def _pool(key: tuple[str, str], runs: list[ThroughputRun]) -> list[float]:
    return [run.ratio for run in runs if key in run.keys]


def _first_key(keys: list[tuple[str, str]], runs: list[ThroughputRun]) -> tuple[str, str]:
    """The first of `keys` whose pool in `runs` has MIN_RUNS runs (fidelity_ranges.throughput_spread's order)."""
    return next(key for key in keys if len(_pool(key, runs)) >= MIN_RUNS)


def throughput_coverage() -> tuple[int, int]:
    """(runs inside, runs): every run against the range the evidence without it gives it."""
    runs = throughput_runs()
    inside = 0
    for i, run in enumerate(runs):
        others = runs[:i] + runs[i + 1:]
        inside += _inside(run.ratio, _bounds(_pool(_first_key(run.keys, others), others)))
    return inside, len(runs)


def _pool_name(key: tuple[str, str]) -> str:
    """'megatron MoE fp8 runs', 'dense runs of all stacks'."""
    stack, kind = key
    return " ".join(part for part in (stack if stack != ANY else "", kind if kind != ANY else "", "runs",
                                      "of all stacks" if stack == ANY else "") if part)


def throughput_ranges() -> dict[tuple[str, str], Range]:
    """The range of every pool a run on a calibrated GPU can be looked up in: each (stack, model kind, precision) the
    evidence holds, and one of a stack it does not, to the first pool with MIN_RUNS runs."""
    runs = throughput_runs()
    reached = {_first_key(throughput_keys(stack, is_moe, precision), runs)
               for stack in {run.stack for run in runs} | {ANY}
               for is_moe in (False, True) for precision in ("bf16", "fp8")}
    return {key: _range(_pool(key, runs), _pool_name(key) + ", known misses in")
            for key in sorted(reached, key=lambda key: (key[0] == ANY, key))}


def ranges() -> tuple[dict[str, Range], Range]:
    """The memory ranges: the stacks' own (MIN_RUNS runs or more) and the pooled one."""
    by_stack = memory_ratios()
    pooled = [ratio for ratios in by_stack.values() for ratio in ratios]
    stacks = {stack: _stack_range(stack, by_stack) for stack, ratios in by_stack.items() if len(ratios) >= MIN_RUNS}
    return stacks, _range(pooled, "runs of all stacks")


def _literal(r: Range) -> str:
    return f'Range({r.low:.2f}, {r.high:.2f}, {r.runs}, {r.coverage:.2f}, "{r.basis}")'


def generated_block() -> str:
    memory, pooled_memory = ranges()
    lines = ["MEMORY_RANGES: dict[str, Range] = {"]
    lines += [f'    "{stack}": {_literal(r)},' for stack, r in memory.items()]
    lines += ["}", f"POOLED_MEMORY_RANGE = {_literal(pooled_memory)}", "THROUGHPUT_RANGES: dict[tuple[str, str], Range] = {"]
    lines += [f'    ("{stack}", "{kind}"):\n        {_literal(r)},' for (stack, kind), r in throughput_ranges().items()]
    lines += ["}"]
    return "\n".join(lines)


def throughput_table() -> str:
    """docs/fidelity.md's table of the throughput ranges."""
    lines = ["| stack | kind | runs | measured / predicted | coverage, leave-one-out |", "|---|---|---:|---|---:|"]
    lines += [f"| {'every stack' if stack == ANY else stack} | {'every kind' if kind == ANY else kind} | {r.runs} | "
              f"{r.low:.2f}-{r.high:.2f} | {r.coverage:.0%} |" for (stack, kind), r in throughput_ranges().items()]
    return "\n".join(lines)


SOURCE = Path(__file__).parents[1] / "models" / "core" / "fidelity_ranges.py"
START = "# --- generated by `python tests/fidelity_ranges.py --write`: do not edit by hand"
END = "# --- end of generated data"


def written_block() -> str:
    """The generated block as models/core/fidelity_ranges.py holds it."""
    text = SOURCE.read_text(encoding="utf-8")
    return text[text.index("\n", text.index(START)) + 1: text.index(END)].rstrip("\n")


def write() -> None:
    text = SOURCE.read_text(encoding="utf-8")
    SOURCE.write_text(text.replace(written_block(), generated_block()), encoding="utf-8")


if __name__ == "__main__":
    if "--write" in sys.argv:
        write()
    sys.stdout.write((throughput_table() if "--table" in sys.argv else generated_block()) + "\n")
