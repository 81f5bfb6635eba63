"""What a MoE layer's expert GEMMs cost beyond the same FLOPs run as dense-shaped matmuls: the
GEMM shape the layout leaves each expert, and the kernel the stack runs them with.

The dense efficiency (models/time/calibration.py COMPUTE_EFFICIENCY) is fitted to dense models,
whose matmuls reduce over the hidden width with thousands of tokens per micro-batch. A routed
expert sees only the tokens routed to it: per micro-batch

    m = tokens of the micro-batch on the rank (s / cp) x experts_per_token x ep / num_experts

(the all-to-all gathers each local expert's tokens from the ep ranks; with TP the tokens are
all-gathered over the TP group and each TP rank holds 1/tp of every expert's width, Megatron's
expert_tensor_parallel_size = tp). Each expert matrix (in x out) runs three GEMMs per micro-batch:
forward (m, out, in), input gradient (m, in, out) and weight gradient (in, out, m), the last one
reducing over the m tokens. A GEMM of M x N x K then takes (gemm_seconds)

    compute = 2 M N K / (peak x GEMM_PLATEAU x K / (K + GEMM_K_HALF))     tiles amortised over K
    memory  = bytes (M K + K N + M N) / (HBM x GEMM_HBM_EFFICIENCY)        the weights stream once
    time    = sqrt(compute^2 + memory^2)

fitted to DeepGEMM's FP8 GEMM table on H800 (28 shapes, calibration.py): few tokens per expert make
the GEMMs stream their weights instead of computing (memory-bound below m ~ 300 on an H100), narrow
experts (small in or out) and few tokens (the weight-gradient K = m) amortise each tile over a
short K. The expert time's slowdown is the sum of these times over the same GEMMs at the model's
own dense shape (compute-bound, K = hidden), never below 1.

The kernel is the stack's (catalogues/stacks.csv `moe_kernel`, docs/stacks.md): `grouped` runs all
local experts as one grouped GEMM per matrix (Megatron TEGroupedMLP with --moe-grouped-gemm,
torchtitan / torchtune torch._grouped_mm, transformers >= 5 experts_implementation="grouped_mm");
`loop` launches each expert's GEMMs on its own (litgpt LLaMAMoE `for mask, expert in
zip(masks, self.experts)`): the same GEMM shapes plus LOOP_EXPERT_OVERHEAD_S per expert and
micro-batch for its gather, nonzero (a host sync), activation, scatter and their backward.

The solver reads this through models/time/parallel_time.py's per-layout terms, which see a
replica's sequences but not how they split into micro-batches, so m is counted for one sequence
per micro-batch: exact for micro-batch 1 (the large-MoE runs: DeepSeek-V3, Megatron-Bridge),
pessimistic for larger ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import sqrt
from typing import TYPE_CHECKING, Union, overload

from vramplan.models.architecture.params import layer_groups
from vramplan.models.catalogue.stack import MoeKernel
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.layout import Layout
from vramplan.models.core.units import BYTES_PER_GB
from vramplan.models.time.calibration import (
    GEMM_HBM_EFFICIENCY,
    GEMM_K_HALF,
    GEMM_PLATEAU,
    LOOP_EXPERT_OVERHEAD_S,
)

if TYPE_CHECKING:
    import numpy as np

_TERA = 10**12
Calls = Union[float, "np.ndarray"]  # expert calls, or a numpy array of them (the solver's grids)


def gemm_seconds(m: float, n: float, k: float, peak_tflops: float, hbm_gb_per_s: float, element_bytes: int) -> float:
    """One M x N x K GEMM: its compute at the plateau rate (tiles amortised over K) and its operand
    traffic through HBM, combined in quadrature (the DeepGEMM fit, calibration.py)."""
    compute = 2 * m * n * k / (peak_tflops * _TERA * GEMM_PLATEAU.value * k / (k + GEMM_K_HALF.value))
    memory = element_bytes * (m * k + k * n + m * n) / (hbm_gb_per_s * BYTES_PER_GB * GEMM_HBM_EFFICIENCY.value)
    return sqrt(compute * compute + memory * memory)


@dataclass(frozen=True)
class ExpertShape:
    """The expert GEMMs of one rank: tokens each local expert sees per micro-batch (one sequence
    per micro-batch), the (in, out) of each expert matrix on this rank, the model's hidden width
    (the dense shape the efficiency is calibrated on) and the bytes of one GEMM operand element."""

    tokens: float
    matrices: tuple[tuple[int, int], ...]
    hidden: int
    element_bytes: int
    weight_gradients: bool = True  # False under LoRA / QLoRA: frozen experts need no weight-gradient GEMM


def expert_shape(arch: Architecture, seq_len: int, layout: Layout, element_bytes: int,
                 weight_gradients: bool = True) -> ExpertShape | None:
    """None for a dense model."""
    if not arch.is_moe:
        return None
    tokens = (seq_len // layout.cp) * arch.experts_per_token * layout.ep / arch.num_experts
    h, tp = arch.hidden_size, layout.tp
    group = next(g for g in layer_groups(arch) if g.moe)
    matrices = tuple((m.in_features, -(-m.out_features // tp)) if m.in_features == h else (-(-m.in_features // tp), m.out_features)
                     for m in group.modules if m.copies_per_layer > 1)
    return ExpertShape(tokens, matrices, h, element_bytes, weight_gradients)


def expert_slowdown(shape: ExpertShape, peak_tflops: float, hbm_gb_per_s: float) -> float:
    """Time of the expert GEMMs at their shape over the time of the same FLOPs at the model's dense
    shape (>= 1)."""
    m, h, e = shape.tokens, shape.hidden, shape.element_bytes
    dense_rate = peak_tflops * _TERA * GEMM_PLATEAU.value * h / (h + GEMM_K_HALF.value)
    actual = ideal = 0.0
    for fan_in, fan_out in shape.matrices:
        gemms = ((m, fan_out, fan_in), (m, fan_in, fan_out), (fan_in, fan_out, m))  # forward, input grad, weight grad
        for rows, cols, depth in gemms if shape.weight_gradients else gemms[:2]:
            actual += gemm_seconds(rows, cols, depth, peak_tflops, hbm_gb_per_s, e)
            ideal += 2 * m * fan_in * fan_out / dense_rate
    return max(1.0, actual / ideal) if ideal else 1.0


def moe_layers(arch: Architecture) -> int:
    """Decoder layers with routed experts."""
    return sum(g.count for g in layer_groups(arch) if g.moe)


def expert_invocations(arch: Architecture, layout: Layout, sequences: int) -> float:
    """Local expert calls one GPU makes per optimizer step, one sequence per micro-batch: each
    pipeline rank runs its stage's MoE layers (the average stage) for every sequence of the replica."""
    if not arch.is_moe:
        return 0.0
    return sequences * (arch.num_experts / layout.ep) * moe_layers(arch) / layout.pp


@overload
def loop_overhead_s(kernel: MoeKernel, invocations: float) -> float: ...
@overload
def loop_overhead_s(kernel: MoeKernel, invocations: np.ndarray) -> Calls: ...
def loop_overhead_s(kernel: MoeKernel, invocations: Calls) -> Calls:
    """The loop kernel's fixed cost per expert call; none for a grouped kernel."""
    return invocations * LOOP_EXPERT_OVERHEAD_S.value if kernel == "loop" else 0.0
