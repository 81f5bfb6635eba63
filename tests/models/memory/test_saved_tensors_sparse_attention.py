"""Optional: DeepSeek Sparse Attention (DeepSeek-V3.2 `deepseek_v32`, GLM-5 `glm_moe_dsa`) against what
transformers 5.24 really keeps (torch 2.13.0 CPU; skipped without torch and transformers).

- Saved tensors per decoder layer (tests/tools/probe_terms.py: b = 2, s = 64, bf16, one training forward
  under saved_tensors_hooks), measured / vramplan's terms. The indexer runs under torch.no_grad and saves
  nothing. Eager attention: exact on the dense layer, 1.005 on the MoE layer (DeepSeek-V3's group-limited
  router state, as deepseek_v3). SDPA: CPU runs MLA's unequal q/k and v widths through its math path
  (deepseek_v3's documented gap), so the SDPA case sets v_head_dim = qk_nope + qk_rope, where CPU SDPA runs
  its fused kernel with the mask: it saves the top-k mask in the activation dtype (the attn.index_mask
  term) and MLA's head-major output is copied for o_proj (attn.output_copy, deepseek_v3 too): exact on
  the dense layer, 1.006 on the MoE layer.
- The indexer's forward transient (torch's MemTracker on the layer's indexer alone, its inputs made
  before tracking): measured / models/memory/sparse_attention_terms.py indexer_transient_bytes. What is
  left out are a few tensors of b x s x (index head width) or less (the rotary halves' temporaries), a
  share that falls as s grows (the scores are b x s x heads x s).
- The whole step's activation peak (MemTracker over one forward and backward, tools/probe_peak.py) reads
  0.81-0.99 of the activations pillar less its fragmentation reserve: under it, as the other families'
  (test_saved_tensors_families.py). Under full recompute the indexer runs once the layer has rebuilt its
  attention's prefix (the norm and MLA's latents), which the estimate adds (1.077 before it did).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tools.probe_terms import layer_ratios  # noqa: E402
from transformers import AutoConfig  # noqa: E402

from vramplan.models.catalogue.hf_config import architecture_from_config  # noqa: E402
from vramplan.models.memory.saved_tensors import Shape  # noqa: E402
from vramplan.models.memory.sparse_attention_terms import indexer_transient_bytes  # noqa: E402

# one dense layer, then a DeepSeek-V3 MoE layer (shared expert, sigmoid router on an fp32 copy)
TINY = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=4, intermediate_size=176,
            vocab_size=1000, q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16,
            n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=48,
            first_k_dense_replace=1, n_group=1, topk_group=1, index_n_heads=4, index_head_dim=16, index_topk=16)
EQUAL_WIDTHS = dict(TINY, v_head_dim=24)  # q/k heads 16 + 8 = v heads: CPU SDPA's fused kernel, mask and all

RATIOS = {  # (config, attn) -> measured / estimated per layer (dense, MoE)
    ("deepseek_v32", "eager"): (1.0, 1.005), ("deepseek_v32", "sdpa"): (1.0, 1.006),
    ("glm_moe_dsa", "eager"): (1.0, 1.005), ("glm_moe_dsa", "sdpa"): (1.0, 1.006),
    ("deepseek_v3", "sdpa"): (1.0, 1.006),  # the same MLA without the indexer: the output copy, no mask
}


@pytest.mark.parametrize(("model_type", "attn"), sorted(RATIOS))
def test_layer_saved_bytes_ratio(model_type: str, attn: str) -> None:
    kwargs = EQUAL_WIDTHS if attn == "sdpa" else TINY
    if model_type == "deepseek_v3":
        kwargs = {k: v for k, v in kwargs.items() if not k.startswith("index_")}
    assert layer_ratios(model_type, kwargs, attn) == pytest.approx(RATIOS[(model_type, attn)], abs=5e-4)


def _measured_indexer_peak(model_type: str, kwargs: dict, b: int, s: int) -> int:
    """MemTracker's peak of the first layer's indexer forward, its inputs captured from a model forward."""
    from tools.saved_tensors_probe import build_model
    from torch.distributed._tools.mem_tracker import MemTracker

    model = build_model(model_type, kwargs, torch.bfloat16, "sdpa", 0)
    indexer = model.model.layers[0].self_attn.indexer
    captured = {}
    handle = indexer.register_forward_pre_hook(lambda _, args, kw: captured.update(args=args, kwargs=kw),
                                               with_kwargs=True)
    ids = torch.randint(0, kwargs["vocab_size"], (b, s), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        model(input_ids=ids, use_cache=False)
    handle.remove()
    tracker = MemTracker()
    tracker.track_external(indexer)
    with tracker, torch.no_grad():
        indexer(*captured["args"], **captured["kwargs"])
    peak = {getattr(k, "value", str(k)): v for k, v in next(iter(tracker.get_tracker_snapshot("peak").values())).items()}
    return peak["Total"] - peak.get("Parameter", 0)


# (model_type, index heads, index head width, s) -> measured / estimated, pinned
TRANSIENTS = {("deepseek_v32", 8, 16, 128): 1.0153, ("glm_moe_dsa", 8, 16, 128): 1.0153,
              ("deepseek_v32", 4, 32, 256): 1.0054, ("deepseek_v32", 16, 16, 256): 1.0059}


@pytest.mark.parametrize(("model_type", "heads", "width", "s"), sorted(TRANSIENTS))
def test_indexer_transient(model_type: str, heads: int, width: int, s: int) -> None:
    kwargs = dict(EQUAL_WIDTHS, index_n_heads=heads, index_head_dim=width)
    arch = architecture_from_config(AutoConfig.for_model(model_type, **kwargs).to_dict(), name="t", source="test")
    estimate = indexer_transient_bytes(arch, "flash", Shape(b=2, s=s, e=2), mask_counted=True)
    ratio = _measured_indexer_peak(model_type, kwargs, 2, s) / estimate
    assert ratio == pytest.approx(TRANSIENTS[(model_type, heads, width, s)], abs=5e-4)


# (model_type, attn, full recompute) -> MemTracker's activation peak / the activations pillar less its
# fragmentation reserve (MemTracker counts allocated bytes; the reserve is the caching allocator's stranded
# block), pinned. b = 2, s = 128, h 128, 8 index heads of 32: the indexer's transient is most of the peak.
# Without recompute the forward's peak (the last layer's indexer) has no output layer nor loss beside it.
PEAKS = {("deepseek_v32", "sdpa", False): 0.844, ("deepseek_v32", "sdpa", True): 0.990,
         ("glm_moe_dsa", "eager", False): 0.810}


@pytest.mark.parametrize(("model_type", "attn", "checkpointing"), sorted(PEAKS))
def test_activation_pillar_bounds_the_measured_peak(model_type: str, attn: str, checkpointing: bool) -> None:
    from tools.probe_peak import measured_activation_peak

    from vramplan.models.core.setup import Job, Plan
    from vramplan.models.memory.activations import activations

    kwargs = dict(EQUAL_WIDTHS, hidden_size=128, intermediate_size=352, vocab_size=64, moe_intermediate_size=96,
                  q_lora_rank=64, kv_lora_rank=48, index_n_heads=8, index_head_dim=32)
    arch = architecture_from_config(AutoConfig.for_model(model_type, **kwargs).to_dict(), name="t", source="test")
    job = Job(seq_len=128, attention="flash" if attn == "sdpa" else "eager")
    estimate = activations(arch, job, Plan(gpu="x", micro_batch=2, recompute="full" if checkpointing else "none"))
    allocated = estimate.total_bytes - estimate.fragmentation_reserve_bytes
    measured = measured_activation_peak(model_type, kwargs, 2, 128, attn, checkpointing)
    assert measured / allocated == pytest.approx(PEAKS[(model_type, attn, checkpointing)], abs=5e-3)
