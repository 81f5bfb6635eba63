"""A pipeline's split (Plan.stage_layers): the layers each rank holds, its memory per rank, the
slowest stage's time, what the commands show and what the launch configurations write.

Golden relations from Megatron's own accounting: under 1F1B the first pipeline rank keeps pp
micro-batches of its layers' activations in flight (Korthikanti et al. 2022 sec. 4.2.3: "the
first stage must store activations for p microbatches"), so its layer activations scale with its
layer count and nothing else; its weights are its layers' plus the embedding
(megatron/core/transformer/transformer_block.py get_num_layers_to_build, the embedding on the first
stage and the output layer on the last)."""

from __future__ import annotations

import json

import pytest
from helpers.cli import assert_error_line, invoke

from vramplan.launch.pipeline import megatron_split_args, torchtitan_model_parts
from vramplan.models.architecture.parallel import parse_split, plan_split, split_label, stage_layers
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.memory_terms import memory_terms
from vramplan.models.memory.parallel_states import embedding_shard, rank_params
from vramplan.models.time.flops import forward_flops_per_token
from vramplan.models.time.pipeline_schedule import stage_imbalance

META_405B = (7,) + (8,) * 14 + (7,)  # Llama 3 405B, PP 16: a layer off the first and the last stage


def test_split_text_round_trips_and_bad_text_names_the_field() -> None:
    assert parse_split("7,8*14,7") == META_405B and split_label(META_405B) == "7,8*14,7"
    assert parse_split("10, 10,10") == (10, 10, 10) and split_label((10, 10, 10)) == "10*3"
    for bad in ("7,x", "0,8", "8*0", "", "7,,8"):
        with pytest.raises(VramplanError) as error:
            parse_split(bad)
        assert error.value.field == "stage_layers"


def test_a_split_must_name_every_rank_and_give_each_a_layer_per_virtual_stage() -> None:
    with pytest.raises(ValueError, match="names 3 pipeline ranks; pp is 4"):
        Plan(gpu="-", num_gpus=4, pp=4, stage_layers=(8, 8, 8))
    with pytest.raises(ValueError, match="fewer than 2 layers"):
        Plan(gpu="-", num_gpus=4, pp=4, vpp=2, stage_layers=(1, 10, 10, 11))
    plan = Plan(gpu="-", num_gpus=4, pp=4, stage_layers=(7, 9, 9, 7))
    assert plan.stage_layers == (7, 9, 9, 7)


