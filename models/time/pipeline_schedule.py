"""The pipeline schedule's stalls: the 1F1B bubble and what the slowest stage adds to the mean's
(models/time/parallel_time.py adds them to the model-parallel time; the solver's step tables and
bounds read them per layout)."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Union, overload

from vramplan.models.architecture.parallel import Split
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Plan
from vramplan.models.time.flops import forward_flops_per_token

if TYPE_CHECKING:
    import numpy as np

Degree = Union[int, "np.ndarray"]  # a degree, or a numpy array of them (the solver's grids)
Seconds = Union[float, "np.ndarray"]


@overload
def bubble_s(pp: int, vpp: int, grad_accum: int, compute_s: float) -> float: ...
@overload
def bubble_s(pp: Degree, vpp: Degree, grad_accum: np.ndarray, compute_s: Seconds) -> np.ndarray: ...
@overload
def bubble_s(pp: Degree, vpp: Degree, grad_accum: Degree, compute_s: np.ndarray) -> np.ndarray: ...
def bubble_s(pp: Degree, vpp: Degree, grad_accum: Degree, compute_s: Seconds) -> Seconds:
    """The 1F1B bubble: (pp - 1) / (vpp x accumulation) of a step's stage time (stage_time_s; the
    solver's bounds pass the compute alone, a lower bound) (each may be a numpy array: the solver's
    grids take it elementwise)."""
    return compute_s * (pp - 1) / (vpp * grad_accum)


def pp_bubble_s(plan: Plan, stage_s: float) -> float:
    return bubble_s(plan.pp, plan.vpp, plan.grad_accum, stage_s)


def stage_time_s(compute_s: float, imbalance: float, exposed_s: float) -> float:
    """A step's time of the slowest pipeline stage, whose micro-batches the 1F1B bubble idles for:
    its compute (the mean rank's x imbalance) and the model-parallel time its micro-batches wait on
    (exposed TP collectives, p2p, CP ring, EP all-to-all: parallel_time.parallel_seconds). Under
    1F1B each of the pp - 1 warm-up and cool-down slots holds one micro-batch of a stage, forward or
    backward, collectives and all (Narayanan et al. 2021 sec. 2.2: the bubble is (p - 1) x (t_f +
    t_b), the time of a micro-batch's forward and backward on a stage); torchtitan's blocking TP and
    ring collectives lengthen every slot (models/time/ring_attention.py)."""
    return compute_s * imbalance + exposed_s


@lru_cache(maxsize=4096)
def stage_imbalance(arch: Architecture, seq_len: int, split: Split, recomputed: tuple[int, ...] | None = None) -> float:
    """The slowest pipeline rank's work over the mean rank's: under 1F1B every micro-batch waits on
    the slowest stage, forward and backward (Narayanan et al. 2021 sec. 2.2; Llama 3's report sec.
    3.3.2 takes a layer off the first and the last stage for the embedding and the output layer).
    A rank's work, in forward passes of its layers: its decoder layers, each the model's mean layer
    (forward_flops_per_token's decoder and attention FLOPs / layers; a model that mixes kinds of
    layer counts its mean), a third of one more for each layer full recompute re-runs on it
    (`recomputed`, models/memory/recompute.py stage_recomputed: a re-run forward next to a forward
    and a backward of twice its FLOPs), and on the last rank the output layer's. 1 without a pipeline."""
    if len(split) == 1:
        return 1.0
    decoder, attention, logits = forward_flops_per_token(arch, seq_len)
    per_layer = (decoder + attention) / arch.num_layers
    rerun = recomputed or (0,) * len(split)
    work = [(count + again / 3) * per_layer for count, again in zip(split, rerun)]
    work[-1] += logits
    return max(work) * len(work) / sum(work)


def pp_imbalance_s(imbalance: float, compute_s: float) -> float:
    """What the slowest rank adds to the mean rank's compute (compute_s: the mean's)."""
    return compute_s * (imbalance - 1)
