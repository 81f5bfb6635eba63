"""DeepSeek Sparse Attention (DeepSeek-V3.2 `deepseek_v32`, GLM-5 `glm_moe_dsa`): exact parameter counts, the
indexer's saved mask, transient and fragmentation block, its forward-only FLOPs at the fp32 rate, and the
refusals where it is not modelled. The saved tensors and the transient are measured against transformers in
tests/models/memory/test_saved_tensors_sparse_attention.py (optional: torch)."""

from __future__ import annotations

import pytest
from helpers.catalogue import packaged_catalogue

from vramplan.models.architecture.params import count_params, indexer_params
from vramplan.models.catalogue.hf_config import architecture_from_config
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.estimate import estimate
from vramplan.models.memory.activations import activations
from vramplan.models.memory.memory import memory_per_gpu
from vramplan.models.time.flops import indexer_forward_flops, plan_flops_per_token
from vramplan.models.time.performance import compute_time_s

SMALL_V32 = {"num_hidden_layers": 4, "hidden_size": 256, "q_lora_rank": 64, "kv_lora_rank": 32, "qk_rope_head_dim": 16,
             "qk_nope_head_dim": 32, "v_head_dim": 32, "num_attention_heads": 8, "num_key_value_heads": 8,
             "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64, "intermediate_size": 512,
             "first_k_dense_replace": 1, "index_n_heads": 4, "index_head_dim": 32, "index_topk": 16, "vocab_size": 1000,
             "n_group": 1, "topk_group": 1}
SMALL_GLM = {"num_hidden_layers": 3, "hidden_size": 192, "q_lora_rank": 48, "kv_lora_rank": 32, "qk_rope_head_dim": 16,
             "qk_nope_head_dim": 48, "v_head_dim": 64, "num_attention_heads": 4, "num_key_value_heads": 4,
             "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64, "intermediate_size": 384,
             "first_k_dense_replace": 2, "index_n_heads": 2, "index_head_dim": 24, "index_topk": 8, "vocab_size": 500,
             "tie_word_embeddings": True}

# sum(p.numel() for p in AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **kwargs)).parameters())
# on the meta device, transformers 5.24.0 / torch 2.13.0. The class defaults are the published shapes:
# DeepseekV32Config documents deepseek-ai/DeepSeek-V3.2-Exp (671.9B), GlmMoeDsaConfig zai-org/GLM-5 (743.9B).
TRANSFORMERS_COUNTS = [
    ("deepseek_v32", {}, 671_877_929_216),
    ("glm_moe_dsa", {}, 743_911_199_232),
    ("deepseek_v32", SMALL_V32, 2_851_712),
    ("glm_moe_dsa", SMALL_GLM, 1_029_696),  # two dense layers, tied embeddings
]


def _arch(model_type: str, kwargs: dict | None = None):
    return architecture_from_config({"model_type": model_type, **(kwargs or {})}, name=model_type, source="config.json")


def _without_indexer(arch):
    return arch.model_copy(update={"index_heads": 0, "index_head_dim": 0, "index_topk": 0})


@pytest.mark.parametrize(("model_type", "kwargs", "expected"), TRANSFORMERS_COUNTS)
def test_counts_equal_transformers(model_type: str, kwargs: dict, expected: int) -> None:
    assert count_params(_arch(model_type, kwargs)).total == expected


def test_the_indexer_is_read_and_counted_per_layer() -> None:
    arch = _arch("deepseek_v32")
    assert (arch.index_heads, arch.index_head_dim, arch.index_topk, arch.q_lora_rank) == (64, 128, 2048, 1536)
    # wq_b 1536 -> 64 x 128, wk 7168 -> 128, k_norm (LayerNorm: weight and bias) 2 x 128, weights_proj 7168 -> 64
    assert indexer_params(arch) == 1536 * 8192 + 7168 * 128 + 256 + 7168 * 64 == 13_959_424
    assert count_params(arch).total - count_params(_without_indexer(arch)).total == 61 * 13_959_424
    glm = _arch("glm_moe_dsa")
    assert (glm.index_heads, glm.head_dim, glm.v_head_dim, glm.first_dense_layers) == (32, 256, 256, 3)


@pytest.mark.parametrize("schedule", [
    {"indexer_types": ["shared", "full", "full"]},  # a first layer with no top-k to reuse (transformers refuses it)
    {"index_topk_freq": 2, "index_skip_topk_offset": 0},
    {"indexer_types": ["full", "shared", "shared", "full", "full", "shared"][:3] + ["x"]},
    {"indexer_types": "full"},
    {"index_topk_freq": "2"},
    {"index_skip_topk_offset": -1},
])
def test_a_bad_glm_indexer_schedule_is_one_line(schedule: dict) -> None:
    with pytest.raises(VramplanError) as caught:
        _arch("glm_moe_dsa", {**SMALL_GLM, **schedule})
    assert next(iter(schedule)) in str(caught.value) and "\n" not in str(caught.value)


def test_a_non_periodic_glm_schedule_is_refused() -> None:
    with pytest.raises(VramplanError, match="not a schedule vramplan models"):
        _arch("glm_moe_dsa", {**SMALL_GLM, "num_hidden_layers": 5,
                               "indexer_types": ["full", "shared", "full", "full", "shared"]})


