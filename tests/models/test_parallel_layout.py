"""Parallel layouts: shards, validity (one-line errors naming the field), the cluster's network,
and `vramplan estimate --tp/--pp/--cp/--ep/--vpp/--sequence-parallel`."""

from __future__ import annotations

import json

import pytest
from helpers.catalogue import packaged_catalogue
from helpers.cli import invoke

from vramplan.models.architecture.parallel import candidate_stages, stage_layers
from vramplan.models.architecture.params import count_params
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.estimate import estimate
from vramplan.models.memory.memory import memory_per_gpu
from vramplan.models.memory.parallel_states import rank_params

H100 = packaged_catalogue().gpu("h100-sxm-80gb")
LLAMA8 = packaged_catalogue().architecture("llama-3.1-8b")
LLAMA70 = packaged_catalogue().architecture("llama-3.1-70b")
MIXTRAL = packaged_catalogue().architecture("mixtral-8x7b")


def test_tp_splits_matmuls_and_vocab_and_replicates_norms() -> None:
    h, f, v, layers, kv = 4096, 14336, 128256, 32, 8 * 128
    per_layer_matmul = h * h + 2 * h * kv + h * h + 3 * h * f
    norms = layers * 2 * h + h
    expected = layers * per_layer_matmul // 4 + 2 * v * h // 4 + norms
    assert rank_params(LLAMA8, 4, 1, 1, 0).total == expected
    assert rank_params(LLAMA8, 1, 1, 1, 0).total == count_params(LLAMA8).total


def test_pipeline_ranks_partition_the_layers_embedding_first_head_last() -> None:
    first, last = rank_params(LLAMA8, 1, 4, 1, 0), rank_params(LLAMA8, 1, 4, 1, 3)
    layer = count_params(LLAMA8).per_layer
    assert first.total == 8 * layer + 128256 * 4096
    assert last.total == 8 * layer + 128256 * 4096 + 4096  # untied lm_head and the final norm
    assert sum(rank_params(LLAMA8, 1, 4, 1, s).total for s in range(4)) == count_params(LLAMA8).total


def test_tied_head_is_a_second_copy_on_the_last_rank(catalogue) -> None:
    gpt2 = catalogue.architecture("gpt2-1.5b")
    split = sum(rank_params(gpt2, 1, 2, 1, s).total for s in range(2))
    assert split == count_params(gpt2).total + 50257 * 1600  # Megatron's shared embedding on the last stage


def test_uneven_layers_go_to_the_ranks_before_the_last(catalogue) -> None:
    assert stage_layers(126, 16) == (7,) + (8,) * 14 + (7,)
    assert stage_layers(80, 8) == (10,) * 8
    assert stage_layers(10, 4) == (2, 3, 3, 2)
    assert candidate_stages(catalogue.architecture("llama-3.1-405b"), 16) == (0, 1, 15)  # 126 layers


def test_mixed_stacks_check_every_set_of_layers_a_rank_can_hold(catalogue) -> None:
    """Ranks holding different kinds of layer are candidates of their own: DeepSeek-V2-Lite's
    rank 0 holds the dense first layer, ranks 1 and 2 seven MoE layers each, which hold 7.7% more
    parameters than rank 0 (and so more host RAM under ZeRO-Offload); Llama 4 Maverick's ranks
    alternate between more dense and more MoE layers."""
    lite = catalogue.architecture("deepseek-v2-lite")
    assert stage_layers(27, 4) == (7, 7, 7, 6)
    assert candidate_stages(lite, 4) == (0, 1, 3)
    assert rank_params(lite, 1, 4, 1, 1).total > 1.07 * rank_params(lite, 1, 4, 1, 0).total
    assert candidate_stages(catalogue.architecture("llama-4-maverick"), 16) == (0, 1, 2, 15)


