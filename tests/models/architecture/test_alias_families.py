"""Config classes whose models are another family's classes (models/catalogue/hf_alias_families.py): each count equals
transformers 5.24's on the meta device (AutoModelForCausalLM.from_config builds the other family's *ForCausalLM), from
the hub file's own key names and from the config as transformers saves it; the architecture records the modeling
family, whose saved tensors the probes of tests/models/memory/test_saved_tensors_families.py measure."""

from __future__ import annotations

import pytest

from vramplan.models.architecture.params import count_params
from vramplan.models.catalogue.hf_config import architecture_from_config
from vramplan.models.core.errors import VramplanError

# EXAONE 3.5 7.8B as the hub ships it (ExaoneConfig.attribute_map: num_layers, activation_function)
EXAONE_7_8B = {"model_type": "exaone", "num_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,
               "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 102400, "head_dim": 128,
               "max_position_embeddings": 32768, "activation_function": "silu", "tie_word_embeddings": False}


def _read(config: dict):
    return architecture_from_config(config, name="x", source="config.json")


@pytest.mark.parametrize(("config", "total", "modeling"), [
    (EXAONE_7_8B, 7_818_448_896, "llama"),  # EXAONE-3.5-7.8B: 7.8B
    ({**EXAONE_7_8B, "num_layers": 30, "hidden_size": 2560, "intermediate_size": 7168, "tie_word_embeddings": True,
      "head_dim": None}, 2_405_327_360, "llama"),  # EXAONE-3.5-2.4B
    ({"model_type": "internlm3"}, 8_804_241_408, "llama"),  # InternLM3Config(): InternLM3-8B
    ({"model_type": "internlm3", "qkv_bias": True, "bias": True}, 8_805_838_848, "llama"),
    ({"model_type": "iquestcoder"}, 39_794_283_520, "llama"),  # IQuestCoderConfig(): IQuest-Coder-V1-40B
    ({"model_type": "sarvam_mla"}, 106_031_763_456, "deepseek_v3"),  # SarvamMLAConfig()
    ({"model_type": "sarvam_mla", "q_lora_rank": 768}, 104_823_828_480, "deepseek_v3"),
    ({"model_type": "sarvam_moe"}, 32_152_648_064, "glm4_moe"),  # SarvamMoEConfig()
    ({"model_type": "sarvam_moe", "use_qkv_bias": True}, 32_152_735_616, "glm4_moe"),
    ({"model_type": "gpt-sw3", "n_layer": 24, "n_embd": 2048, "n_head": 16, "vocab_size": 64000}, 1_341_771_776, "gpt2"),
])
def test_counts_equal_transformers_and_the_modeling_family_is_recorded(config: dict, total: int, modeling: str) -> None:
    arch = _read(config)
    assert (count_params(arch).total, arch.model_type) == (total, modeling)


def test_sarvam_moe_rotates_the_whole_head_by_concatenation() -> None:
    """SarvamMoEConfig defaults partial_rotary_factor to 1.0; Glm4Moe's apply_rotary_pos_emb still concatenates the
    rotated part with an empty pass-through part, so q is a new head-major tensor (measured: its SDPA output copy)."""
    arch = _read({"model_type": "sarvam_moe"})
    assert arch.partial_rotary_factor == 1.0 and arch.rope_concatenated and arch.qk_norm == "head"


@pytest.mark.parametrize(("config", "key", "why"), [
    ({"model_type": "internlm3", "qkv_bias": True, "bias": False}, "qkv_bias", "differs from bias"),
    ({"model_type": "iquestcoder", "clip_qkv": 8.0}, "clip_qkv", "refused by IQuestCoderConfig"),
    ({"model_type": "iquestcoder", "use_sliding_window": True}, "use_sliding_window", "refused by IQuestCoderConfig"),
])
def test_what_the_config_class_raises_on_is_refused(config: dict, key: str, why: str) -> None:
    with pytest.raises(VramplanError) as caught:
        _read(config)
    message = str(caught.value)
    assert message.startswith(key) and why in message and "\n" not in message


def test_llama_classes_read_no_sliding_window() -> None:
    """LlamaAttention has no sliding window: a window in an EXAONE or InternLM3 file changes nothing."""
    assert _read({**EXAONE_7_8B, "sliding_window": 4096}).local_attention == "none"
    assert _read({"model_type": "internlm3", "sliding_window": 4096, "use_sliding_window": True}).local_attention == "none"


@pytest.mark.parametrize(("config", "total"), [
    ({"model_type": "aria_text"}, 18_517_069_824),  # AriaTextConfig()
    # Aria's decoder (Rhymes AI: 28 layers 2,560 wide, 64 experts, top 6, two shared): 24.9B of its 25.3B
    ({"model_type": "aria_text", "hidden_size": 2560, "intermediate_size": 1664, "num_hidden_layers": 28,
      "num_attention_heads": 20, "num_key_value_heads": 20, "moe_num_experts": 64, "moe_topk": 6,
      "moe_num_shared_experts": 2, "vocab_size": 100352}, 24_869_091_840),
])
def test_aria_decoder_counts_equal_transformers(config: dict, total: int) -> None:
    """AriaTextForCausalLM: a MoE block in every layer, the router softmaxing its top-k logits (as gpt-oss's), fused
    experts beside moe_num_shared_experts shared experts of intermediate_size each."""
    arch = _read(config)
    assert count_params(arch).total == total
    assert arch.router_topk_softmax and arch.shared_expert_intermediate_size == 2 * arch.intermediate_size


def test_aria_routed_experts_are_silu_whatever_hidden_act_says() -> None:
    """AriaExperts gates with ACT2FN['silu'] while the shared experts follow hidden_act: another activation is refused."""
    with pytest.raises(VramplanError, match="hidden_act"):
        _read({"model_type": "aria_text", "hidden_act": "gelu_pytorch_tanh"})


@pytest.mark.parametrize(("config", "total", "logits"), [
    ({"model_type": "apertus1p5_text"}, 8_091_086_912, 266_752),  # Apertus1p5TextConfig(): the extended vocabulary
    # the head pruned to the text-only prefix: 131,072 rows, untied (Apertus1p5TextForCausalLM.lm_head)
    ({"model_type": "apertus1p5_text", "output_vocab_size": 131072, "tie_word_embeddings": False}, 7_535_341_632, 131_072),
    ({"model_type": "apertus1p5_text", "output_vocab_size": 266752}, 8_091_086_912, 266_752),  # the unpruned head
])
def test_apertus_1_5_output_head_is_pruned(config: dict, total: int, logits: int) -> None:
    """The embedding keeps vocab_size rows, the output head (and the logits and the loss: the probe's whole model is
    within 8 bytes of the terms, as Apertus's) output_vocab_size."""
    arch = _read(config)
    assert (count_params(arch).total, arch.logits_width, arch.model_type) == (total, logits, "apertus")


def test_a_tied_or_wider_pruned_head_is_refused() -> None:
    for change in ({"output_vocab_size": 131072, "tie_word_embeddings": True}, {"output_vocab_size": 300000}):
        with pytest.raises(VramplanError, match="output_vocab_size"):
            _read({"model_type": "apertus1p5_text", **change})
