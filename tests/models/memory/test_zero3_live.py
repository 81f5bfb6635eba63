"""DeepSpeed ZeRO-3's live parameters, replayed from its parameter coordinator
(models/memory/zero3_live.py; deepspeedai/DeepSpeed v0.15.4 partitioned_param_coordinator.py
fetch_sub_module L276-406, __params_to_release L503-532; parameter_offload.py
mark_persistent_parameters L239-249; stage3.py _setup_for_real_optimizer L524-527)."""

from __future__ import annotations

from vramplan.models.architecture.lora import trainable_params
from vramplan.models.architecture.params import count_params
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.overhead import overhead
from vramplan.models.memory.zero3_live import (
    MAX_LIVE_ELEMENTS,
    REDUCE_BUCKET_ELEMENTS,
    peak_gathered_bytes,
    step_trace,
    zero3_live,
    zero3_model,
)

LORA = Job(stack="deepspeed", method="lora", lora_rank=8, seq_len=2048)  # PEFT examples/sft: r8 all-linear
FULL = Job(stack="deepspeed", method="full")


def _plan(**kw) -> Plan:
    return Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=3, recompute="full", **kw)


def test_a_recomputed_layer_keeps_its_last_modules_through_its_backward(catalogue) -> None:
    """Without prefetch, what stays is what the reuse distance keeps: after the recompute of a
    Llama-2-70B layer, gate, up and down are used again in its backward within 2 x (up + down) =
    940M < 1e9 elements; o_proj (2 x 705M away) is released. LoRA adapters of r x 8192 are persistent."""
    arch = catalogue.architecture("llama-2-70b")
    model = zero3_model(arch, LORA, 1, 2)
    mlp = 3 * 8192 * 28672
    adapters = 8 * 28672  # the gate/up lora_B and the down lora_A over 1e5 elements, gathered with them
    assert peak_gathered_bytes(model, step_trace(model, arch.num_layers), prefetch=0) == 2 * (mlp + 3 * adapters)
    # without recompute the backward uses each module once: the lm_head (262M) and the last
    # layer's down and up, used again within 1e9 elements of their forward, are the most
    assert peak_gathered_bytes(model, step_trace(model, 0), prefetch=0) == 2 * (2 * 8192 * 28672 + 2 * adapters
                                                                                 + 32000 * 8192)


def test_prefetch_fills_up_to_max_live_parameters(catalogue) -> None:
    """Every fetch prefetches until stage3_max_live_parameters are gathered, one parameter past it
    at most: DeepSpeed holds about 1e9 elements, whatever the prefetch bucket."""
    arch = catalogue.architecture("llama-2-70b")
    live = zero3_live(arch, LORA, _plan(), 2, trainable_params(arch, LORA))
    largest = 8192 * 28672
    assert 2 * MAX_LIVE_ELEMENTS <= live.gathered_bytes <= 2 * (MAX_LIVE_ELEMENTS + 2 * largest)


def test_a_model_under_max_live_stays_gathered_whole(catalogue) -> None:
    arch = catalogue.architecture("gpt2-124m")
    model = zero3_model(arch, FULL, 1, 2)
    everything = sum(p.nbytes for p in model.params)
    assert peak_gathered_bytes(model, step_trace(model, arch.num_layers)) == everything
    c = count_params(arch)
    assert everything // 2 + model.persistent_elements == c.total


def test_persistent_parameters_are_the_norms_and_small_adapters(catalogue) -> None:
    """stage3_param_persistence_threshold 1e5: with r = 8 every adapter of a 8192-wide side
    (8 x 8192 = 65,536) stays gathered, the 28672-wide ones (229,376) do not."""
    arch = catalogue.architecture("llama-2-70b")
    model = zero3_model(arch, LORA, 1, 2)
    adapters = 9 * 8 * 8192 + 2 * 8 * 1024  # q A/B, k A, v A, o A/B, gate A, up A, down B; k B, v B
    norms = 2 * 8192
    assert model.persistent_elements == 80 * (adapters + norms) + 8192