def test_expert_parallel_keeps_its_experts_and_shards_them_over_expert_dp() -> None:
    ep1, ep8 = rank_params(MIXTRAL, 1, 1, 1, 0), rank_params(MIXTRAL, 1, 1, 8, 0)
    assert ep1.dense == ep8.dense and ep1.expert == 8 * ep8.expert
    job = Job(accounting="hf")
    plan = Plan(gpu=H100.name, num_gpus=16, ep=8, zero=1)
    assert plan.expert_dp == 2 and plan.zero_group == 16
    states = memory_per_gpu(MIXTRAL, job, plan, H100).states
    expected_optimizer = 12 * (-(-ep8.dense // 16)) + 12 * (-(-ep8.expert // 2))
    assert states.optimizer_states_bytes == expected_optimizer


def test_fp8_copies_are_sharded_so_70b_fits_on_h100s() -> None:
    job = Job(seq_len=4096, kernels="fused")
    plan = Plan(gpu=H100.name, num_gpus=64, tp=8, pp=2, zero=1, precision="fp8", recompute="selective",
                sequence_parallel=True, grad_accum=8)
    bf16 = memory_per_gpu(LLAMA70, job, plan.model_copy(update={"precision": "bf16"}), H100)
    fp8 = memory_per_gpu(LLAMA70, job, plan, H100)
    assert fp8.fits
    shard = rank_params(LLAMA70, 8, 2, 1, fp8.stage)
    assert fp8.states.weights_bytes - bf16.states.weights_bytes == 2 * (shard.fp8_matmul_dense + shard.fp8_matmul_expert)
    zero3 = memory_per_gpu(LLAMA70, job, Plan(gpu=H100.name, num_gpus=64, zero=3, precision="fp8", recompute="full"), H100)
    assert zero3.fits  # ZeRO-3 shards the fp8 copies with the weights


BAD_LAYOUTS = {
    "tp-not-dividing-heads": (LLAMA8, Job(), dict(num_gpus=3, tp=3), "tp"),
    "tp-beyond-the-instance": (LLAMA70, Job(), dict(num_gpus=16, tp=16), "tp"),
    "ep-on-a-dense-model": (LLAMA8, Job(), dict(num_gpus=2, ep=2), "ep"),
    "ep-not-dividing-experts": (MIXTRAL, Job(), dict(num_gpus=6, ep=3), "ep"),
    "cp-odd-chunks": (LLAMA8, Job(seq_len=1000), dict(num_gpus=8, cp=8), "cp"),
    "cp-with-eager-attention": (LLAMA8, Job(attention="eager"), dict(num_gpus=2, cp=2), "cp"),
    "more-stages-than-layers": (LLAMA8, Job(), dict(num_gpus=64, pp=64), "pp"),
    "vpp-beyond-layers-per-rank": (LLAMA8, Job(), dict(num_gpus=8, pp=8, vpp=8), "vpp"),
    "lora-with-ep": (MIXTRAL, Job(method="lora"), dict(num_gpus=2, ep=2), "ep"),
}


@pytest.mark.parametrize("case", sorted(BAD_LAYOUTS))
def test_invalid_layouts_are_one_line_errors_naming_the_field(case: str) -> None:
    arch, job, fields, field = BAD_LAYOUTS[case]
    with pytest.raises(VramplanError) as caught:
        memory_per_gpu(arch, job, Plan(gpu=H100.name, **fields), H100)
    assert caught.value.field == field and "\n" not in str(caught.value)


@pytest.mark.parametrize(("fields", "field"), [
    (dict(num_gpus=12, tp=8), "num_gpus"), (dict(num_gpus=4, ep=8), "ep"), (dict(num_gpus=4, vpp=2), "vpp"),
])
def test_degree_arithmetic_is_checked_by_the_plan(fields: dict, field: str) -> None:
    with pytest.raises(ValueError) as caught:
        Plan(gpu=H100.name, **fields)
    assert field in str(caught.value)


def test_kv_heads_replicate_beyond_tp_8() -> None:
    tiny = LLAMA8.model_copy(update={"num_kv_heads": 4})
    assert memory_per_gpu(tiny, Job(), Plan(gpu=H100.name, num_gpus=8, tp=8), H100).total_bytes > 0


def test_one_gpu_pods_are_priced_at_their_network_speed(catalogue) -> None:
    # Eight 1-GPU RunPod pods talk over its 100 Mbps global network; one 8-GPU node over NVLink.
    plan = Plan(gpu="a100-sxm-80gb", num_gpus=8, zero=2, recompute="full")
    pods = estimate(catalogue, "llama-3.1-8b", Job(), plan.model_copy(update={"offering": "runpod/1x_A100-80GB-SXM_SECURE"}), 1e9)
    node = estimate(catalogue, "llama-3.1-8b", Job(), plan.model_copy(update={"offering": "runpod/8x_A100-80GB-SXM_SECURE"}), 1e9)
    ratio = pods.performance.communication_time_s / node.performance.communication_time_s
    assert ratio == pytest.approx(300 / 0.0125)  # NVLink 300 GB/s vs 0.0125 GB/s per GPU
    assert pods.performance.tokens_per_s < node.performance.tokens_per_s / 100


def test_list_rows_are_not_rentable_and_lose_ties(catalogue) -> None:
    rows = [o for o in catalogue.offerings.values() if o.provider == "list"]
    assert rows and not any(o.rentable for o in rows)
    assert all(o.rentable for o in catalogue.offerings.values() if o.provider != "list")
    result = estimate(catalogue, "llama-3.1-8b", Job(), Plan(gpu="mi300x-192gb", num_gpus=8), 1e9)
    assert result.cost.offering == "digitalocean/mi300x-x8"  # same price as list/mi300x-192gb-x8


def test_estimate_prefers_one_8_gpu_instance_over_eight_1_gpu_pods_at_equal_price(catalogue) -> None:
    result = estimate(catalogue, "llama-3.1-8b", Job(), Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=1), 1e9)
    assert result.cost.num_instances == 1


def test_cli_estimate_takes_the_layout_and_reports_the_stage() -> None:
    args = ["estimate", "--model", "llama-3.1-70b", "--gpu", "h100-sxm-80gb", "--num-gpus", "64", "--tp", "8",
            "--pp", "4", "--sequence-parallel", "--zero", "1", "--recompute", "selective", "--grad-accum", "16",
            "--kernels", "fused", "--stack", "megatron", "--format", "json"]  # a stack that runs TP x PP + SP
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["plan"]["tp"], data["plan"]["pp"], data["plan"]["sequence_parallel"]) == (8, 4, True)
    assert data["memory"]["stage"] in (0, 3) and data["memory"]["num_stages"] == 4
    assert data["performance"]["pipeline_bubble_s"] > 0
    table = invoke(*args[:-2])
    assert "layout TP 8 + SP x PP 4" in table.stdout and "pipeline rank" in table.stdout


