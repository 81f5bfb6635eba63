"""Bytes per parameter of the model-state pillars under a training stack's recipe choices.

master_weights (the Job field, `--master-weights`):
- "fp32": mixed precision as ZeRO accounts it (models/memory/precision.py): 16-bit working copy, fp32
  master copy inside the optimizer, fp32 Adam moments.
- "none": pure 16-bit training, torchtune (`dtype: bf16`, the model is built in bf16 and
  `torch.optim.AdamW` runs on it: recipes/full_finetune_single_device.py) and litgpt
  (`--precision bf16-true`: Fabric's HalfPrecision plugin casts the module to bf16). There is
  no master copy, gradients are in the parameters' dtype, and torch's AdamW allocates its
  moments with `torch.zeros_like(p, memory_format=torch.preserve_format)` (torch/optim/adamw.py
  `_init_group`), so they are 16-bit too. bitsandbytes 8-bit states stay one uint8 per element
  plus one fp32 absmax per 256-block whatever the parameter dtype (bitsandbytes/optim/optimizer.py
  `Optimizer8bit.init_state`: `torch.zeros_like(p, dtype=torch.uint8)`).

Paged optimizers (`adamw-8bit-paged`, bitsandbytes `PagedAdamW8bit`): the states are allocated by
`bitsandbytes.functional.get_paged` with cudaMallocManaged (unified memory), outside PyTorch's
caching allocator: `torch.cuda.max_memory_allocated` never shows them, and the driver pages them
to host RAM when the GPU runs out. They are reported as `paged_bytes`, not as GPU memory a plan
needs.

Optimizer in backward (torchtune `optimizer_in_bwd: True`, torchtune/training/memory.py
`register_optim_in_bwd_hooks`): each parameter's optimizer step runs in its
`register_post_accumulate_grad_hook` and `zero_grad(set_to_none=True)` frees its gradient at once,
so no full gradient buffer exists: at most the largest single parameter's gradient is alive.
"""

from __future__ import annotations

from fractions import Fraction

from vramplan.models.architecture.lora import adapted_modules
from vramplan.models.architecture.params import count_params, layer_linear_modules
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job, Precision
from vramplan.models.memory.precision import (
    FP32_BYTES,
    HALF_BYTES,
    gradient_bytes_per_param,
    optimizer_bytes_per_param,
    weight_bytes_per_param,
)

PAGED_OPTIMIZERS = frozenset({"adamw-8bit-paged"})
EIGHT_BIT_OPTIMIZERS = frozenset({"adamw-8bit", "adamw-8bit-paged"})
BNB_BLOCK = 256  # bitsandbytes blockwise 8-bit optimizer block (one fp32 absmax per block)


def pure_half(job: Job, precision: Precision) -> bool:
    """No fp32 master copy: the parameters themselves are 16-bit and the optimizer steps them."""
    return job.master_weights == "none" and precision != "fp32"


def _eight_bit_states(num_states: int) -> Fraction:
    return num_states * (1 + Fraction(FP32_BYTES, BNB_BLOCK))


def optimizer_state_bytes_per_param(job: Job, precision: Precision) -> Fraction:
    """Optimizer-state bytes per trainable parameter (the master copy included where there is one)."""
    optimizer = "adamw-8bit" if job.optimizer in EIGHT_BIT_OPTIMIZERS else job.optimizer
    if not pure_half(job, precision):
        return optimizer_bytes_per_param(optimizer, precision)
    if optimizer == "adamw":
        return Fraction(2 * HALF_BYTES)  # m and v like the bf16 parameter
    if optimizer == "adamw-8bit":
        return _eight_bit_states(2)
    if optimizer == "sgd":
        return Fraction(HALF_BYTES)  # the momentum buffer, like the parameter
    raise ValueError(f"unknown optimizer {job.optimizer!r}")


def gradient_state_bytes_per_param(job: Job, precision: Precision) -> Fraction:
    if pure_half(job, precision):
        return Fraction(HALF_BYTES)  # .grad has the parameter's dtype
    return gradient_bytes_per_param(precision, job.accounting)


def trainable_weight_bytes_per_param(job: Job, precision: Precision) -> Fraction:
    """Working copy of a trainable parameter; PEFT-prepared QLoRA adapters are fp32."""
    if job.method == "qlora" and job.qlora_prep == "peft":
        return Fraction(FP32_BYTES)
    return weight_bytes_per_param(precision)


def largest_trainable_tensor_params(arch: Architecture, job: Job) -> int:
    """Elements of the largest trainable tensor: the most gradient optimizer-in-backward holds."""
    if job.method == "full":
        counts = count_params(arch)
        # MoE experts are one fused (E, ...) parameter per projection in transformers 5 (grouped_mm).
        largest_linear = max(m.copies_per_layer * m.in_features * m.out_features for m in layer_linear_modules(arch))
        # Gemma 4's per-layer input table (vocab x layers x width) is one tensor too
        ple = arch.per_layer_input_vocab * arch.num_layers * arch.per_layer_input_width
        return max(arch.vocab_size * arch.hidden_size, counts.lm_head, largest_linear, ple)
    # LoRA: the largest adapter matrix, A (r x d_in) or B (d_out x r).
    r = job.lora_rank
    return max(r * max(m.in_features, m.out_features) for m in adapted_modules(arch, job.lora_targets))


def is_paged(job: Job) -> bool:
    return job.optimizer in PAGED_OPTIMIZERS
