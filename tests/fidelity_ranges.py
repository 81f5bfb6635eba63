"""The ranges of models/core/fidelity_ranges.py, derived from the evidence (tests/data): measured /
predicted per stack (memory; throughput on calibrated GPUs), known misses left out, with their
leave-one-out coverage. `python tests/fidelity_ranges.py --write` regenerates the block in models/core/fidelity_ranges.py
(without --write it prints it); tests/models/test_fidelity_ranges.py checks that the file holds it."""

from __future__ import annotations

import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import measured_peaks
import measured_throughput

from vramplan.models.catalogue.catalogue import load_catalogue
from vramplan.models.core.fidelity_ranges import MIN_RUNS, Range

DIGITS = 2
SPREAD_RUNS = 3  # a stack's runs count towards the shared spread from this many (a median needs a few)


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


def throughput_coverage() -> tuple[int, int]:
    return coverage(throughput_ratios())


def memory_ratios() -> dict[str, list[float]]:
    """measured / predicted peak per stack, runs with a measured peak that are not known misses."""
    catalogue, by_stack = load_catalogue(), defaultdict(list)
    for run in measured_peaks.load_runs():
        if not run.oom and not run.known_miss:
            by_stack[run.cells["stack"]].append(1 / measured_peaks.compare(run, catalogue).ratio)
    return dict(sorted(by_stack.items()))


def throughput_ratios() -> dict[str, list[float]]:
    """measured / predicted throughput per stack, runs on GPU generations with a calibrated
    efficiency that are not known misses."""
    catalogue, by_stack = load_catalogue(), defaultdict(list)
    for run in measured_throughput.load_runs():
        comparison = measured_throughput.compare(run, catalogue)
        if comparison.calibrated and not run.known_miss:
            by_stack[run.cells["stack"]].append(1 / comparison.ratio)
    return dict(sorted(by_stack.items()))


def _ranges(by_stack: dict[str, list[float]], pooled_what: str, where: str = "") -> tuple[dict[str, Range], Range]:
    """The stacks' own ranges (MIN_RUNS runs or more) and the pooled one."""
    pooled = [ratio for ratios in by_stack.values() for ratio in ratios]
    stacks = {stack: _stack_range(stack, by_stack, where) for stack, ratios in by_stack.items() if len(ratios) >= MIN_RUNS}
    return stacks, _range(pooled, pooled_what)


def ranges() -> tuple[dict[str, Range], Range, dict[str, Range], Range]:
    memory, pooled_memory = _ranges(memory_ratios(), "runs of all stacks")
    throughput, pooled_throughput = _ranges(throughput_ratios(), "runs of all stacks on calibrated GPUs",
                                            " on calibrated GPUs")
    return memory, pooled_memory, throughput, pooled_throughput


def _literal(r: Range) -> str:
    return f'Range({r.low:.2f}, {r.high:.2f}, {r.runs}, {r.coverage:.2f}, "{r.basis}")'


def generated_block() -> str:
    memory, pooled_memory, throughput, pooled_throughput = ranges()
    lines = ["MEMORY_RANGES: dict[str, Range] = {"]
    lines += [f'    "{stack}": {_literal(r)},' for stack, r in memory.items()]
    lines += ["}", f"POOLED_MEMORY_RANGE = {_literal(pooled_memory)}", "THROUGHPUT_RANGES: dict[str, Range] = {"]
    lines += [f'    "{stack}":\n        {_literal(r)},' for stack, r in throughput.items()]
    lines += ["}", f"THROUGHPUT_RANGE = {_literal(pooled_throughput)}"]
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
    sys.stdout.write(generated_block() + "\n")
