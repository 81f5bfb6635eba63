"""MoE expert GEMMs by kernel and shape (models/time/moe_gemm.py) and the EP term that carries them
(models/time/parallel_time.py), against the kernel table they are fitted to and published runs.

Published runs (tokens/s/GPU), each reproduced below with its stated settings:
- DeepSeek-V3 technical report (arXiv:2412.19437): 2,048 H800 (NVLink 400 GB/s both ways, 8 x 400
  Gb/s IB per node), PP16 x EP64 x ZeRO-1 DP, no TP, seq 4096, batch 15,360, FP8 GEMMs, recompute
  of RMSNorm and MLA up-projections, DualPipe; 180K H800 GPU hours per trillion tokens =
  1e12 / (180e3 x 3600) = 1,543. The H800 is the H100 SXM with half its NVLink (no catalogue row).
- Megatron-Bridge performance summary (26.04.01): Qwen3-30B-A3B on 16 H100, FP8, EP16, micro-batch
  1, global 1024, seq 4096, no recompute, no EP overlap (recipe qwen3_30b_a3b_pretrain_16gpu_h100_
  fp8cs_config: moe_a2a_overlap False): 8,960.
- NeMo AutoModel docs/performance-summary.mdx: Qwen3 MoE 30B on 8 H100, BF16, EP8 x FSDP8, local
  batch 4, seq 4096, activation checkpointing, grouped experts + DeepEP: 12,040.
- Hugging Face / NVIDIA blog "Accelerating Transformers Fine-Tuning with NVIDIA NeMo AutoModel"
  (2026-06-24): Qwen3-30B-A3B on 8 H100, Transformers v5 (grouped_mm experts, no EP), batch 1,
  seq 4096: 3,075 (peak 68.2 GiB: ZeRO-3 with activation checkpointing fits it, which is assumed).
"""

from __future__ import annotations

import math

import pytest
from helpers.catalogue import packaged_catalogue
from helpers.stack_columns import assert_stack_column

from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.catalogue.stack import with_preset
from vramplan.models.core.layout import Layout
from vramplan.models.core.setup import Job, Plan
from vramplan.models.time.calibration import LOOP_EXPERT_OVERHEAD_S
from vramplan.models.time.ep_time import all_to_all_seconds, ep_time_s, ep_traffic, moe_kernel
from vramplan.models.time.moe_gemm import expert_invocations, expert_shape, expert_slowdown, gemm_seconds
from vramplan.models.time.performance import performance

CAT = packaged_catalogue()
H100 = CAT.gpu("h100-sxm-80gb")
H800 = H100.model_copy(update={"name": "h800-sxm-80gb", "intra_node_bandwidth_gb_per_s": 200.0})
DSV3, QWEN3_30B, MIXTRAL = CAT.architecture("deepseek-v3"), CAT.architecture("qwen3-30b-a3b"), CAT.architecture("mixtral-8x7b")


def _job(stack: str, seq_len: int, **fields) -> Job:
    return Job(**with_preset({"seq_len": seq_len, "stack": stack, **fields}, load_stacks()))


# deepseek-ai/DeepGEMM README at a6d97a1 (2025-02-25): FP8 GEMMs on H800 (groups, M per group, N, K, TFLOPS).
DEEPGEMM = [
    (1, 64, 2112, 7168, 206), (1, 64, 24576, 1536, 289), (1, 64, 32768, 512, 219), (1, 64, 7168, 16384, 336),
    (1, 64, 4096, 7168, 287), (1, 64, 7168, 2048, 295), (1, 128, 2112, 7168, 352), (1, 128, 24576, 1536, 535),
    (1, 128, 32768, 512, 358), (1, 128, 7168, 16384, 645), (1, 128, 4096, 7168, 533), (1, 128, 7168, 2048, 510),
    (1, 4096, 2112, 7168, 1058), (1, 4096, 24576, 1536, 990), (1, 4096, 32768, 512, 590), (1, 4096, 7168, 16384, 1358),
    (1, 4096, 4096, 7168, 1304), (1, 4096, 7168, 2048, 1025), (4, 8192, 4096, 7168, 1297), (4, 8192, 7168, 2048, 1099),
    (8, 4096, 4096, 7168, 1288), (8, 4096, 7168, 2048, 1093), (1, 1024, 4096, 7168, 1233), (1, 1024, 7168, 2048, 925),
    (2, 512, 4096, 7168, 1040), (2, 512, 7168, 2048, 916), (4, 256, 4096, 7168, 932), (4, 256, 7168, 2048, 815),
]


