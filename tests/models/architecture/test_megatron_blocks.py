"""Blocks Megatron-Core does not build are refused on the megatron stack (its TransformerLayer runs the MLP
on the attention's output; its norms carry weights; nothing clamps q/k/v), and `--stack any` chooses
another stack for them."""

from __future__ import annotations

import pytest
from helpers.catalogue import packaged_catalogue

from vramplan.models.catalogue.hf_config import architecture_from_config
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.memory import memory_per_gpu
from vramplan.solver.api import solve
from vramplan.solver.query_fields import query_from_fields

GPU = "h100-sxm-80gb"


@pytest.mark.parametrize(("model", "part"), [
    ("pythia-6.9b", "parallel block"), ("falcon-7b", "parallel block"), ("command-r7b", "parallel block"),
])
def test_a_parallel_block_is_refused_on_megatron_alone(model: str, part: str) -> None:
    catalogue = packaged_catalogue()
    arch, plan = catalogue.architecture(model), Plan(gpu=GPU, num_gpus=8, zero=1)
    with pytest.raises(VramplanError) as caught:
        memory_per_gpu(arch, Job(seq_len=2048, stack="megatron"), plan, catalogue.gpu(GPU))
    assert caught.value.field == "stack" and part in str(caught.value)
    assert memory_per_gpu(arch, Job(seq_len=2048), plan, catalogue.gpu(GPU)).total_bytes > 0  # hf builds it


@pytest.mark.parametrize(("config", "part"), [
    ({"model_type": "olmo"}, "LayerNorm without parameters"),
    ({"model_type": "olmoe", "clip_qkv": 8.0}, "clip_qkv"),
])
def test_norms_without_weights_and_clamped_qkv_are_refused_on_megatron(config: dict, part: str) -> None:
    catalogue = packaged_catalogue()
    arch = architecture_from_config(config, name=config["model_type"], source="config.json")
    with pytest.raises(VramplanError) as caught:
        memory_per_gpu(arch, Job(seq_len=2048, stack="megatron"), Plan(gpu=GPU, num_gpus=8), catalogue.gpu(GPU))
    assert part in str(caught.value)
    # OLMoE as published (clip_qkv null) is a block Megatron builds (Megatron-Bridge's OlmoeBridge)
    olmoe = architecture_from_config({"model_type": "olmoe"}, name="olmoe", source="config.json")
    assert memory_per_gpu(olmoe, Job(seq_len=2048, stack="megatron"), Plan(gpu=GPU, num_gpus=8),
                          catalogue.gpu(GPU)).total_bytes > 0


def test_any_stack_leaves_megatron_out_for_a_parallel_block() -> None:
    query = query_from_fields({"model": "pythia-6.9b", "seq_len": 2048, "global_batch": 64, "tokens": 1e9,
                               "stack": "any", "objective": "time", "max_gpus": 64, "gpus": GPU}, top_k=3)
    result = solve(packaged_catalogue(), query)
    assert result.status == "optimal" and "megatron" in query.stacks
    assert all(p.plan.stack != "megatron" for p in result.plans)
