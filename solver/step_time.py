"""The integer step time of a point: one definition, in the three forms the solver needs (one point,
numpy grids, a CP-SAT model), from the terms solver/space_tables.py tabulates per (shape, layout):

    step_us = base_us + exposed_us + optimizer_us
    base_us = compute_us[r, p, l] + parallel_us[r, p, l] + bubble_us[r, p, l, b]
    exposed_us = max(0, fwd_comm_us - fwd_window_us) + max(bwd_comm_us - bwd_window_us, tail_us)
    tail_us = ceil((fwd_comm_us + bwd_comm_us) / layers)

The windows are the phases' compute [r, p, l] where the gradients reduce every micro-batch
(ZeRO-2/3), and the last micro-batch's share of them [r, p, l, b] where they reduce once a step
(ZeRO-0/1: models/time/performance.py dp_windows_s).

fwd/bwd_comm_us[z, b, p, l] is the data-parallel traffic of a phase (ZeRO stage z), each window
[r, p] the compute it can hide behind. Every term is rounded up to a whole microsecond but the
windows, rounded down (windows_us), so the integer step is never shorter than the model's:
the integer form of models/time/performance.py step_time_s (exposed_communication_s: each phase's
traffic beyond its window, and at least one layer's share of the whole, the last bucket) plus
models/time/parallel_time.py's TP/PP/CP/EP terms and bubble. verify.py re-evaluates every plan
with models/ and allows STEP_ROUNDING_US of rounding between the two.

Who uses which form: points.step_us (a point: the brute-force oracle, verification, the
explanations' tables), add_step (the CP-SAT unit model, solver/cpsat_model.py), exposed_lower_us
(the branch-and-bound's bounds, solver/cpsat_bounds.py). tests/solver/test_step_time.py holds the
three to the same integers.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from vramplan.models.core.units import US_PER_S
from vramplan.models.time.performance import overlap_windows_s, reduces_each_micro_batch

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

    from vramplan.solver.space_tables import StepTables

# The integer step rounds 8 terms to the microsecond (compute, model-parallel collectives, bubble,
# forward and backward traffic or the tail, the optimizer step up; the two windows down), so it
# sits within this many microseconds above models/' floating-point step time: verify.py's tolerance.
STEP_ROUNDING_US = 8


def windows_us(forward_share: float, compute_s: float) -> tuple[int, int]:
    """(forward, backward) overlap windows in whole microseconds, rounded down (hide no more than
    the model's: models.performance.overlap_windows_s)."""
    return floor_us(overlap_windows_s(compute_s, forward_share))


def floor_us(windows_s: tuple[float, float]) -> tuple[int, int]:
    """Windows in whole microseconds, rounded down (once_a_step_windows_s's too)."""
    return math.floor(windows_s[0] * US_PER_S), math.floor(windows_s[1] * US_PER_S)


def tail_us(comm_us: int, num_layers: int) -> int:
    """At least one layer's share of the traffic stays exposed (the last bucket), rounded up."""
    return -(-comm_us // num_layers)


def exposed_us(comm_us: tuple[int, int], window_us: tuple[int, int], num_layers: int) -> int:
    """The integer form of models.performance.exposed_communication_s: each phase's traffic beyond
    its window, and at least one layer's share of the whole (tail_us)."""
    forward, backward = comm_us
    return max(0, forward - window_us[0]) + max(backward - window_us[1], tail_us(forward + backward, num_layers))


def point_step_us(t: StepTables, zero: int, zf: int, r: int, p: int, b: int, li: int, num_layers: int) -> int:
    """One point's step time from its shape's step tables t (layout li tabulated; zero: the ZeRO
    stage of the ZeRO x offload choice zf)."""
    # ZeRO-0/1 reduce once a step: their windows depend on the accumulation (models/time/performance.py dp_windows_s)
    window = t.windows_us[r, p, li] if reduces_each_micro_batch(zero) else t.once_windows_us[r, p, li, b]
    exposed = exposed_us(t.comm_us[zero, b, p, li], window, num_layers)
    return t.compute_us[r, p, li] + t.parallel_us[r, p, li] + t.bubble_us[r, p, li, b] + exposed + t.optimizer_us[zf, b, p, li]


def exposed_lower_us(comm_us: np.ndarray, compute_us: np.ndarray, num_layers: int) -> np.ndarray:
    """A lower bound of exposed_us for traffic comm_us = forward + backward whatever its split
    between the phases, elementwise: the two windows sum to at most the compute
    (overlap_windows_s), so exposed >= max(comm - compute, tail_us(comm))."""
    return np.maximum(comm_us - compute_us, -(-comm_us // num_layers))


def add_step(model: cp_model.CpModel, base: cp_model.IntVar, comm: tuple[cp_model.IntVar, cp_model.IntVar],
             window: tuple[cp_model.IntVar, cp_model.IntVar], tail: cp_model.IntVar, optimizer: cp_model.IntVar,
             uppers: dict[str, int], step_cap: int | None) -> tuple[cp_model.IntVar, int] | None:
    """The step time as a CP-SAT variable over the tabulated terms' variables (tail: tail_us of the
    same traffic, tabulated beside it; uppers: each term's largest tabulated value, by the column
    names of solver/cpsat_model.py), capped at step_cap, with its upper bound; None when no step
    fits under the cap."""
    fwd_exposed = model.new_int_var(0, max(0, uppers["fwd_comm_us"]), "fwd_exposed_us")
    model.add_max_equality(fwd_exposed, [comm[0] - window[0], 0])
    bwd_exposed = model.new_int_var(0, max(0, uppers["bwd_comm_us"], uppers["tail_us"]), "bwd_exposed_us")
    model.add_max_equality(bwd_exposed, [comm[1] - window[1], tail])
    step_ub = (uppers["compute_parallel_bubble_us"] + uppers["fwd_comm_us"] + max(uppers["bwd_comm_us"], uppers["tail_us"])
               + uppers["optimizer_us"])
    if step_cap is not None:
        step_ub = min(step_ub, step_cap)
    if step_ub < 0:
        return None
    step = model.new_int_var(0, step_ub, "step_us")
    model.add(step == base + fwd_exposed + bwd_exposed + optimizer)
    return step, step_ub
