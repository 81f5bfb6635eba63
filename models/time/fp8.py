"""fp8 training speed as the stack's fp8 recipe runs it: which GEMMs run in fp8, what the GEMMs
gain, and what quantizing their operands costs (catalogues/stacks.csv `fp8_recipe`).

Every recipe runs the decoder's linear GEMMs in fp8, forward and both backward GEMMs (input and
weight gradient); attention, the output layer and the MoE router stay in bf16 (torchtitan 9dec370
float8.py: `module_filter_fn=lambda mod, fqn: fqn != "output"`; Megatron's output layer is a
ColumnParallelLinear and its TopKRouter a plain torch linear, both outside the TE fp8 modules; the
router is left out for every recipe). The recipes differ in the casts around those GEMMs:

- `torchao` (torchao.float8 Float8Linear, tensorwise, on every nn.Linear: torchtitan, torchtune,
  Hugging Face accelerate, which tries torchao before Transformer Engine): torchao's own roofline
  (torchao/testing/training/roofline_utils.py `get_tensor_memory_traffic_ovhd_s`, "tensorwise")
  counts per GEMM operand element: an input or output gradient is read in bf16 and written twice in
  fp8 (row- and column-major), 4 bytes, its amax pass fused into the producing op by torch.compile
  (`fuse_with_prev`; uncompiled its own pass, 6 bytes); a weight pays an amax pass and two casts,
  2 + 3 + 3 = 8 bytes, every forward (every micro-batch; counted once per step, fp8_cast_bytes).
  Each nn.Linear casts its own input: q, k and v cast the same normed hidden state three times,
  gate and up twice.
- `te-megatron` (Transformer Engine Float8CurrentScaling in Megatron-Core's TE modules): the norm of
  TELayerNormColumnParallelLinear writes its bf16 output and its amax in one kernel, then one
  quantize reads 2 and writes the row- and column-wise fp8 copies, 4 bytes (transformer_engine
  pytorch/csrc/extensions/normalization.cpp rmsnorm_fwd: `create_hp_tensor_with_amax`,
  `quantize_with_amax`); any other input (attention output, activation, routed tokens) and every
  output gradient pay an amax pass and a cast-transpose, 2 + 4 = 6 bytes; q/k/v (linear_qkv) and
  gate/up (linear_fc1) are one fused GEMM with one input cast; weights are quantized on the first
  micro-batch of the step only (megatron/core/extensions/transformer_engine.py passes
  `is_first_microbatch` to TE, which caches the fp8 weight), 6 bytes once per optimizer step.
- `te-linear` (te.Linear swapped in for each nn.Linear: Lightning Fabric's `transformer-engine`
  precision, litgpt's only fp8 path): every input and output gradient 6 bytes, each linear on its
  own, weights 6 bytes every micro-batch (no `is_first_microbatch`).

Time, in the compute model's units (models/time/performance.py: FLOPs at the generation's calibrated
efficiency e of the bf16 peak): the fp8 GEMMs' share of a linear's time falls by the GEMM time the
fp8 peak saves, both GEMMs at GEMM_PLATEAU of their dense peaks (the DeepGEMM fit,
models/time/calibration.py), so a linear FLOP costs r = 1 - e / GEMM_PLATEAU x (1 - bf16 peak /
fp8 peak) of its bf16 time (fp8_gemm_time_ratio: 0.66 on an H100); the casts stream through HBM at
FP8_CAST_HBM_EFFICIENCY. Nothing is fitted to end-to-end runs: torchtitan's Llama 3.1 8B FSDP runs
(1.28x tokens/s with Float8) check it (tests/models/time/test_fp8_speed.py). The casts grow against
the GEMMs as a rank's GEMMs narrow (tensor parallelism, MoE experts of 768 columns): the fp8 gain
shrinks with the per-rank width.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramplan.models.architecture.params import LayerGroup, LinearModule, layer_groups
from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.catalogue.stack import Fp8Recipe
from vramplan.models.core.catalogue_schema import Architecture, GpuSpec
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.recompute import effective_mode, recomputed_fraction
from vramplan.models.time.calibration import GEMM_PLATEAU, Efficiency
from vramplan.models.time.rates import hbm_stream_seconds


@dataclass(frozen=True)
class Fp8Casts:
    """Bytes moved per element to quantize one GEMM operand (read in bf16, fp8 copies written)."""

    norm_input: float  # an input a norm produces (q/k/v, gate/up, MLA's down projections)
    input: float  # any other input: attention output, activation, routed tokens
    grad_output: float
    weight: float  # one weight quantization (forward and backward copies)
    recomputed_weight: float  # what a recomputed forward quantizes of a weight again
    weight_once_per_step: bool  # quantized on the first micro-batch only (TE is_first_microbatch);
    # documents the recipe: fp8_cast_bytes counts every recipe's weights once per step (see there)
    shared_input_once: bool  # q/k/v and gate/up quantize their common input once (fused modules)


RECIPES: dict[Fp8Recipe, Fp8Casts] = {
    # torchao roofline_utils.py "tensorwise": input / grad_output kernel 3 = 2 + 2 x 1 (amax fused
    # with the previous op under compile); weight kernels 1 + 3 + 4 = 2 + 3 + 3, every forward; a
    # recomputed forward repeats the amax and the forward cast (2 + 3)
    "torchao": Fp8Casts(4.0, 4.0, 4.0, 8.0, 5.0, weight_once_per_step=False, shared_input_once=False),
    # TE Float8CurrentScaling: norm + amax in one kernel then quantize 2 + 1 + 1; elsewhere amax 2 +
    # cast-transpose 2 + 1 + 1; weights once per step (is_first_microbatch), also in recompute
    "te-megatron": Fp8Casts(4.0, 6.0, 6.0, 6.0, 0.0, weight_once_per_step=True, shared_input_once=True),
    # te.Linear per nn.Linear, no is_first_microbatch: every operand amax + cast-transpose, each micro-batch
    "te-linear": Fp8Casts(6.0, 6.0, 6.0, 6.0, 6.0, weight_once_per_step=False, shared_input_once=False),
}


# torchao uncompiled: the amax of an input or output gradient is its own pass (roofline_utils.py
# fuse_with_prev=False: kernel 1 reads the bf16 tensor), 2 + 4 = 6 bytes
_TORCHAO_EAGER = Fp8Casts(6.0, 6.0, 6.0, 8.0, 5.0, weight_once_per_step=False, shared_input_once=False)


def fp8_recipe(job: Job) -> Fp8Recipe:
    """The fp8 recipe the job's stack runs (catalogues/stacks.csv `fp8_recipe`)."""
    return load_stacks()[job.stack].fp8_recipe