def test_glm_every_layer_full_is_read() -> None:
    for schedule in ({"indexer_types": ["full"] * 3}, {"index_topk_pattern": "FFF"}, {"index_topk_freq": 1}):
        arch = _arch("glm_moe_dsa", {**SMALL_GLM, **schedule})
        assert (arch.index_heads, arch.indexer_every, arch.indexer_offset) == (2, 1, 0)


# GLM-5.x's IndexShare: index_topk_freq 4 with index_skip_topk_offset 3 (full layers 0-2, then every 4th from 6),
# 21 of GLM-5's 78 layers run an indexer; the others reuse the previous one's top-k. transformers on the meta
# device: 743,377,000,704 parameters (534,198,528 fewer than every layer's indexer).
def test_glm_layers_that_reuse_a_top_k_run_no_indexer() -> None:
    arch = _arch("glm_moe_dsa", {"index_topk_freq": 4, "index_skip_topk_offset": 3})
    assert (arch.indexer_every, arch.indexer_offset) == (4, 3)
    assert [arch.layer_has_indexer(i) for i in range(11)] == [True] * 3 + [False] * 3 + [True] + [False] * 3 + [True]
    assert count_params(arch).total == 743_377_000_704
    from_list = _arch("glm_moe_dsa", {"indexer_types": ["full" if arch.layer_has_indexer(i) else "shared" for i in range(78)]})
    pattern = _arch("glm_moe_dsa", {"index_topk_pattern": "".join("F" if arch.layer_has_indexer(i) else "S"
                                                                  for i in range(78))})
    assert count_params(from_list).total == count_params(pattern).total == 743_377_000_704
    every = _arch("glm_moe_dsa")
    total, fp32 = indexer_forward_flops(arch, 4096)
    assert (total, fp32) == tuple(v * 21 // 78 for v in indexer_forward_flops(every, 4096))
    # the shared layers still apply (and SDPA saves) the top-k mask; the transient is the indexed layers'
    job, plan = Job(seq_len=4096), Plan(gpu="h100-sxm-80gb", num_gpus=64, zero=3)
    shared, full = activations(arch, job, plan), activations(every, job, plan)
    assert (shared.per_layer_bytes, shared.backward_peak_extra_bytes) == (full.per_layer_bytes, full.backward_peak_extra_bytes)


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"index_n_heads": 0}, "index_n_heads"),
    ({"index_head_dim": True}, "index_head_dim"),
    ({"q_lora_rank": None}, "index_heads"),  # the indexer reads MLA's query latent
    ({"index_head_dim": 16}, "index_heads"),  # no wider than the rotary part it splits off
])
def test_a_bad_indexer_value_is_one_line(kwargs: dict, named: str) -> None:
    with pytest.raises(VramplanError) as caught:
        _arch("deepseek_v32", {**SMALL_V32, **kwargs})
    assert named in str(caught.value) and "\n" not in str(caught.value)


def test_masked_sdpa_keeps_the_top_k_mask_and_the_indexer_is_a_transient() -> None:
    arch = _arch("deepseek_v32")
    s, b = 4096, 1
    plain = _without_indexer(arch)
    job, plan = Job(seq_len=s), Plan(gpu="h100-sxm-80gb", num_gpus=64, zero=3)
    dsa, dense = activations(arch, job, plan), activations(plain, job, plan)
    # SDPA saves the additive mask, bf16 b x 1 x s x s, in every layer
    assert dsa.per_layer_bytes - dense.per_layer_bytes == 2 * b * s * s
    assert not {t.name for t in activations(arch, Job(seq_len=s, attention="eager"), plan).terms} & {"attn.index_mask"}
    # the indexer's matmul moment: q.float(), the keys broadcast over the queries (fp32, 128 wide), the product
    # (64 heads), then the 16-bit queries and keys beside, and the boolean 4-D causal mask
    t = b * s
    matmul = 4 * t * (64 * 128 + 128 * s + 64 * s)
    projected = 2 * t * (2 * 64 * 128 + 64 * 64 + 2 * 128 + 64) + 4 * t * 128
    assert dsa.backward_peak_extra_bytes == matmul + projected + b * s * s == 13_191_610_368 + 16_777_216
    # the largest single block (the broadcast keys, 4 t s 128) is the fragmentation reserve under hf's allocator
    assert dsa.fragmentation_reserve_bytes == 4 * t * s * 128 > dense.fragmentation_reserve_bytes
    # full recompute: the checkpoints' closures keep the boolean causal mask, and the indexer runs again
    full = activations(arch, job, plan.model_copy(update={"recompute": "full"}))
    plain_full = activations(plain, job, plan.model_copy(update={"recompute": "full"}))
    assert full.layers_bytes - plain_full.layers_bytes == b * s * s
    # the recompute has rebuilt the attention's prefix when the indexer runs: the norm (fp32 input, rsqrt,
    # output), the linear input, MLA's q (1,536) and kv (512) latents' norms and linear inputs, with the
    # layer's output gradient in flight
    rebuilt = t * (7168 * (4 + 2 + 2 + 2) + 1536 * (4 + 2 + 2) + 512 * (4 + 2 + 2) + 3 * 4)
    assert full.backward_peak_extra_bytes == matmul + projected + rebuilt


