"""Optional: Gated DeltaNet layers (Qwen3-Next, Qwen3.5 dense and MoE) against what autograd saves.

Skipped unless torch and transformers are installed (torch 2.13.0 CPU, transformers 5.24.0). The two
CUDA kernels transformers calls for these layers when installed (flash-linear-attention's chunked rule,
causal-conv1d) run as CPU stand-ins that save what their autograd functions save
(tests/tools/gated_delta_kernels.py); everything around them is transformers' own code. Tiny configs,
b = 2, s = 64, bf16, one training forward under saved_tensors_hooks: per decoder layer, unique saved
storages / vramplan's terms (models/memory/linear_attention_terms.py), in layer order (three
linear layers, then a full-attention layer, twice: with one full layer its RoPE cos/sin would be saved
by that layer alone, where a real model's full layers share them). Dense layers are exact to the byte
but for 32 bytes a linear layer (exp(A_log) and its negation: per layer, not per token, not counted);
MoE layers keep the router's 2 bytes a routed token less, as qwen2_moe's.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import transformers.models.qwen3_5.modeling_qwen3_5 as qwen3_5  # noqa: E402
import transformers.models.qwen3_5_moe.modeling_qwen3_5_moe as qwen3_5_moe  # noqa: E402
import transformers.models.qwen3_next.modeling_qwen3_next as qwen3_next  # noqa: E402
from tools import gated_delta_kernels  # noqa: E402
from tools.probe_terms import layer_ratios  # noqa: E402

_GDN = dict(num_hidden_layers=8, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=1000,
            linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=24,
            linear_conv_kernel_dim=4)
_EXPERTS = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48)
CONFIGS = {
    "qwen3_next": ("qwen3_next", dict(_GDN, **_EXPERTS, intermediate_size=176, full_attention_interval=4)),
    "qwen3_5_text": ("qwen3_5_text", dict(_GDN, intermediate_size=176,
                                          layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 2)),
    "qwen3_5_moe_text": ("qwen3_5_moe_text", dict(_GDN, **_EXPERTS)),
}
# per layer, layers 0-7 (full attention at 3 and 7): the MoE layers' router keeps 2 bytes a routed token
# less than the terms (its bf16 routing weights), as qwen2_moe's (0.9994 linear, 0.9991 / 0.9993 full)
_MOE_RATIOS = {"sdpa": (0.9994, 0.9994, 0.9994, 0.9991) * 2, "eager": (0.9994, 0.9994, 0.9994, 0.9993) * 2}
RATIOS = {
    "qwen3_next": _MOE_RATIOS,
    "qwen3_5_text": {"sdpa": (1.0,) * 8, "eager": (1.0,) * 8},
    "qwen3_5_moe_text": _MOE_RATIOS,
}


@pytest.fixture(autouse=True)
def _kernels(monkeypatch):
    for modeling in (qwen3_next, qwen3_5, qwen3_5_moe):
        monkeypatch.setattr(modeling, "torch_chunk_gated_delta_rule", modeling.torch_chunk_gated_delta_rule)
        monkeypatch.setattr(modeling, "causal_conv1d_fn", modeling.causal_conv1d_fn)
        gated_delta_kernels.install(modeling)


@pytest.mark.parametrize(("name", "attn"), [(n, a) for n, by in RATIOS.items() for a in by])
def test_gated_delta_layer_saved_bytes_ratio(name: str, attn: str) -> None:
    model_type, kwargs = CONFIGS[name]
    assert layer_ratios(model_type, kwargs, attn, name) == pytest.approx(RATIOS[name][attn], abs=1e-4)
