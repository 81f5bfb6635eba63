"""The names transformers gives each linear module of a family (the attribute names of its
`modeling_<type>.py`), which PEFT's `target_modules`, bitsandbytes' skip lists and the memory
model's per-module terms match: a default per role and each family's differences. The counts
(params.py) never read them; only the family's names do."""

from __future__ import annotations

from vramplan.models.core.catalogue_schema import Architecture

_DEFAULT_NAMES = {
    "q": "q_proj", "k": "k_proj", "v": "v_proj", "qkv": "qkv_proj", "o": "o_proj",
    "q_a": "q_a_proj", "q_b": "q_b_proj", "kv_a": "kv_a_proj_with_mqa", "kv_b": "kv_b_proj",
    "gate": "gate_proj", "up": "up_proj", "gate_up": "gate_up_proj", "down": "down_proj",
    "router": "gate", "expert_gate": "experts.gate_proj", "expert_up": "experts.up_proj",
    "expert_gate_up": "experts.gate_up_proj", "expert_down": "experts.down_proj", "shared": "shared_experts",
    "shared_gate": "shared_expert_gate", "attn_gate": "self_attn.gate_proj",
    # Gated DeltaNet (modeling_qwen3_next.py Qwen3NextGatedDeltaNet, modeling_qwen3_5.py Qwen3_5GatedDeltaNet)
    "linear_qkvz": "in_proj_qkvz", "linear_ba": "in_proj_ba", "linear_qkv": "in_proj_qkv", "linear_z": "in_proj_z",
    "linear_b": "in_proj_b", "linear_a": "in_proj_a", "linear_out": "linear_attn.out_proj",
}
NOT_GATED = ("gelu", "gelu_new", "gelu_function", "relu", "relu2", "xielu")  # up -> act -> down (the others: act(gate) * up)
_MODULE_NAMES = {  # family -> the names that differ from the default (modeling_<type>.py)
    "gpt2": {"qkv": "c_attn", "o": "attn.c_proj", "up": "c_fc", "down": "mlp.c_proj"},
    "gpt_bigcode": {"qkv": "c_attn", "o": "attn.c_proj", "up": "c_fc", "down": "mlp.c_proj"},  # GPT-2's names
    "gptj": {"o": "out_proj", "up": "fc_in", "down": "fc_out"},  # modeling_gptj.py GPTJAttention.out_proj, GPTJMLP
    "gpt_neox": {"qkv": "query_key_value", "o": "dense", "up": "dense_h_to_4h", "down": "dense_4h_to_h"},
    "bloom": {"qkv": "query_key_value", "o": "dense", "up": "dense_h_to_4h", "down": "dense_4h_to_h"},
    "falcon": {"qkv": "query_key_value", "o": "dense", "up": "dense_h_to_4h", "down": "dense_4h_to_h"},
    "starcoder2": {"up": "c_fc", "down": "c_proj"},
    "mixtral": {"expert_gate": "w1", "expert_up": "w3", "expert_down": "w2"},
    "llama4": {"router": "router", "shared": "shared_expert"},
    "llama4_text": {"router": "router", "shared": "shared_expert"},
    "gpt_oss": {"router": "router"},  # modeling_gpt_oss.py GptOssMLP: router, experts.gate_up_proj / down_proj
    "qwen2_moe": {"shared": "shared_expert"},  # modeling_qwen2_moe.py Qwen2MoeSparseMoeBlock.shared_expert
    "phi": {"o": "dense", "up": "fc1", "down": "fc2"},  # modeling_phi.py PhiAttention.dense, PhiMLP.fc1 / fc2
    "hunyuan_v1_moe": {"router": "gate.wg", "shared": "shared_mlp"},  # HunYuanMoEV1Moe.gate.wg, .shared_mlp
    # modeling_granitemoe*.py: GraniteMoeTopKRouter `router` (a bare weight), GraniteMoeSharedMLP `shared_mlp`
    # with its fused input_linear (gate, up) and output_linear
    "granitemoe": {"router": "router"},
    "granitemoeshared": {"router": "router", "shared": "shared_mlp", "gate_up": "input_linear", "down": "output_linear"},
    "nanochat": {"up": "fc1", "down": "fc2"},  # modeling_nanochat.py NanoChatMLP (CLIP's MLP: fc1, activation_fn, fc2)
    "laguna": {"attn_gate": "self_attn.g_proj"},  # modular_laguna.py LagunaAttention.g_proj
}


def module_name(arch: Architecture, role: str) -> str:
    return _MODULE_NAMES.get(arch.model_type, {}).get(role, _DEFAULT_NAMES[role])
