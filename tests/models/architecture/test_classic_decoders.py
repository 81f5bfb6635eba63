"""BLOOM, MPT and GPT-Neo (transformers 5.24 configuration_* / modeling_*): counts equal transformers' on the meta
device, ALiBi reads as no RoPE and no learned positions, MPT's settings are read from its nested attn_config, GPT-Neo's
mask buffers are counted, and what only eager attention or no stack runs is refused. The saved tensors, the whole
model's and the peak's, are measured in tests/models/memory/test_saved_tensors_families.py ("bloom", "mpt",
"gpt_neo")."""

from __future__ import annotations

import pytest
from helpers.cli import invoke, one_line_error

from vramplan.models.architecture.params import count_params, layer_groups
from vramplan.models.catalogue.hf_config import architecture_from_config
from vramplan.models.core.errors import VramplanError
from vramplan.models.memory.activation_terms import shared_terms
from vramplan.models.memory.saved_tensors import Shape


def _read(config: dict, model_type: str = "bloom"):
    return architecture_from_config({"model_type": model_type, **config}, name=model_type, source="config.json")


@pytest.mark.parametrize(("model_type", "config", "total"), [
    # BloomForCausalLM: word_embeddings and their LayerNorm, per layer two LayerNorms, query_key_value, dense,
    # dense_h_to_4h and dense_4h_to_h with biases, ln_f; the head tied.
    ("bloom", {"n_layer": 24, "hidden_size": 1024, "n_head": 16}, 559_214_592),  # bloom-560m
    ("bloom", {"n_layer": 30, "hidden_size": 4096, "n_head": 32}, 7_069_016_064),  # bloom-7b1
    ("bloom", {"n_layer": 70, "hidden_size": 14336, "n_head": 112}, 176_247_271_424),  # BLOOM (176B)
    ("bloom", {"n_layer": 24, "n_embed": 1024, "n_head": 16}, 559_214_592),  # n_embed, hidden_size's old name
    # MptForCausalLM: wte, per layer norm_1 / norm_2 (weights, their bias removed), Wqkv, out_proj, up_proj and
    # down_proj without biases, norm_f; the head tied.
    ("mpt", {}, 1_311_213_568),  # MptConfig()
    ("mpt", {"d_model": 4096, "n_heads": 32, "n_layers": 32}, 6_649_024_512),  # MPT-7B
    ("mpt", {"d_model": 7168, "n_heads": 64, "n_layers": 48, "vocab_size": 50432}, 29_957_200_896),  # MPT-30B
    # what transformers' MptModel ignores changes nothing: the MLP is 4 x hidden, every projection unbiased
    ("mpt", {"d_model": 4096, "n_heads": 32, "n_layers": 32, "expansion_ratio": 8, "no_bias": False,
             "learned_pos_emb": True}, 6_649_024_512),
    # GPTNeoForCausalLM: wte and wpe, per layer two LayerNorms, q/k/v without bias, a biased out_proj, c_fc and
    # c_proj with biases, ln_f; the head tied.
    ("gpt_neo", {}, 1_315_575_808),  # GPTNeoConfig(): GPT-Neo 1.3B
    ("gpt_neo", {"num_layers": 12, "hidden_size": 768, "num_heads": 12,
                 "attention_types": [[["global", "local"], 6]]}, 125_198_592),  # GPT-Neo 125M
    ("gpt_neo", {"num_layers": 32, "hidden_size": 2560, "num_heads": 20,
                 "attention_types": [[["global", "local"], 16]]}, 2_651_307_520),  # GPT-Neo 2.7B
])
def test_counts_equal_transformers(model_type: str, config: dict, total: int) -> None:
    assert count_params(_read(config, model_type)).total == total


def test_alibi_attention_has_no_rope_and_per_head_copies() -> None:
    arch = _read({"n_layer": 24, "hidden_size": 1024, "n_head": 16})
    assert arch.alibi and arch.qkv_head_copies and arch.embedding_norm and arch.mlp_kind == "gelu_function"
    assert shared_terms(arch, Shape(b=1, s=2048, e=2)) == []
    assert {m.name for m in layer_groups(arch)[0].modules} == {"query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"}


def test_what_does_not_run_is_refused_in_one_line(tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "bloom", "n_layer": 24, "hidden_size": 1024, "n_head": 16}')
    base = ["estimate", "--model", str(path), "--seq-len", "2048", "--gpu", "h100-sxm-80gb"]
    assert "eager only" in one_line_error(invoke(*base))  # --attention flash, the default
    assert invoke(*base, "--attention", "eager").exit_code in (0, 3)
    assert "ALiBi" in one_line_error(invoke(*base, "--attention", "eager", "--stack", "megatron"))
    with pytest.raises(VramplanError, match="apply_residual_connection_post_layernorm"):
        _read({"apply_residual_connection_post_layernorm": True})


def test_mpt_is_alibi_with_its_mask_kept_and_unbiased_norms() -> None:
    arch = _read({}, "mpt")
    assert arch.alibi and arch.mask_kept and arch.norm_kind == "layernorm_weight"


def test_mpt_reads_its_nested_attention_settings() -> None:
    """attn_config.attn_pdrop drops the probabilities, after attention and after the MLP (MptBlock, MptMLP);
    attn_config.clip_qkv clamps Wqkv's output; a bad nested value is named by its path."""
    def read(attn_config):
        return _read({"attn_config": attn_config}, "mpt")

    arch = read({"attn_pdrop": 0.1, "clip_qkv": 6.0})
    assert (arch.dropout_prob, arch.attention_dropout, arch.clip_qkv) == (0.1, 0.1, True)
    with pytest.raises(VramplanError, match="attn_config.attn_pdrop"):
        read({"attn_pdrop": "high"})


def test_gpt_neo_scores_in_fp32_with_learned_positions_and_masked_local_layers_kept_full() -> None:
    arch = _read({}, "gpt_neo")
    # its local layers mask a full score matrix to window_size: computed and kept as full attention
    assert arch.eager_scores_fp32 and arch.learned_position_embeddings and arch.local_attention == "none"


def test_gpt_neo_mask_buffers_are_held_beside_the_weights() -> None:
    """Each layer's GPTNeoSelfAttention.bias: max_position_embeddings^2 booleans, 4 MiB a layer at 2,048, in the
    overhead pillar whatever the sequence, the micro-batch or the ZeRO stage."""
    from vramplan.models.core.setup import Job, Plan
    from vramplan.models.memory.overhead import overhead

    arch = _read({"num_layers": 32, "hidden_size": 2560, "num_heads": 20,
                  "attention_types": [[["global", "local"], 16]]}, "gpt_neo")
    for plan in (Plan(gpu="x"), Plan(gpu="x", num_gpus=8, zero=3, micro_batch=4)):
        assert overhead(arch, Job(seq_len=512), plan).model_buffers_bytes == 32 * 2048 ** 2
