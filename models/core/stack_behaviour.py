"""What a training stack's implementation does that no recipe option changes, each read in the
stack's code: one table, each behaviour with the stacks that show it and the lines it was read in.
models/ asks `job.stack in BEHAVIOUR` where the mechanism is modelled (the module named in each
entry); a stack not named, `custom` or a catalogue of your own, shows none. docs/stacks.md lists them
(`python -c "from vramplan.models.core.stack_behaviour import describe; print(describe())"`).

The entries are defined, with their citations, by what they change: memory_behaviours.py (what a
rank holds), time_behaviours.py (how long a step takes), layout_behaviours.py (which layouts and
micro-batch counts a schedule runs); this module is their registry, and the name models/ imports
them by."""

from __future__ import annotations

from vramplan.models.core.behaviour import Behaviour
from vramplan.models.core.layout_behaviours import (
    DEEPEP_DEEPSEEK_ONLY_STACKS,
    EVEN_VIRTUAL_STAGES,
    PP_GROUPED_INTERLEAVING_STACKS,
    SHARDED_MODEL_PARALLEL_STACKS,
)
from vramplan.models.core.memory_behaviours import (
    ALWAYS_SHARDED_STACKS,
    DDP_BUCKET_COPY_STACKS,
    DP_ENGINE_BY_PLAN_STACKS,
    FLEX_DISPATCHER_BUFFER_STACKS,
    FP32_REDUCE_STACKS,
    FSDP1_STACKS,
    FSDP2_STACKS,
    FUSED_QKV_DROPOUT_STACKS,
    GATHERED_SP_INPUT_STACKS,
    HOOK_REDUCED_ZERO1_STACKS,
    IN_PLACE_DP_BUFFER_STACKS,
    LIGHTNING_BNB_STACKS,
    LOGITS_RELEASED_STACKS,
    LOSS_PARALLEL_STACKS,
    MIXED_FLAT_PARAM_STACKS,
    RETAINED_INPUT_GRAD_STACKS,
    ROOT_GATHERED_STACKS,
    SEPARATE_END_UNITS_STACKS,
    STEP_FP32_GRAD_COPY_STACKS,
    TORCH_PIPELINING_STACKS,
    TORCHAO_NF4_STACKS,
    UNSHARDED_ACCUMULATION_STACKS,
)
from vramplan.models.core.time_behaviours import (
    EAGER_ELEMENTWISE_STACKS,
    FLOAT8_TP_STACKS,
    OVERLAPPED_P2P_STACKS,
    SERIAL_TP_BACKWARD_STACKS,
    TOKEN_PERMUTATION_STACKS,
    TORCH_RING_CP_STACKS,
)

__all__ = ["BEHAVIOURS", "Behaviour", "describe",
           "ALWAYS_SHARDED_STACKS",
           "DDP_BUCKET_COPY_STACKS",
           "DEEPEP_DEEPSEEK_ONLY_STACKS",
           "SHARDED_MODEL_PARALLEL_STACKS",
           "DP_ENGINE_BY_PLAN_STACKS",
           "EAGER_ELEMENTWISE_STACKS",
           "EVEN_VIRTUAL_STAGES",
           "FLEX_DISPATCHER_BUFFER_STACKS",
           "FLOAT8_TP_STACKS",
           "FP32_REDUCE_STACKS",
           "FSDP1_STACKS",
           "FSDP2_STACKS",
           "FUSED_QKV_DROPOUT_STACKS",
           "GATHERED_SP_INPUT_STACKS",
           "HOOK_REDUCED_ZERO1_STACKS",
           "IN_PLACE_DP_BUFFER_STACKS",
           "LIGHTNING_BNB_STACKS",
           "LOGITS_RELEASED_STACKS",
           "LOSS_PARALLEL_STACKS",
           "MIXED_FLAT_PARAM_STACKS",
           "OVERLAPPED_P2P_STACKS",
           "PP_GROUPED_INTERLEAVING_STACKS",
           "RETAINED_INPUT_GRAD_STACKS",
           "ROOT_GATHERED_STACKS",
           "SEPARATE_END_UNITS_STACKS",
           "SERIAL_TP_BACKWARD_STACKS",
           "STEP_FP32_GRAD_COPY_STACKS",
           "TOKEN_PERMUTATION_STACKS",
           "TORCHAO_NF4_STACKS",
           "TORCH_PIPELINING_STACKS",
           "TORCH_RING_CP_STACKS",
           "UNSHARDED_ACCUMULATION_STACKS",
]

