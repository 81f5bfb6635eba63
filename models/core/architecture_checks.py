"""Which combinations of an architecture's parts are refused (models/core/architecture_schema.py
Architecture's validator calls check_architecture): each names the field, its value and what it
needs, as one line (VramplanError)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vramplan.models.core.errors import VramplanError

if TYPE_CHECKING:
    from vramplan.models.core.architecture_schema import Architecture


def _all_or_none(*counts: int) -> bool:
    """Whether the counts that together describe one part (linear attention's widths, the indexer's) are all set
    (> 0) or all unset (0)."""
    return all(counts) or not any(counts)


def check_architecture(arch: Architecture) -> None:
    """Refuse, naming the field and its value, the combinations of parts no implementation builds or vramplan
    does not model (Architecture's validator)."""
    if arch.num_attention_heads % arch.num_kv_heads:
        raise VramplanError(
            "num_kv_heads", arch.num_kv_heads, f"must divide num_attention_heads={arch.num_attention_heads}"
        )
    if arch.global_layers:
        _check_global_layers(arch)
    _check_local_shape(arch)
    if arch.value_from_key and (arch.is_mla or arch.fused_qkv or arch.v_head_dim):
        raise VramplanError("value_from_key", True, "needs separate q/k projections and values as wide as keys "
                            "(not MLA, fused_qkv or a v_head_dim of its own)")
    _check_kv_sharing(arch)
    if (arch.per_layer_input_width == 0) != (arch.per_layer_input_vocab == 0):
        raise VramplanError("per_layer_input_vocab", arch.per_layer_input_vocab, "per-layer input embeddings need "
                            "both per_layer_input_width and per_layer_input_vocab > 0, or neither")
    if arch.output_vocab_size and (arch.output_vocab_size > arch.vocab_size or arch.tie_word_embeddings):
        raise VramplanError("output_vocab_size", arch.output_vocab_size, f"a pruned output head needs at most "
                            f"vocab_size={arch.vocab_size} rows and an lm_head of its own (tie_word_embeddings false)")
    if arch.alibi and arch.learned_position_embeddings:
        raise VramplanError("alibi", True, "replaces learned positions: learned_position_embeddings must be false")
    if arch.qkv_head_copies and not arch.fused_qkv:
        raise VramplanError("qkv_head_copies", True, "needs fused_qkv")
    if arch.moe_beside_mlp and not arch.is_moe:
        raise VramplanError("moe_beside_mlp", True, "needs routed experts (num_experts > 1)")
    if arch.sink_scaling and not arch.attention_sinks:
        raise VramplanError("sink_scaling", True, "needs attention_sinks")
    if arch.attention_gate_per_head and not arch.attention_output_gate:
        raise VramplanError("attention_gate_per_head", True, "needs attention_output_gate")
    if arch.global_first_layer and not arch.global_attention_every:
        raise VramplanError("global_first_layer", True, "needs global_attention_every > 0 (the rule it adds layer 0 to)")
    if arch.experts_per_token > arch.num_experts:
        raise VramplanError(
            "experts_per_token", arch.experts_per_token, f"must not exceed num_experts={arch.num_experts}"
        )
    if (arch.local_attention == "none") != (arch.attention_window == 0):
        raise VramplanError(
            "attention_window", arch.attention_window, f"must be > 0 exactly when local_attention is set (is {arch.local_attention})"
        )
    if arch.kv_lora_rank and not 0 < arch.qk_rope_head_dim < arch.head_dim:
        raise VramplanError("qk_rope_head_dim", arch.qk_rope_head_dim, f"must be in (0, head_dim={arch.head_dim}) for MLA")
    if arch.q_lora_rank and not arch.kv_lora_rank:
        raise VramplanError("q_lora_rank", arch.q_lora_rank, "needs kv_lora_rank > 0 (MLA)")
    if not _all_or_none(arch.full_attention_every, arch.linear_key_heads, arch.linear_value_heads,
                        arch.linear_key_head_dim, arch.linear_value_head_dim, arch.linear_conv_kernel):
        raise VramplanError("full_attention_every", arch.full_attention_every,
                            "linear attention needs full_attention_every > 0 and every linear_* width (key and value "
                            "heads, head widths, conv kernel) > 0, or none of them")
    if arch.full_attention_every and arch.linear_value_heads % arch.linear_key_heads:
        raise VramplanError("linear_value_heads", arch.linear_value_heads,
                            f"must be a multiple of linear_key_heads={arch.linear_key_heads}")
    if arch.full_attention_every and arch.local_attention != "none":
        raise VramplanError("local_attention", arch.local_attention, "is not modelled beside linear attention")
    if not _all_or_none(arch.index_heads, arch.index_head_dim, arch.index_topk):
        raise VramplanError("index_heads", arch.index_heads, "DeepSeek Sparse Attention needs index_heads, "
                            "index_head_dim and index_topk > 0, or none of them")
    if arch.index_heads and not (arch.q_lora_rank and arch.qk_rope_head_dim < arch.index_head_dim):
        raise VramplanError("index_heads", arch.index_heads, "DeepSeek Sparse Attention's indexer reads MLA's query "
                            "latent: it needs q_lora_rank > 0 and index_head_dim wider than qk_rope_head_dim")
    if arch.attention_gate_in_q and not arch.attention_output_gate:
        raise VramplanError("attention_gate_in_q", True, "needs attention_output_gate")
    if arch.is_moe and not any(arch.layer_is_moe(i) for i in range(arch.num_layers)):
        # a decoder_sparse_step / first_k_dense_replace / mlp_only_layers that leaves every layer
        # dense: no expert is ever built (its expert kernels had no shape: StopIteration)
        raise VramplanError("num_experts", arch.num_experts, f"no decoder layer is a MoE layer (first_dense_layers="
                            f"{arch.first_dense_layers}, moe_layer_interval={arch.moe_layer_interval}, "
                            f"num_layers={arch.num_layers}): a dense model has num_experts 1")


def _check_local_shape(arch: Architecture) -> None:
    """The local layers' own attention shape (models/architecture/params.py layer_architecture) needs local layers,
    and their heads must group evenly over their KV heads."""
    own = {"local_kv_heads": arch.local_kv_heads, "local_attention_heads": arch.local_attention_heads,
           "local_head_dim": arch.local_head_dim,
           "local_partial_rotary_factor": arch.local_partial_rotary_factor,
           "local_attention_sinks": arch.local_attention_sinks}
    named = next((name for name, value in own.items() if value), None)
    if named is not None and arch.local_attention == "none":
        raise VramplanError(named, own[named], "needs local (sliding-window) layers: local_attention is none")
    heads, kv_heads = arch.local_attention_heads or arch.num_attention_heads, arch.local_kv_heads or arch.num_kv_heads
    if heads % kv_heads:
        raise VramplanError("local_kv_heads" if arch.local_kv_heads else "local_attention_heads", own["local_kv_heads"]
                            or heads, f"the local layers' {heads} heads must be a multiple of their {kv_heads} KV heads")


def _check_kv_sharing(arch: Architecture) -> None:
    """Every KV-shared layer reads the keys and values of an earlier layer of its kind (Gemma4TextConfig.
    kv_sharing_modes raises where a kind of the shared layers has no earlier layer producing them)."""
    shared = arch.kv_shared_layers
    if not shared:
        return
    if shared >= arch.num_layers:
        raise VramplanError("kv_shared_layers", shared, f"must leave a layer producing keys and values: below "
                                                        f"num_layers={arch.num_layers}")
    first = arch.num_layers - shared
    producing = {arch.layer_is_local(i) for i in range(first)}
    if any(arch.layer_is_local(i) not in producing for i in range(first, arch.num_layers)):
        raise VramplanError("kv_shared_layers", shared, "leaves an attention kind of the shared layers without an "
                                                        "earlier layer producing its keys and values")
    if arch.is_mla or arch.fused_qkv or arch.has_linear_attention:
        raise VramplanError("kv_shared_layers", shared, "needs separate q/k/v projections of softmax attention")


def _check_global_layers(arch: Architecture) -> None:
    tokens = arch.global_layers.split()
    if not tokens or not all(token.isdigit() for token in tokens):
        raise VramplanError("global_layers", arch.global_layers[:40], "must be layer indices separated by spaces")
    indices = [int(token) for token in tokens]
    if indices != sorted(set(indices)) or indices[-1] >= arch.num_layers:
        raise VramplanError("global_layers", arch.global_layers[:40], "must list distinct layer indices in "
                            f"increasing order, each below num_layers={arch.num_layers}")
    if arch.local_attention == "none" or arch.global_attention_every:
        raise VramplanError("global_layers", arch.global_layers[:40], "needs local attention and replaces "
                            "global_attention_every (which must be 0)")