def _deepgemm_tflops(m: int, n: int, k: int) -> float:
    seconds = gemm_seconds(m, n, k, H800.fp8_dense_tflops, H800.hbm_bandwidth_gb_per_s, 1)
    return 2 * m * n * k / seconds / 1e12


def test_the_gemm_model_reproduces_deepgemms_table() -> None:
    """The fit (models/time/calibration.py): rms log error 0.118, 24 of 28 shapes within 15%; the
    misses are the three narrow N = 2112 shapes (too few output tiles to fill the SMs: predicted
    1.2-1.45x fast) and M = 128 x 7168 x 16384 (0.83x)."""
    errors = [((m, n, k), math.log(_deepgemm_tflops(m, n, k) / measured)) for _, m, n, k, measured in DEEPGEMM]
    assert math.sqrt(sum(e * e for _, e in errors) / len(errors)) < 0.12
    misses = {shape for shape, e in errors if abs(math.exp(e) - 1) >= 0.15}
    assert misses == {(64, 2112, 7168), (128, 2112, 7168), (4096, 2112, 7168), (128, 7168, 16384)}


def test_few_tokens_per_expert_stream_weights_and_ep_brings_tokens_back() -> None:
    """Qwen3-30B-A3B at 4k: 256 tokens per expert without EP (memory-bound: 2.2x), 2,048 with EP8 (1.25x)."""
    slow = [expert_slowdown(expert_shape(QWEN3_30B, 4096, Layout(ep=ep), 2), H100.bf16_dense_tflops,
                            H100.hbm_bandwidth_gb_per_s) for ep in (1, 2, 8, 16)]
    assert slow == sorted(slow, reverse=True)
    assert 2.0 < slow[0] < 2.3 and slow[2] < 1.3
    assert expert_shape(QWEN3_30B, 4096, Layout(ep=8), 2).tokens == 4096 * 8 * 8 / 128


def test_expert_tensor_parallelism_narrows_the_gemms() -> None:
    """Megatron's expert TP = TP slices every expert: DeepSeek-V3's 2048-wide experts become 256 wide
    under TP8 and run 2.4x slower even with 1,024 tokens each; EP64 leaves them whole (1.09x)."""
    ep64 = expert_shape(DSV3, 4096, Layout(pp=16, ep=64), 1)
    tp8 = expert_shape(DSV3, 4096, Layout(tp=8, pp=16, ep=8, sp=True), 1)
    assert ep64.matrices[-1] == (2048, 7168) and tp8.matrices[-1] == (256, 7168)
    fp8 = (H800.fp8_dense_tflops, H800.hbm_bandwidth_gb_per_s)
    assert expert_slowdown(ep64, *fp8) < 1.1 < 2.0 < expert_slowdown(tp8, *fp8)


def test_lora_runs_no_weight_gradient_gemm_and_dense_models_have_no_experts() -> None:
    full = expert_shape(MIXTRAL, 4096, Layout(), 2)
    lora = expert_shape(MIXTRAL, 4096, Layout(), 2, weight_gradients=False)
    rates = (H100.bf16_dense_tflops, H100.hbm_bandwidth_gb_per_s)
    assert expert_slowdown(lora, *rates) <= expert_slowdown(full, *rates)
    assert expert_shape(CAT.architecture("llama-3.1-8b"), 4096, Layout(), 2) is None


def test_each_stack_names_its_moe_kernel() -> None:
    """catalogues/stacks.csv `moe_kernel`, with the code that runs it in each row's source."""
    assert_stack_column("moe_kernel", {
        "hf": "grouped", "deepspeed": "grouped", "megatron": "grouped", "torchtitan": "grouped",
        "torchtune": "grouped", "litgpt": "loop", "unsloth": "grouped", "custom": "grouped"})
    assert moe_kernel(_job("litgpt", 2048)) == "loop"


