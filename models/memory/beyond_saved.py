"""What a layer holds beyond the tensors autograd saves for it: the inputs litgpt's QLoRA keeps of
the previous micro-batch (held_inputs_bytes) and the gradients alive while a layer runs its backward
(layer_backward_temporaries). models/memory/activations.py adds both to a micro-batch's peak."""

from __future__ import annotations

from vramplan.models.architecture.params import LayerGroup, layer_groups
from vramplan.models.architecture.quantization import lightning_bnb
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job
from vramplan.models.core.units import ceil_div
from vramplan.models.memory.activation_terms import linear_input_bytes
from vramplan.models.memory.saved_tensors import FP32, Shape


def held_inputs_bytes(arch: Architecture, job: Job, x: Shape) -> int:
    """What litgpt's QLoRA keeps of the previous micro-batch while the next one runs forward: the input
    of every quantised linear. bitsandbytes before 0.43.2 keeps it as a plain ctx attribute
    (bitsandbytes@4870580 (0.42.0) autograd/_functions.py MatMul4Bit.forward `ctx.tensors = (A, B)`),
    which autograd's release of saved tensors after backward leaves alone, so it lives as long as the
    graph; litgpt's loop keeps the graph through the previous `logits` until the next forward returns
    (Lightning-AI/litgpt@e5493986 litgpt/finetune/lora.py fit: `logits = model(input_ids,
    lm_head_chunk_size=128)`, `loss` rebound to a float by `running_loss.compute().item()` at every
    log_interval = 1 iteration). Every layer's linear_input_bytes plus the lm_head's input (e T h:
    Lightning quantises the lm_head, quantization.py LIGHTNING_BNB_STACKS). bitsandbytes 0.43.2
    (#1270, "fix QLoRA mem bug: delete useless buffered activation") stopped keeping it; litgpt
    still warns that it only supports 0.42.0 (finetune/lora.py @2685705), the version every
    published litgpt QLoRA figure ran. 0 for any other stack or method."""
    if not lightning_bnb(arch, job):
        return 0
    layers = sum(group.count * linear_input_bytes(arch, x, group) for group in layer_groups(arch))
    return layers + x.e * x.t * arch.hidden_size


def layer_backward_temporaries(
    arch: Architecture, x: Shape, group: LayerGroup | None = None, tp: int = 1, sequence_parallel: bool = False
) -> int:
    """Gradients alive while one layer runs backward, beyond what it saved: the MLP backward holds
    the gradients of two f-wide tensors per routed token while producing them, and the norms'
    backward two fp32 h-wide gradients. An upper bound, checked against MemTracker peaks of HF
    Llama, Qwen2, Mixtral and Gemma2 layers (tests/models/memory/test_saved_tensors.py). Under TP the f-wide
    gradients are / tp, the h-wide ones too with sequence parallelism."""
    if group is not None and not group.moe:
        widths = arch.dense_intermediate_size or arch.intermediate_size
    else:
        widths = arch.experts_per_token * arch.intermediate_size + arch.shared_expert_intermediate_size
    # BLOOM's bloom_gelu_back builds the derivative of whole f-wide tensors: beside its input and the incoming gradient
    # tanh_out, 0.5 x, 1 - tanh^2, the polynomial and their product are alive at once (modeling_bloom.py)
    gradients = 5 if arch.mlp_kind == "gelu_function" else 2
    mlp = ceil_div(gradients * x.e * x.t * widths, tp)
    norms = 2 * FP32 * x.t * arch.hidden_size
    return mlp + (ceil_div(norms, tp) if sequence_parallel else norms)