BEHAVIOURS = {
    "EVEN_VIRTUAL_STAGES": EVEN_VIRTUAL_STAGES,
    "UNSHARDED_ACCUMULATION_STACKS": UNSHARDED_ACCUMULATION_STACKS,
    "MIXED_FLAT_PARAM_STACKS": MIXED_FLAT_PARAM_STACKS,
    "HOOK_REDUCED_ZERO1_STACKS": HOOK_REDUCED_ZERO1_STACKS,
    "FUSED_QKV_DROPOUT_STACKS": FUSED_QKV_DROPOUT_STACKS,
    "GATHERED_SP_INPUT_STACKS": GATHERED_SP_INPUT_STACKS,
    "LOSS_PARALLEL_STACKS": LOSS_PARALLEL_STACKS,
    "ROOT_GATHERED_STACKS": ROOT_GATHERED_STACKS,
    "LIGHTNING_BNB_STACKS": LIGHTNING_BNB_STACKS,
    "TORCHAO_NF4_STACKS": TORCHAO_NF4_STACKS,
    "LOGITS_RELEASED_STACKS": LOGITS_RELEASED_STACKS,
    "EAGER_ELEMENTWISE_STACKS": EAGER_ELEMENTWISE_STACKS,
    "SERIAL_TP_BACKWARD_STACKS": SERIAL_TP_BACKWARD_STACKS,
    "OVERLAPPED_P2P_STACKS": OVERLAPPED_P2P_STACKS,
    "TORCH_RING_CP_STACKS": TORCH_RING_CP_STACKS,
    "FSDP2_STACKS": FSDP2_STACKS,
    "FSDP1_STACKS": FSDP1_STACKS,
    "FP32_REDUCE_STACKS": FP32_REDUCE_STACKS,
    "SEPARATE_END_UNITS_STACKS": SEPARATE_END_UNITS_STACKS,
    "FLOAT8_TP_STACKS": FLOAT8_TP_STACKS,
    "DDP_BUCKET_COPY_STACKS": DDP_BUCKET_COPY_STACKS,
    "IN_PLACE_DP_BUFFER_STACKS": IN_PLACE_DP_BUFFER_STACKS,
    "ALWAYS_SHARDED_STACKS": ALWAYS_SHARDED_STACKS,
    "DP_ENGINE_BY_PLAN_STACKS": DP_ENGINE_BY_PLAN_STACKS,
    "TOKEN_PERMUTATION_STACKS": TOKEN_PERMUTATION_STACKS,
    "TORCH_PIPELINING_STACKS": TORCH_PIPELINING_STACKS,
    "RETAINED_INPUT_GRAD_STACKS": RETAINED_INPUT_GRAD_STACKS,
    "STEP_FP32_GRAD_COPY_STACKS": STEP_FP32_GRAD_COPY_STACKS,
    "PP_GROUPED_INTERLEAVING_STACKS": PP_GROUPED_INTERLEAVING_STACKS,
    "FLEX_DISPATCHER_BUFFER_STACKS": FLEX_DISPATCHER_BUFFER_STACKS,
    "DEEPEP_DEEPSEEK_ONLY_STACKS": DEEPEP_DEEPSEEK_ONLY_STACKS,
    "SHARDED_MODEL_PARALLEL_STACKS": SHARDED_MODEL_PARALLEL_STACKS,
}


def describe() -> str:
    """One line per behaviour: its name, the stacks that show it, what it is and where it is modelled."""
    return "\n".join(f"{name}: {', '.join(sorted(b.stacks))}: {b.summary} ({b.modelled_in})"
                     for name, b in BEHAVIOURS.items())