def test_a_loop_pays_each_expert_call() -> None:
    """litgpt's LLaMAMoE loops over the experts: on the same plan it differs from torchtune's grouped
    kernel by LOOP_EXPERT_OVERHEAD_S per local expert, MoE layer and sequence (micro-batch 1)."""
    plan = Plan(gpu=H100.name, num_gpus=8, zero=3, micro_batch=1, grad_accum=4, recompute="full")
    loop = ep_time_s(MIXTRAL, _job("litgpt", 4096), plan, H100, 8, 50.0)
    grouped = ep_time_s(MIXTRAL, _job("torchtune", 4096), plan, H100, 8, 50.0)
    calls = expert_invocations(MIXTRAL, plan.layout, 4)
    assert calls == 4 * 8 * 32
    assert loop - grouped == pytest.approx(calls * LOOP_EXPERT_OVERHEAD_S.value)
    assert not LOOP_EXPERT_OVERHEAD_S.calibrated


# DeepSeek-V3 on 2,048 "H800" (the H100 row with 200 GB/s of NVLink a direction, 8 per node, 50 GB/s IB).
DSV3_RUN = dict(num_gpus=2048, zero=1, micro_batch=1, precision="fp8", recompute="selective")
DSV3_LAYOUTS = {  # layout -> accumulation for 15,360 sequences
    "PP16 x EP64 (published)": (dict(pp=16, ep=64), 120),
    "TP8+SP x PP16 x EP8": (dict(tp=8, pp=16, ep=8, sequence_parallel=True), 960),
    "TP8+SP x PP8 x EP16": (dict(tp=8, pp=8, ep=16, sequence_parallel=True), 480),
}


def _dsv3(layout: str):
    degrees, accum = DSV3_LAYOUTS[layout]
    plan = Plan(gpu=H800.name, grad_accum=accum, **degrees, **DSV3_RUN)
    return plan, performance(DSV3, _job("megatron", 4096), plan, H800, 8, 50.0)


def test_deepseek_v3_published_layout_rates_above_tp8_layouts() -> None:
    """Before this model the TP8 layouts read as fast as the published one (779 vs 792 tokens/s/GPU:
    the all-to-all, charged at the network rate for all (ep-1)/ep peers, made EP64 no cheaper, and
    256-wide TP slices of the experts cost nothing). Now: 810 for PP16 x EP64 (783 before Megatron's
    dense-layer kernel speed, calibration.STACK_KERNEL_SPEED; 814 (868 while the 1F1B
    bubble idled for the stage's compute alone, not its exposed all-to-all), less than 0.82 of it for
    TP8 (812 before the megatron stack's cuDNN attention, models/time/attention_kernel.py; 854, 662 and
    658 before the fp8 recipe's casts, models/time/fp8.py, which weigh more on 256-wide slices; 847
    before the slowest stage was modelled: 61 layers on 16 ranks put 4 on most of them). 783 with the
    alltoall dispatcher's permutation passes (models/time/moe_permute.py; TP8 layouts 527 and 530);
    the TP8 layouts 0.46 and 0.56 of it now)."""
    published = _dsv3("PP16 x EP64 (published)")[1].tokens_per_s / 2048
    assert published == pytest.approx(810, rel=0.02)
    for layout in ("TP8+SP x PP16 x EP8", "TP8+SP x PP8 x EP16"):
        assert _dsv3(layout)[1].tokens_per_s / 2048 < 0.82 * published


def test_deepseek_v3_is_short_by_the_all_to_all_dualpipe_hides() -> None:
    """1,543 reported; 810 predicted (0.52x; 783 before Megatron's dense-layer kernel speed): DualPipe
    overlaps the EP all-to-all with the other micro-batch's compute, Megatron's default (the megatron
    stack) does not. Without the all-to-all the prediction is 0.99x the report (0.93x before the
    kernel speed) with the megatron stack's cuDNN attention and Megatron's alltoall-dispatcher
    permutation passes (1.36 s of a 39 s step, models/time/moe_permute.py; 1.14x before them):
    DeepSeek's own framework is not Megatron, its dispatch is DeepEP's and its attention kernel is
    not published (MTP and DualPipe's residual bubble are not modelled either)."""
    plan, perf = _dsv3("PP16 x EP64 (published)")
    assert 0.5 < perf.tokens_per_s / 2048 / 1543 < 0.6
    traffic = ep_traffic(DSV3, _job("megatron", 4096), plan)
    a2a = all_to_all_seconds(traffic.routed_bytes, plan.layout, H800, 8, 50.0)
    hidden = perf.tokens_per_step / (perf.step_time_s - a2a) / 2048
    assert 0.9 < hidden / 1543 < 1.2


