"""litgpt's QLoRA (`finetune/lora.py --quantize bnb.nf4`, Lightning Fabric's BitsandbytesPrecision,
bitsandbytes 0.42.0), issue 32's `litgpt-bnb-qlora` rows. Byte counts from the code
(models/architecture/quantization.py LIGHTNING_BNB_STACKS):
- Lightning swaps every torch.nn.Linear for the bnb class while litgpt builds the model, the lm_head
  included, which litgpt never ties to the embedding;
- it quantises an fp16 copy of each weight, so a bf16 GEMM dequantises to fp16 and casts to bf16
  (bitsandbytes 0.42.0 MatMul4Bit.forward / backward): 4 bytes a weight of the largest matrix;
- bitsandbytes < 0.43.2 keeps each quantised linear's input as `ctx.tensors = (A, B)`, which
  autograd does not release after backward, and litgpt's loop keeps the graph through the next
  micro-batch's forward (the previous `logits`).
The published A10G runs (config_hub/finetune/README.md @ 00af8b0d) read 0.70-0.80 without these
and 0.92-0.96 with them (tests/data/measured_peaks.csv)."""

from __future__ import annotations

from vramplan.models.architecture.quantization import (
    WeightFormat,
    dequantised_weight_bytes,
    matrix_bytes,
    quantised_lm_head_bytes,
)
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.activation_terms import linear_input_bytes
from vramplan.models.memory.activations import activations
from vramplan.models.memory.beyond_saved import held_inputs_bytes
from vramplan.models.memory.model_states import frozen_base_bytes
from vramplan.models.memory.saved_tensors import Shape

NF4_DQ = WeightFormat("nf4", double_quant=True)


def _jobs(seq_len: int = 512) -> tuple[Job, Job]:
    litgpt = Job(method="qlora", qlora_prep="16bit", stack="litgpt", seq_len=seq_len,
                 lora_targets=("q_proj", "v_proj"), lora_rank=32)
    hf = Job(method="qlora", qlora_prep="16bit", stack="hf", seq_len=seq_len,
             lora_targets=("q_proj", "v_proj"), lora_rank=32)
    return litgpt, hf


def test_lightning_quantises_the_lm_head_and_unties_it(catalogue) -> None:
    litgpt, hf = _jobs()
    llama = catalogue.architecture("llama-2-7b")  # untied: the 16-bit lm_head becomes a quantised one
    v, h = llama.vocab_size, llama.hidden_size
    # W / 2 packed + W / 64 uint8 absmax + 4 W / 16384 fp32 second-level scales, W = 131,072,000
    assert quantised_lm_head_bytes(llama, litgpt) == matrix_bytes(NF4_DQ, h, v) == 67_616_000
    assert quantised_lm_head_bytes(llama, hf) == 0
    assert frozen_base_bytes(llama, litgpt, "bf16") == frozen_base_bytes(llama, hf, "bf16") - 2 * v * h + 67_616_000
    gemma = catalogue.architecture("gemma-2-9b")  # tied in the checkpoint: litgpt adds its own lm_head
    assert gemma.tie_word_embeddings
    assert frozen_base_bytes(gemma, _jobs()[0], "bf16") == (
        frozen_base_bytes(gemma, _jobs()[1], "bf16") + matrix_bytes(NF4_DQ, gemma.hidden_size, gemma.vocab_size))
    assert quantised_lm_head_bytes(llama, Job(method="lora", stack="litgpt")) == 0  # only QLoRA quantises


def test_dequantising_for_the_gemm_holds_a_16_bit_copy_of_the_largest_matrix(catalogue) -> None:
    litgpt, hf = _jobs()
    llama = catalogue.architecture("llama-2-7b")
    mlp, head = 11008 * 4096, 32000 * 4096
    # Lightning's fp16 quant state, cast to the bf16 compute dtype: 2 + 2 bytes a weight
    assert dequantised_weight_bytes(llama, litgpt, 2, "bf16") == (4 * mlp, 4 * head)
    assert dequantised_weight_bytes(llama, litgpt, 2, "fp16") == (2 * mlp, 2 * head)
    # transformers quantises the loaded bf16 weights and keeps the lm_head 16-bit
    assert dequantised_weight_bytes(llama, hf, 2, "bf16") == (2 * mlp, 0)
    assert dequantised_weight_bytes(llama, Job(method="lora"), 2, "bf16") == (0, 0)


def test_the_previous_micro_batch_keeps_every_quantised_linears_input(catalogue) -> None:
    litgpt, hf = _jobs()
    llama = catalogue.architecture("llama-2-7b")
    x = Shape(b=2, s=512, e=2)
    # per layer: q/k/v input, o_proj input, gate/up input (h = a * d = 4096), down input (f = 11008)
    assert linear_input_bytes(llama, x) == 2 * 1024 * (3 * 4096 + 11008)
    # 32 layers and the lm_head's input: 1.54 GB
    assert held_inputs_bytes(llama, litgpt, x) == 32 * 2 * 1024 * (3 * 4096 + 11008) + 2 * 1024 * 4096 == 1_535_115_264
    assert held_inputs_bytes(llama, hf, x) == 0
    falcon = catalogue.architecture("falcon-7b")  # parallel attention + MLP on one norm: one input for both
    assert linear_input_bytes(falcon, x) == 2 * 1024 * (2 * 4544 + 4 * 4544)
    plan = Plan(gpu="a10g-24gb", micro_batch=2, recompute="none")
    extra = activations(llama, litgpt, plan).layers_bytes - activations(llama, hf, plan).layers_bytes
    assert extra == 1_535_115_264
