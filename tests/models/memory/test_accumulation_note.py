"""The hf stack's FSDP with gradient accumulation (models/memory/accumulation_note.py,
SYNC_EACH_BATCH_STACKS): the estimate holds the gradient shard because the launch configuration sets
sync_each_batch; every plan that relies on it says what the Trainer's default would hold instead
(every trainable gradient whole in the compute dtype: accelerate's no_sync is FSDP2's
set_requires_gradient_sync(False) on all but the last micro-batch)."""

from __future__ import annotations

import pytest
from helpers.cli import invoke

from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.catalogue.stack import with_preset
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.accumulation_note import accumulation_note, default_sync_bytes
from vramplan.models.memory.memory import memory_per_gpu

LLAMA_8B_PARAMS = 8_030_261_248  # Hugging Face meta-llama/Llama-3.1-8B num_parameters()


def _job(stack: str = "hf", **fields) -> Job:
    return Job(**with_preset({"stack": stack, "seq_len": 2048, "method": "full", **fields}, load_stacks()))


def _plan(**fields) -> Plan:
    return Plan(**{"gpu": "h100-sxm-80gb", "num_gpus": 8, "zero": 3, "micro_batch": 1, "grad_accum": 4, **fields})


def _memory(catalogue, arch, job, plan, gpu="h100-sxm-80gb"):
    return memory_per_gpu(arch, job, plan, catalogue.gpu(gpu))


def test_the_default_would_hold_the_whole_bf16_gradient(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    assert default_sync_bytes(arch, _job(), _plan()) == 2 * LLAMA_8B_PARAMS  # 14.96 GiB
    assert default_sync_bytes(arch, _job(), _plan(zero=2)) == 2 * LLAMA_8B_PARAMS
    assert default_sync_bytes(arch, _job(), _plan(precision="fp32")) == 4 * LLAMA_8B_PARAMS
    # the estimate itself keeps the shard: the launch sets sync_each_batch
    memory = _memory(catalogue, arch, _job(), _plan())
    assert memory.states.gradients_bytes < 2 * LLAMA_8B_PARAMS / 4
    # 8B at 2k over 8 H100 fits either way (about 13 GiB more on the default, 34.7 GiB spare): no warning
    assert accumulation_note(arch, _job(), _plan(), memory) is None


def test_a_plan_that_fits_only_with_sync_each_batch_says_so(catalogue) -> None:
    """The README's headline plan: Llama 3.1 70B at 8k over 8 MI300X, ZeRO-3, full recompute, 1 x 8
    micro-batches: 171.3 of 172.5 GiB with the shard, 131.4 GiB of whole bf16 gradients on the default."""
    arch = catalogue.architecture("llama-3.1-70b")
    job = _job(seq_len=8192)
    plan = Plan(gpu="mi300x-192gb", num_gpus=8, zero=3, recompute="full", micro_batch=1, grad_accum=8)
    memory = _memory(catalogue, arch, job, plan, "mi300x-192gb")
    assert memory.fits
    note = accumulation_note(arch, job, plan, memory)
    assert note is not None and note.startswith("fits only with sync_each_batch")
    assert "8 micro-batches, 131.4 GiB a GPU" in note and "against the 172.5 GiB limit" in note


@pytest.mark.parametrize(("stack", "fields"), [
    ("hf", {"grad_accum": 1, "micro_batch": 4}),  # one micro-batch a step: nothing skipped
    ("hf", {"zero": 1}),  # DeepSpeed's ZeRO-1 (the Trainer never calls no_sync under DeepSpeed)
    ("hf", {"zero": 3, "offload": "optimizer"}),  # DeepSpeed with CPU-Adam
    ("hf", {"tp": 2}),  # TP: DeepSpeed AutoTP or transformers' own sharding
    ("hf", {"num_gpus": 1}),
    ("deepspeed", {}),
    ("torchtitan", {}),  # FSDP2 that reduce-scatters every micro-batch
])
def test_nothing_held_where_no_sync_is_skipped(catalogue, stack, fields) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    assert default_sync_bytes(arch, _job(stack), _plan(**fields)) == 0


def test_lora_holds_only_its_adapters(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    held = default_sync_bytes(arch, _job(method="lora"), _plan())
    assert 0 < held < 2**30  # r16 adapters: tens of MB


def test_estimate_prints_it() -> None:
    result = invoke("estimate", "--model", "llama-3.1-70b", "--seq-len", "8192", "--gpu", "mi300x-192gb",
                    "--num-gpus", "8", "--zero", "3", "--recompute", "full", "--micro-batch", "1", "--grad-accum", "8")
    assert result.exit_code == 0, result.stderr
    assert "warning: fits only with sync_each_batch" in result.stdout
