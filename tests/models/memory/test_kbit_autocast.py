"""PEFT's kbit preparation under autocast (qlora_prep peft): prepare_model_for_kbit_training casts
every parameter that is not a Params4bit to fp32, the embedding and lm_head included
(huggingface/peft@8bafdb112 src/peft/utils/other.py L135-140). Under autocast:
- the embedding's output is fp32 and the residual stream stays fp32 (fp32 + a block's 16-bit
  output is fp32), so every checkpointed layer input is 4 T h bytes (models/memory/activations.py);
- the lm_head's matmul saves its own 16-bit cast of the frozen fp32 weight (autocast caches a cast
  only for a leaf that requires grad), e v h bytes, until the lm_head's backward (models/memory/loss.py
  frozen_head_cast_bytes).
`test_autocast_saves_what_the_model_says` measures both with saved_tensors_hooks when torch is installed."""

from __future__ import annotations

import pytest

from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.activations import activation_shape, microbatch_activations
from vramplan.models.memory.loss import frozen_head_cast_bytes, loss_cost

PLAN = Plan(gpu="a100-sxm-80gb", micro_batch=1, recompute="full")


def _job(prep: str) -> Job:
    return Job(method="qlora", stack="hf", qlora_prep=prep, seq_len=4096)


def test_a_checkpointed_layer_input_is_fp32_under_kbit_preparation(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    t, h = 4096, arch.hidden_size
    assert activation_shape(_job("peft"), PLAN).autocast and not activation_shape(_job("16bit"), PLAN).autocast
    assert microbatch_activations(arch, _job("peft"), PLAN).per_layer_bytes == 4 * t * h
    assert microbatch_activations(arch, _job("16bit"), PLAN).per_layer_bytes == 2 * t * h


def test_the_frozen_fp32_lm_head_is_cast_once_for_its_matmul(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    x = activation_shape(_job("peft"), PLAN)
    copy = 2 * arch.vocab_size * arch.hidden_size  # 1.05 GB for Llama 3.1 8B
    assert frozen_head_cast_bytes(arch, _job("peft"), x) == copy
    assert frozen_head_cast_bytes(arch, _job("16bit"), activation_shape(_job("16bit"), PLAN)) == 0
    assert frozen_head_cast_bytes(arch, Job(method="lora", stack="hf", qlora_prep="peft"), x) == 0
    with_copy = loss_cost(arch, _job("peft"), x).backward_extra_bytes
    assert with_copy - 2 * 4 * x.t * arch.vocab_size == copy  # beside aten's two fp32 T x v buffers


def test_autocast_saves_what_the_model_says() -> None:
    torch = pytest.importorskip("torch")
    nn, functional = torch.nn, torch.nn.functional
    v, h, t = 1000, 64, 32
    embedding, head = nn.Embedding(v, h).float(), nn.Linear(h, v, bias=False).float()
    embedding.weight.requires_grad_(False)
    head.weight.requires_grad_(False)
    adapter = nn.Parameter(torch.randn(h, h) * 0.01)
    saved = []

    def pack(tensor):
        saved.append((tuple(tensor.shape), tensor.dtype))
        return tensor

    with torch.autocast("cpu", dtype=torch.bfloat16), torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        x = embedding(torch.randint(0, v, (1, t)))
        residual = x + functional.linear(x, adapter)  # a block's 16-bit output added to the stream
        head(residual)
    assert x.dtype == residual.dtype == torch.float32  # the stream, hence each layer input, is fp32
    assert ((h, v), torch.bfloat16) in saved  # the lm_head weight's own bf16 cast (its transpose)