def test_the_ipg_bucket_is_allocated_whatever_trains(catalogue) -> None:
    """reduce_bucket_size (5e8) elements in the 16-bit dtype, for LoRA too; a full fine-tune's
    mid-backward flushes add the bucket's concatenated copy."""
    arch = catalogue.architecture("llama-2-70b")
    lora = overhead(arch, LORA, _plan())
    full = overhead(arch, FULL, _plan())
    assert lora.comm_buckets_bytes == 2 * REDUCE_BUCKET_ELEMENTS
    assert full.comm_buckets_bytes == 2 * 2 * REDUCE_BUCKET_ELEMENTS
    held = zero3_live(arch, FULL, _plan(), 2, trainable_params(arch, FULL))
    assert full.zero3_live_params_bytes == held.gathered_bytes + held.persistent_bytes + held.gradient_bytes
    assert held.gradient_bytes == 2 * 32000 * 8192  # the untied lm_head is the largest module


def test_fused_moe_experts_are_gathered_at_once(catalogue) -> None:
    """transformers 5 holds a MoE layer's experts as fused [E, ...] parameters of one module:
    DeepSeek-V3's 256 x 3 x 7168 x 2048 elements are fetched together (and under full
    fine-tuning its gradient too), where the old whole-layer bound took the dense first layer."""
    arch = catalogue.architecture("deepseek-v3")
    experts = 256 * 3 * 7168 * 2048
    held = zero3_live(arch, FULL, _plan(), 2, trainable_params(arch, FULL))
    assert held.gathered_bytes >= 2 * experts
    assert held.gradient_bytes == 2 * experts
    assert count_params(arch).per_layer < experts  # layer 0 is dense


def test_a_default_leaf_moe_block_is_one_fetch(catalogue) -> None:
    """From v0.18.0 the Qwen3-MoE sparse block is a ZeRO-3 leaf by default (leaf_module_config.py):
    router and experts come in one module."""
    arch = catalogue.architecture("qwen3-30b-a3b")
    model = zero3_model(arch, FULL, 1, 2)
    block = 128 * 3 * 2048 * 768 + 128 * 2048  # experts + router
    assert max(sum(model.params[p].numel for p in m) for m in model.layers[0]) == block


def test_tp_shards_what_is_gathered(catalogue) -> None:
    arch = catalogue.architecture("llama-2-70b")
    one = zero3_model(arch, FULL, 1, 2)
    eight = zero3_model(arch, FULL, 8, 2)
    assert sum(p.numel for p in eight.params) == sum(-(-p.numel // 8) for p in one.params)


def test_one_rank_keeps_the_bucket_and_fetches_only_offloaded_parameters(catalogue) -> None:
    """With one rank DeepSpeed still allocates the IPG bucket (stage3.py under contiguous_gradients,
    whatever the world size: edaa7221 L731-735) and fetches each module's parameters through
    NoGatherHandle (partition_parameters.py: `param.data = param.ds_tensor.data.to(device)`): a copy
    only where ds_tensor lives in host RAM (offload_param), the tensor itself where it is on the GPU.
    Before, one rank counted neither: PEFT's bloomz-7b1 ZeRO-3 CPU-offload run read 0.37 of its peak."""
    arch = catalogue.architecture("llama-2-7b")
    one = Plan(gpu="h100-sxm-80gb", num_gpus=1, zero=3, recompute="full")
    held = zero3_live(arch, LORA, one, 2, trainable_params(arch, LORA))
    offloaded = overhead(arch, LORA, one.model_copy(update={"offload": "optimizer+params"}))
    assert offloaded.comm_buckets_bytes == 2 * REDUCE_BUCKET_ELEMENTS
    assert offloaded.zero3_live_params_bytes == held.live_params_bytes > 0
    for offload in ("none", "optimizer"):
        on_gpu = overhead(arch, LORA, one.model_copy(update={"offload": offload}))
        assert on_gpu.comm_buckets_bytes == 2 * REDUCE_BUCKET_ELEMENTS and on_gpu.zero3_live_params_bytes == 0
    # torch FSDP with its CPU offload on one rank gathers its units from host RAM alike
    fsdp = overhead(arch, Job(stack="torchtitan", method="full"), one.model_copy(update={"offload": "optimizer+params"}))
    assert fsdp.zero3_live_params_bytes > 0