def fp8_casts(recipe: Fp8Recipe, job: Job) -> Fp8Casts:
    """The recipe's cast bytes; torchao's amax passes fuse into the producing ops only under
    torch.compile (the job's `compile`)."""
    return _TORCHAO_EAGER if recipe == "torchao" and job.compile == "none" else RECIPES[recipe]


def fp8_gemm_time_ratio(gpu: GpuSpec, efficiency: Efficiency) -> float:
    """Time of a linear FLOP in fp8 over its time in bf16, casts aside, in the compute model's units:
    1 - e / GEMM_PLATEAU x (1 - bf16 peak / fp8 peak) (module docstring), e the efficiency of the GEMMs'
    layers without the GPU's own speed: calibration.stack_efficiency for dense linears,
    calibration.expert_efficiency for routed experts. A GPU's own speed (calibration.GPU_SPEED: how
    fast it runs under load against its datasheet) speeds its GEMMs and the rest alike, so it leaves
    e / GEMM_PLATEAU, the GEMMs' share of a linear's time, as it is."""
    saved = 1 - gpu.bf16_dense_tflops / gpu.fp8_dense_tflops
    return 1 - efficiency.value / GEMM_PLATEAU.value * saved


def fp8_gemm_speedup(gpu: GpuSpec, efficiency: Efficiency) -> float:
    """How much faster the fp8 GEMMs run than bf16 ones in the compute model's units (1 / ratio)."""
    return 1 / fp8_gemm_time_ratio(gpu, efficiency)