@pytest.mark.parametrize(("extra", "fragments"), [
    (["--tp", "3", "--num-gpus", "3"], ["tp=3", "attention heads"]),
    (["--tp", "16", "--num-gpus", "16"], ["tp=16", "NVLink"]),
    (["--pp", "2", "--num-gpus", "3"], ["num_gpus=3"]),
])
def test_cli_bad_layout_is_one_line_exit_2(extra: list[str], fragments: list[str]) -> None:
    result = invoke("estimate", "--model", "llama-3.1-8b", *extra)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in result.stderr
    assert all(fragment in lines[0] for fragment in fragments), lines[0]


def test_every_packaged_offering_states_its_network_with_a_source(catalogue) -> None:
    for offering in catalogue.offerings.values():
        network = offering.network_bandwidth_gb_per_s
        assert network is not None and 0 < network <= catalogue.gpu(offering.gpu).intra_node_bandwidth_gb_per_s
        assert "network" in offering.source, offering.name
    assert catalogue.offering("aws/p5.48xlarge").network_bandwidth_gb_per_s == 50  # 3200 Gbps EFA / 8 GPUs
    assert catalogue.offering("runpod/1x_H100-SXM_SECURE").network_bandwidth_gb_per_s == 0.0125  # 100 Mbps


def test_model_parallel_buffers_follow_megatron_shapes() -> None:
    hidden = 2 * 2048 * 4096  # bf16 s x b x h of one micro-batch
    job = Job(seq_len=2048)
    plain = memory_per_gpu(LLAMA8, job, Plan(gpu=H100.name, num_gpus=4, pp=4), H100).overhead
    assert plain.pp_p2p_bytes == 2 * hidden and plain.tp_buffers_bytes == 0 and plain.cp_buffers_bytes == 0
    sp = memory_per_gpu(LLAMA8, job, Plan(gpu=H100.name, num_gpus=64, tp=8, pp=4, vpp=2, sequence_parallel=True), H100)
    assert sp.overhead.pp_p2p_bytes == 4 * hidden // 8  # interleaved: forward and backward recvs of two chunks
    assert sp.overhead.tp_buffers_bytes == hidden  # the all-gathered full-sequence input
    assert sp.overhead.nccl_bytes == 3 * 512 * 2**20  # DP, TP and PP communicators
    cp = memory_per_gpu(LLAMA8, job, Plan(gpu=H100.name, num_gpus=2, cp=2), H100).overhead
    assert cp.cp_buffers_bytes == 2 * 2 * 2 * 1024 * 8 * 128  # double-buffered local K and V chunks


def test_layout_label_names_layouts_as_megatron_does() -> None:
    """One label for the plan table (with DP) and the explanations (without): degrees of 1 left
    out, SP beside TP, interleaving as /v, EP last (it is carved from the DP x CP ranks)."""
    from vramplan.models.core.layout import Layout

    assert Layout(tp=8, pp=16, vpp=2, sp=True).label(8) == "TP8+SP x PP16/v2 x DP8"
    assert Layout().label(64) == "DP64"
    assert Layout(tp=2, pp=4).label() == "TP2 x PP4"
    assert Layout(tp=4, cp=2, ep=8, sp=True).label(16) == "TP4+SP x CP2 x DP16 x EP8"
    assert Layout().label() == ""