def test_the_indexer_transient_is_whole_on_every_tensor_parallel_rank() -> None:
    arch = _arch("deepseek_v32")
    job = Job(seq_len=4096)
    one = activations(arch, job, Plan(gpu="h100-sxm-80gb", num_gpus=64, zero=3))
    tp8 = activations(arch, job, Plan(gpu="h100-sxm-80gb", num_gpus=64, zero=3, tp=8, ep=1))
    assert tp8.backward_peak_extra_bytes == one.backward_peak_extra_bytes  # transformers leaves it replicated
    assert tp8.fragmentation_reserve_bytes == one.fragmentation_reserve_bytes


def test_indexer_flops_are_forward_only_and_its_scores_run_at_the_fp32_rate() -> None:
    arch = _arch("deepseek_v32")
    s = 4096
    total, fp32 = indexer_forward_flops(arch, s)
    per_layer = 2 * (1536 * 64 * 128 + 7168 * 128 + 7168 * 64) + 2 * 64 * 128 * s + 2 * 64 * s
    assert (total, fp32) == (61 * per_layer, 61 * 2 * 64 * 128 * s)
    job, plan = Job(seq_len=s), Plan(gpu="h100-sxm-80gb", num_gpus=64, zero=3)
    flops, plain = plan_flops_per_token(arch, job, plan), plan_flops_per_token(_without_indexer(arch), job, plan)
    assert flops.model - plain.model == total and flops.hardware - plain.hardware == total  # no backward
    recomputed = plan_flops_per_token(arch, job, plan.model_copy(update={"recompute": "full"}))
    assert (recomputed.indexer, recomputed.fp32) == (2 * total, 2 * fp32)  # full recompute runs it again
    gpu = packaged_catalogue().gpu("h100-sxm-80gb")
    extra_s = compute_time_s(arch, job, plan, gpu) - compute_time_s(_without_indexer(arch), job, plan, gpu)
    # H100 SXM: 989 bf16 / 67 fp32 dense TFLOPS; the fp32 scores cost ~14.8x a bf16 FLOP
    bf16_share = (total - fp32) + fp32 * 989 / 67
    assert extra_s / compute_time_s(_without_indexer(arch), job, plan, gpu) == pytest.approx(
        bf16_share / (plain.hardware - 0), rel=0.15)


@pytest.mark.parametrize(("job", "plan", "field"), [
    (Job(seq_len=4096, stack="megatron"), Plan(gpu="h100-sxm-80gb", num_gpus=64, zero=1, pp=8, ep=8), "stack"),
    (Job(seq_len=4096, stack="torchtitan"), Plan(gpu="h100-sxm-80gb", num_gpus=64, zero=3), "stack"),
    (Job(seq_len=4096, stack="custom"), Plan(gpu="h100-sxm-80gb", num_gpus=64, zero=3, cp=2), "cp"),
])
def test_what_is_not_modelled_is_refused_naming_the_field(tmp_path, job: Job, plan: Plan, field: str) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "deepseek_v32"}')
    with pytest.raises(VramplanError) as caught:
        estimate(packaged_catalogue(), str(path), job, plan, 1e9)
    assert caught.value.field == field and "\n" not in str(caught.value)


def test_hf_and_deepspeed_estimate_it() -> None:
    catalogue = packaged_catalogue()
    gpu = catalogue.gpu("h200-sxm-141gb")
    for model_type in ("deepseek_v32", "glm_moe_dsa"):
        arch = _arch(model_type)
        for job in (Job(seq_len=4096, method="lora"), Job(seq_len=4096, stack="deepspeed")):
            memory = memory_per_gpu(arch, job, Plan(gpu=gpu.name, num_gpus=256, zero=3, recompute="full"), gpu)
            assert memory.total_bytes > 0


def test_an_estimate_says_how_large_the_indexer_transient_is() -> None:
    catalogue = packaged_catalogue()
    result = estimate(catalogue, "deepseek-v3.2", Job(seq_len=4096, stack="deepspeed"),
                      Plan(gpu="h200-sxm-141gb", num_gpus=64, zero=3, recompute="full"), 1e9)
    # 13,191,610,368 + 16,777,216 bytes (the causal mask): 12.3 GiB
    assert any("indexer holds 12.3 GiB of fp32 scores" in w for w in result.warnings)


def test_a_hostile_layer_count_is_the_schemas_error_not_a_hang() -> None:
    """GLM-5's indexer schedule was built layer by layer before the schema bounded num_hidden_layers: 1e12 layers
    hung (and took 13 GB) in the hostile sweep of 2026-12-06's eleventh session."""
    with pytest.raises(VramplanError) as caught:
        _arch("glm_moe_dsa", {"num_hidden_layers": 10**12, "index_topk_freq": 2})
    assert "num_hidden_layers" in str(caught.value) and "\n" not in str(caught.value)