def test_ep_peers_inside_the_instance_talk_over_nvlink() -> None:
    """EP64 over 8-GPU instances: 7 of the 63 peers share the rank's instance; only 56/64 of the routed
    bytes cross the network (before: 63/64), the rest at NVLink rate beside them."""
    plan = Plan(gpu=H800.name, grad_accum=120, pp=16, ep=64, **DSV3_RUN)
    traffic = ep_traffic(DSV3, _job("megatron", 4096), plan)
    network = traffic.routed_bytes * 56 / 64 / (50.0 * 0.8 * 1e9)
    assert all_to_all_seconds(traffic.routed_bytes, plan.layout, H800, 8, 50.0) == pytest.approx(network)


def test_qwen3_30b_megatron_bridge_h100_without_ep_overlap() -> None:
    """8,960 measured (FP8, EP16 over two nodes, no EP overlap): 7,481 predicted (0.83x; 7,305 before
    Megatron's dense-layer kernel speed, calibration.STACK_KERNEL_SPEED; 7,910 before
    the alltoall dispatcher's permutation passes, models/time/moe_permute.py; 7,457 before the
    megatron stack's cuDNN attention, models/time/attention_kernel.py; 5,107 when the whole
    all-to-all went over the network; 7,689 before the fp8 recipe's casts, which weigh more on
    768-wide experts, models/time/fp8.py), without the MoE host wait (a full-iteration graph,
    models/time/moe_host.py): the kernels alone. With the wait 6,536 (0.73x; 6,446 before) on this all-to-all
    dispatcher; the run's HybridEP with it reads 0.95 (tests/data/measured_throughput.csv)."""
    plan = Plan(gpu=H100.name, num_gpus=16, ep=16, zero=1, micro_batch=1, grad_accum=64, precision="fp8")
    perf = performance(QWEN3_30B, _job("megatron", 4096, cuda_graphs="full-iteration"), plan, H100, 8, 50.0)
    assert perf.tokens_per_s / 16 == pytest.approx(7481, rel=0.02)
    assert performance(QWEN3_30B, _job("megatron", 4096), plan, H100, 8, 50.0).tokens_per_s / 16 == pytest.approx(6536, rel=0.02)


def test_qwen3_30b_nemo_automodel_ep8() -> None:
    """12,040 measured (grouped experts, DeepEP, EP8 inside one node, local batch 4 with activation
    checkpointing): 10,072 predicted (0.84x; 10,898 before)."""
    plan = Plan(gpu=H100.name, num_gpus=8, ep=8, zero=3, micro_batch=4, grad_accum=16, recompute="full")
    # AutoModel's TE norms, linears and fused RoPE (examples/llm_benchmark/qwen/qwen3_moe_30b_te_deepep.yaml
    # backend): no eager element-wise cost (models/time/compile_speed.py), as a compiled block
    perf = performance(QWEN3_30B, _job("torchtitan", 4096, compile=True), plan, H100, 8, 50.0)
    assert 0.8 < perf.tokens_per_s / 8 / 12040 < 0.9


def test_qwen3_30b_under_transformers_v5_is_a_documented_miss() -> None:
    """3,075 measured; 6,505 predicted (2.12x high; 8,462 and 2.75x before). The expert GEMMs of 256
    tokens each now run 2.2x slower than dense-shaped ones; what is left is not in the model: ZeRO-3
    gathering every expert of every layer for each micro-batch through accelerate's FSDP, the fp32
    reduce-scatter, the unfused routing ops (argsort, gather, index_add)."""
    plan = Plan(gpu=H100.name, num_gpus=8, zero=3, micro_batch=1, recompute="full")
    perf = performance(QWEN3_30B, _job("hf", 4096), plan, H100, 8, 50.0)
    assert 2.0 < perf.tokens_per_s / 8 / 3075 < 2.25
