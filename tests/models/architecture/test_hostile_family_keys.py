"""Every key of the session-13 families' config.json set to a hostile value (the sweep of 2026-12-07, which found a
2^63 layer count building Gemma 4's default layer list for minutes): reading the file, counting it and sizing its
activations either answers or raises one VramplanError of one line; nothing else escapes.

The bases are the families' real shapes (Gemma 4 31B as the hub ships it and as transformers saves it, 26B-A4B,
an E2B-shaped decoder, Aria's and Apertus 1.5's decoders, Sarvam MoE); their keys plus the keys the readers look
for, each set to each value below."""

from __future__ import annotations

import math

import pytest
from test_gemma4 import GEMMA4_26B_A4B, GEMMA4_31B, GEMMA4_E2B, SAVED_31B

from vramplan.models.architecture.params import count_params
from vramplan.models.catalogue.hf_config import architecture_from_config
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.activations import activations

BASES = {"gemma4_31b": GEMMA4_31B, "gemma4_saved": SAVED_31B, "gemma4_26b_a4b": GEMMA4_26B_A4B, "gemma4_e2b": GEMMA4_E2B,
         "aria_text": {"model_type": "aria_text", "num_hidden_layers": 4},
         "apertus1p5_text": {"model_type": "apertus1p5_text", "num_hidden_layers": 4, "output_vocab_size": 131072,
                             "tie_word_embeddings": False},
         "sarvam_moe": {"model_type": "sarvam_moe", "num_hidden_layers": 4}}
READ_KEYS = ("global_head_dim", "num_global_key_value_heads", "per_layer_config", "layer_types", "rope_parameters",
             "hidden_size_per_layer_input", "vocab_size_per_layer_input", "num_kv_shared_layers", "use_double_wide_mlp",
             "enable_moe_block", "num_experts", "top_k_experts", "moe_intermediate_size", "attention_k_eq_v",
             "use_bidirectional_attention", "moe_num_experts", "moe_topk", "moe_num_shared_experts", "output_vocab_size",
             "use_qkv_bias", "use_qk_norm", "partial_rotary_factor", "n_routed_experts", "first_k_dense_replace")
VALUES = [None, 0, -1, True, "x", [], [1], {}, {"5": {"head_dim": 3}}, 2**63, 1e12, math.nan]


@pytest.mark.parametrize("base", sorted(BASES))
def test_every_key_answers_or_is_refused_in_one_line(base: str) -> None:
    config = BASES[base]
    for key in sorted(set(config) - {"model_type"} | set(READ_KEYS)):
        for value in VALUES:
            try:
                arch = architecture_from_config({**config, key: value}, name="x", source="config.json")
                count_params(arch)
                activations(arch, Job(seq_len=512), Plan(gpu="x", recompute="full"))
            except VramplanError as error:
                assert "\n" not in str(error), (key, value)
