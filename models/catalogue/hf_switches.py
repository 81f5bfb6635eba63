"""The switches of one family's config.json that turn a part on or off, or that vramplan refuses: each read only where
the family's Family.parts names it (models/catalogue/hf_families.py), so one family's key never changes another's."""

from __future__ import annotations

from typing import Any

from vramplan.models.catalogue.config_file import show_kind as _show
from vramplan.models.catalogue.hf_reader import Reader
from vramplan.models.core.errors import VramplanError


def apply_switches(c: Reader, fields: dict[str, Any], parts: dict[str, Any], hidden: int) -> None:
    """Read the family's switch parts (popped from `parts`) into `fields` / `parts`, or raise one line naming the key:
    Laguna's per-head gate, keys transformers raises on or vramplan does not model (refused_if_set / _unset),
    GPTBigCode's multi_query, OPT-350m's projected embedding, Command A+'s RMSNorm switch, HyperCLOVA X's post-norms,
    StableLM's parallel layer and its MLP-only dropout."""
    gating = parts.pop("gating_key", None)  # Laguna: gating True / "per-head" gates each head, else each channel
    if gating is not None:
        if not (c.config.get(gating, True) is True or c.config.get(gating) == "per-head"):
            raise VramplanError(gating, _show(c.config[gating]), "gates each channel with a softplus (Laguna's gate "
                                "other than per-head), which is not modelled; true or \"per-head\" is (in "
                                f"{c.source})")
        fields["attention_gate_per_head"] = True
    for key, why in parts.pop("refused_if_set", {}).items():  # a switch transformers raises on, or vramplan does not model
        if c.config.get(key) not in (None, False, 0, 0.0):
            raise VramplanError(key, _show(c.config[key]), f"{why} (in {c.source})")
    for key, why in parts.pop("refused_if_unset", {}).items():  # a switch whose off state vramplan does not model
        if key in c.config and c.config[key] is not True:
            raise VramplanError(key, _show(c.config[key]), f"{why} (in {c.source})")
    if parts.pop("silu_experts", False) and fields["mlp_kind"] != "swiglu":  # AriaExperts: act_fn = ACT2FN["silu"]
        raise c.unsupported("hidden_act", "gates the shared experts with another activation than the routed ones' SiLU, "
                                          "which is not modelled")
    if parts.pop("pruned_head", False):  # Apertus 1.5: output_vocab_size equal to vocab_size is the unpruned head
        rows = c.count("output_vocab_size", optional=True)
        if rows and rows != fields["vocab_size"]:
            fields["output_vocab_size"] = rows
    if parts.pop("biases_agree", False) and c.flag("attention_bias") != c.flag("mlp_bias"):  # InternLM3Config raises
        raise c.unsupported("attention_bias", f"differs from {c.key('mlp_bias')}: the Llama implementation biases q/k/v "
                                              "and o_proj alike, so the config class refuses it")
    if parts.pop("kv_heads_from_flag", False) and c.flag("single_kv_head"):  # GPTBigCode's multi_query: one KV head
        fields["num_kv_heads"] = 1
    projection = parts.pop("embedding_projection_key", None)  # OPT-350m's word_embed_proj_dim: project_in / project_out
    if projection and c.config.get(projection) not in (None, hidden):
        raise VramplanError(projection, _show(c.config[projection]), f"differs from hidden_size ({hidden}): the "
                            f"embedding's project_in / project_out linears are not modelled (in {c.source})")
    if parts.pop("rmsnorm_when_eps", False) and c.config.get("rms_norm_eps") is not None:  # Command A+'s RMSNorm switch
        parts["norm_kind"] = "rmsnorm"
    if parts.pop("sandwich_when_flagged", False) and c.flag("sandwich_norms"):  # HyperCLOVA X's use_post_norm
        parts.update(norm_position="sandwich", norms_per_layer=4)
    one_norm = parts.pop("parallel_one_norm", False)  # StableLM: the parallel layer has no post_attention_layernorm
    if c.has("use_parallel_residual"):
        parts["parallel_attention_mlp"] = c.flag("use_parallel_residual")
        if one_norm and parts["parallel_attention_mlp"]:
            parts["norms_per_layer"] = 1
    if parts.pop("residual_dropout_mlp_only", False) and fields["dropout_prob"] > 0:
        raise c.unsupported("residual_dropout", "drops out the MLP's output only (StableLM); vramplan's residual "
                                                "dropout follows attention too, so a nonzero one is not modelled")