def _is_router(arch: Architecture, group: LayerGroup, module: LinearModule) -> bool:
    return group.moe and module.copies_per_layer == 1 and module.out_features == arch.num_experts


def fp8_cast_bytes(arch: Architecture, job: Job, plan: Plan, recipe: Fp8Recipe | None = None) -> float:
    """Bytes one GPU moves per optimizer step quantizing the operands of its fp8 GEMMs.

    Rows: a sequence's tokens on the rank, s / cp, for each of the replica's sequences (MoE experts:
    x experts_per_token, the routed rows a rank's local experts receive in all under balanced
    routing). A TP rank holds in x out / tp of a column-parallel weight and in / tp x out of a
    row-parallel one (experts too: Megatron's expert TP = tp); with sequence parallelism a
    column-parallel input is quantized on the rank's s / tp shard before its all-gather (TE's input
    quantizer before the gather, torchao's Float8ColwiseParallel casts the shard and gathers fp8);
    output gradients are quantized whole. A pipeline rank holds its share of each kind of layer; a
    recomputed forward quantizes its inputs again (and, where the recipe does, its weights).

    Weights are counted once per optimizer step for every recipe: the step's total must not depend
    on how its sequences split into micro-batches, because the solver times a replica's sequences
    before it picks the split (solver/tables.py `_replica_plan`). Exact for Megatron's TE (the
    weights are cached for the step) and for runs without gradient accumulation (torchtitan's
    published runs); torchao and te.Linear quantize the weights again every micro-batch, which this
    undercounts under accumulation."""
    if plan.precision != "fp8":
        return 0.0
    casts = fp8_casts(recipe or fp8_recipe(job), job)
    mode = effective_mode(job, plan)
    # the share of a layer's forward GEMMs a recompute re-runs (models/time/flops.py extra_linear)
    recomputed = recomputed_fraction(arch, job, plan) if mode == "full" else 0.5 if mode == "op" else 0.0
    tokens = job.seq_len // plan.cp  # of one sequence on the rank
    sequences = plan.micro_batch * plan.grad_accum
    tp, sp = plan.tp, plan.sequence_parallel and plan.tp > 1
    total = 0.0
    for group in layer_groups(arch):
        per_sequence = weights = 0.0
        previous_input: tuple[int, bool] | None = None
        for module in group.modules:
            if _is_router(arch, group, module):
                previous_input = None
                continue
            expert = module.copies_per_layer > 1
            row = module.in_features != arch.hidden_size if expert else module.row_parallel  # moe_gemm.expert_shape's split
            k = -(-module.in_features // tp) if row else module.in_features
            n = module.out_features if row else -(-module.out_features // tp)
            rows = tokens * arch.experts_per_token if expert else tokens
            input_rows = rows / tp if sp and not row and not expert else rows
            key = (module.in_features, expert)
            shared = casts.shared_input_once and not row and key == previous_input
            previous_input = None if row else key
            norm_fed = not row and not expert
            input_bytes = 0.0 if shared else (casts.norm_input if norm_fed else casts.input) * input_rows * k
            per_sequence += input_bytes * (1 + recomputed) + casts.grad_output * rows * n
            matrices = k * n * (module.copies_per_layer / plan.ep if expert else 1)
            weights += matrices * (casts.weight + recomputed * casts.recomputed_weight)
        layers = group.count / plan.pp
        total += layers * (sequences * per_sequence + weights)  # weights once per step (docstring)
    return total


def fp8_cast_seconds(arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec) -> float:
    """The casts of fp8_cast_bytes at FP8_CAST_HBM_EFFICIENCY of the GPU's HBM bandwidth (rates.py)."""
    return hbm_stream_seconds(fp8_cast_bytes(arch, job, plan), gpu)