def test_the_default_split_is_the_plans_without_one(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-405b")
    assert plan_split(arch, Plan(gpu="-", num_gpus=16, pp=16)) == stage_layers(126, 16) == META_405B


def test_rank_memory_follows_its_layers(catalogue) -> None:
    """Moving layers between ranks moves their weights and their in-flight activations with them,
    exactly: rank 0 keeps pp micro-batches of each of its layers whatever the split."""
    arch = catalogue.architecture("llama-3.1-70b")
    job = Job(seq_len=8192, stack="megatron")
    base = dict(gpu="-", num_gpus=64, tp=8, pp=8, sequence_parallel=True, zero=1, grad_accum=8)
    even, shifted = Plan(**base), Plan(**base, stage_layers=(6, 10, 10, 10, 10, 11, 11, 12))
    layers_even = memory_terms(arch, job, even, 0)["activations.layers"]
    layers_shifted = memory_terms(arch, job, shifted, 0)["activations.layers"]
    assert layers_even * 6 == layers_shifted * 10
    assert memory_terms(arch, job, shifted, 7)["activations.layers"] * 10 == memory_terms(arch, job, even, 7)["activations.layers"] * 12
    per_layer = (rank_params(arch, 8, 8, 1, 1).dense) // 10  # a middle rank of the even split: ten layers
    assert rank_params(arch, 8, shifted.stage_layers, 1, 0).dense == 6 * per_layer + embedding_shard(arch, 8)


def test_a_split_that_does_not_add_up_is_refused(catalogue) -> None:
    result = invoke("estimate", "--model", "llama-3.1-70b", "--stack", "megatron", "--num-gpus", "8", "--pp", "8",
                    "--stage-layers", "10*7,11")
    assert result.exit_code == 2
    assert_error_line(result, "stage_layers='10*7,11'", "holds 81 layers", "has 80")


def test_the_slowest_stage_sets_the_pace(catalogue) -> None:
    """stage_imbalance: the slowest rank's work (its layers, and the output layer on the last) over
    the mean rank's, from the forward FLOPs per token."""
    arch = catalogue.architecture("llama-3.1-70b")
    decoder, attention, logits = forward_flops_per_token(arch, 8192)
    layer = (decoder + attention) / arch.num_layers
    even = stage_imbalance(arch, 8192, (10,) * 8)
    assert even == pytest.approx((10 * layer + logits) * 8 / (80 * layer + logits))
    assert stage_imbalance(arch, 8192, (80,)) == 1.0
    # the output layer weighs about a layer: a layer off the last stage balances it
    assert stage_imbalance(arch, 8192, (10,) * 7 + (9,)) < even
    assert stage_imbalance(arch, 8192, (9,) + (10,) * 6 + (11,)) > even


def test_the_estimate_shows_the_split_and_each_checked_rank(catalogue) -> None:
    args = ("estimate", "--model", "llama-3.1-70b", "--seq-len", "8192", "--stack", "megatron", "--num-gpus", "64",
            "--tp", "8", "--pp", "8", "--sequence-parallel", "--zero", "1", "--grad-accum", "8", "--stage-layers", "9,10*6,11")
    text = invoke(*args)
    assert "pipeline split 9,10*6,11 layers per rank; checked ranks: 0 (9 layers + embedding)" in text.output
    assert "stage imbalance" in text.output
    memory = json.loads(invoke(*args, "--format", "json").output)["memory"]
    assert memory["stage_layers"] == [9] + [10] * 6 + [11]
    assert [r["rank"] for r in memory["rank_totals"]] == [0, 1, 7] and memory["rank_totals"][0]["layers"] == 9
    assert max(r["total_bytes"] for r in memory["rank_totals"]) == memory["total_bytes"]


def test_megatron_writes_the_split_it_can_take() -> None:
    """Megatron asserts pp divides the layers unless the split is given: first/last flags when the
    middle ranks hold alike, its layout string otherwise (and for an uneven interleaved split)."""
    plan = Plan(gpu="-", num_gpus=16, pp=16)
    assert megatron_split_args(plan, 126) == ["--decoder-first-pipeline-num-layers 7",
                                              "--decoder-last-pipeline-num-layers 7"]
    assert megatron_split_args(Plan(gpu="-", num_gpus=8, pp=8), 80) == []  # pp divides the layers
    uneven = Plan(gpu="-", num_gpus=4, pp=4, stage_layers=(6, 9, 10, 7))
    assert megatron_split_args(uneven, 32) == ['--pipeline-model-parallel-layout "Et*6|t*9|t*10|t*7L"']
    interleaved = Plan(gpu="-", num_gpus=4, pp=4, vpp=2, stage_layers=(6, 8, 8, 10))
    assert megatron_split_args(interleaved, 32) == ['--pipeline-model-parallel-layout "Et*3|t*4|t*4|t*5|t*3|t*4|t*4|t*5L"']


def test_torchtitan_gets_each_chunks_modules_in_stage_order() -> None:
    parts = torchtitan_model_parts(Plan(gpu="-", num_gpus=2, pp=2, vpp=2, stage_layers=(3, 5)), 8)
    assert parts == [["tok_embeddings", "layers.0", "layers.1"], ["layers.2", "layers.3", "layers.4"],
                     ["layers.5"], ["layers.6", "layers.7", "norm", "output"]]
