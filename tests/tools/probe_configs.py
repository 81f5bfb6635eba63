"""The saved-tensors probe's tiny model configs and dtype names (tools/saved_tensors_probe.py)."""

from __future__ import annotations

import torch

_TINY = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=176, vocab_size=1000)

# Default small configs used by the vramplan probe report (the newer families: tests/models/memory/test_saved_tensors_families.py).
SMALL_CONFIGS: dict[str, tuple[str, dict]] = {
    "gpt2": ("gpt2", dict(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=256)),
    "llama": ("llama", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                            num_key_value_heads=2, intermediate_size=176, vocab_size=1000)),
    "llama_mha": ("llama", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                num_key_value_heads=4, intermediate_size=176, vocab_size=1000)),
    "mistral": ("mistral", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                num_key_value_heads=2, intermediate_size=176, vocab_size=1000,
                                sliding_window=None)),
    "qwen2": ("qwen2", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                            num_key_value_heads=2, intermediate_size=176, vocab_size=1000)),
    "gemma2": ("gemma2", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                              num_key_value_heads=2, head_dim=32, intermediate_size=176,
                              vocab_size=1000)),
    "mixtral": ("mixtral", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                num_key_value_heads=2, intermediate_size=176, vocab_size=1000,
                                num_local_experts=4, num_experts_per_tok=2)),
    **{name: (model_type, dict(kwargs)) for name, (model_type, kwargs) in (
        ("qwen3", ("qwen3", dict(_TINY, head_dim=16))),
        ("qwen3_moe", ("qwen3_moe", dict(_TINY, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                         moe_intermediate_size=48))),
        ("gemma3", ("gemma3_text", dict(_TINY, head_dim=32, sliding_window=16, layer_types=None,
                                        sliding_window_pattern=2))),
        ("phi3", ("phi3", dict(_TINY, pad_token_id=0))),
        ("olmo2", ("olmo2", dict(_TINY))),
        ("deepseek_v3", ("deepseek_v3", dict(_TINY, num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=24,
                                             qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                                             n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
                                             moe_intermediate_size=48, first_k_dense_replace=1, n_group=1,
                                             topk_group=1))),
        ("deepseek_v2", ("deepseek_v2", dict(_TINY, num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=24,
                                             qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                                             n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=2,
                                             moe_intermediate_size=48, first_k_dense_replace=1))),
        ("llama4", ("llama4_text", dict(_TINY, num_hidden_layers=4, head_dim=16, intermediate_size=48,
                                        intermediate_size_mlp=176, num_local_experts=4, num_experts_per_tok=1,
                                        interleave_moe_layer_step=2, no_rope_layer_interval=2,
                                        attention_chunk_size=16))),
        ("gpt_neox", ("gpt_neox", dict(_TINY, num_key_value_heads=None))),
        ("falcon", ("falcon", dict(_TINY, num_key_value_heads=None, ffn_hidden_size=176, multi_query=True))),
        ("falcon_new", ("falcon", dict(_TINY, num_key_value_heads=None, ffn_hidden_size=176,
                                       new_decoder_architecture=True, num_kv_heads=2))),
        ("cohere", ("cohere", dict(_TINY))),
        ("starcoder2", ("starcoder2", dict(_TINY, residual_dropout=0.0, embedding_dropout=0.0))),
    )},
}

_DTYPES = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16,
           "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16}



def _dtype(d) -> torch.dtype:
    return _DTYPES[d] if isinstance(d, str) else d

