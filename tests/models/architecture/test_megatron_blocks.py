"""Blocks Megatron-Core does not build are refused on the megatron stack (its TransformerLayer runs the MLP
on the attention's output; its norms carry weights; nothing clamps q/k/v), and `--stack any` chooses
another stack for them."""

from __future__ import annotations

import json

import pytest
from helpers.catalogue import packaged_catalogue

from vramplan.models.catalogue.hf_config import architecture_from_config
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.estimate import estimate
from vramplan.solver.api import solve
from vramplan.solver.query_fields import query_from_fields

GPU = "h100-sxm-80gb"


@pytest.mark.parametrize(("model", "part"), [
    ("pythia-6.9b", "parallel block"), ("falcon-7b", "parallel block"), ("command-r7b", "parallel block"),
])
def test_a_parallel_block_is_refused_on_megatron_alone(model: str, part: str) -> None:
    catalogue = packaged_catalogue()
    plan = Plan(gpu=GPU, num_gpus=8, zero=1)
    with pytest.raises(VramplanError) as caught:
        estimate(catalogue, model, Job(seq_len=2048, stack="megatron"), plan, 1e9)
    assert caught.value.field == "stack" and part in str(caught.value)
    assert estimate(catalogue, model, Job(seq_len=2048), plan, 1e9).memory.total_bytes > 0  # hf builds it


@pytest.mark.parametrize(("config", "part"), [
    ({"model_type": "olmo"}, "LayerNorm without parameters"),
    ({"model_type": "olmoe", "clip_qkv": 8.0}, "clip_qkv"),
])
def test_norms_without_weights_and_clamped_qkv_are_refused_on_megatron(tmp_path, config: dict, part: str) -> None:
    catalogue, job, plan = packaged_catalogue(), Job(seq_len=2048, stack="megatron"), Plan(gpu=GPU, num_gpus=8)
    with pytest.raises(VramplanError) as caught:
        estimate(catalogue, _config(tmp_path, config), job, plan, 1e9)
    assert part in str(caught.value)
    # OLMoE as published (clip_qkv null) is a block Megatron builds (Megatron-Bridge's OlmoeBridge)
    assert estimate(catalogue, _config(tmp_path, {"model_type": "olmoe"}), job, plan, 1e9).memory.total_bytes > 0


def _config(tmp_path, config: dict) -> str:
    path = tmp_path / f"{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(config))
    return str(path)


def test_an_explanation_does_not_try_a_stack_that_cannot_build_the_layers() -> None:
    """broader_stacks holds each stack's unbuilt_parts against the architecture: Qwen3-Next's hf solve that
    nothing fits tried `--stack megatron`, which has no form for its Gated DeltaNet layers."""
    from vramplan.models.catalogue.catalogue import load_stack_capabilities
    from vramplan.models.catalogue.stack_contract import architecture_parts, broader_stacks

    caps = load_stack_capabilities()
    nxt = architecture_from_config({"model_type": "qwen3_next"}, name="n", source="config.json")
    assert architecture_parts(nxt) == {"gated_delta"}
    assert "megatron" in broader_stacks(caps, "hf", "qwen3_next")
    assert "megatron" not in broader_stacks(caps, "hf", "qwen3_next", architecture_parts(nxt))
    pythia = packaged_catalogue().architecture("pythia-6.9b")
    assert "megatron" not in broader_stacks(caps, "hf", "gpt_neox", architecture_parts(pythia))


def test_any_stack_leaves_megatron_out_for_a_parallel_block() -> None:
    query = query_from_fields({"model": "pythia-6.9b", "seq_len": 2048, "global_batch": 64, "tokens": 1e9,
                               "stack": "any", "objective": "time", "max_gpus": 64, "gpus": GPU}, top_k=3)
    result = solve(packaged_catalogue(), query)
    assert result.status == "optimal" and "megatron" in query.stacks
    assert all(p.plan.stack != "megatron" for p in result.plans)
