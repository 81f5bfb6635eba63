"""Gemma 4's layer kinds from its config.json (transformers 5.24 configuration_gemma4.py Gemma4TextConfig and
configuration_gemma4_unified.py Gemma4UnifiedTextConfig, whose __post_init__ both run this way):

- layer_types defaults to five sliding layers to one full layer, and the last layer is always full attention
  (__post_init__ forces it, whatever the list says);
- the full layers are `global_head_dim` wide (512 unless given) and, where `attention_k_eq_v`, have
  `num_global_key_value_heads` KV heads and no v_proj: their values are their keys' projection
  (Gemma4TextAttention.use_alternative_attention); the sliding layers keep `head_dim` and
  `num_key_value_heads`. A config.json transformers saved holds these as `per_layer_config`, the overrides of
  each full layer, instead of the two keys (and __post_init__ then reads only it);
- E2B / E4B: per-layer input embeddings (`hidden_size_per_layer_input`, on by default: 256) and the last
  `num_kv_shared_layers` layers reading the keys and values of the last earlier layer of their kind, their MLP twice
  as wide under `use_double_wide_mlp`.

vramplan reads the full layers as the architecture's shape and the sliding layers' as its local_* shape
(models/architecture/params.py layer_architecture); with enable_moe_block (26B-A4B) every layer's routed experts
beside its MLP (moe_beside_mlp). Refused, each in one line: bidirectional attention over every token
(`use_bidirectional_attention` "all") and per_layer_config overrides vramplan does not model per layer."""

from __future__ import annotations

from typing import Any

from vramplan.models.catalogue.config_file import show_kind as _show
from vramplan.models.catalogue.hf_reader import Reader
from vramplan.models.core.architecture_schema import local_layer, local_rule
from vramplan.models.core.catalogue_schema import MAX_LAYERS
from vramplan.models.core.errors import VramplanError

_OVERRIDES = ("head_dim", "num_key_value_heads")  # what per_layer_config may set on a full layer


def gemma4_layer_types(c: Reader, layers: int) -> Any:
    """The layer_types list as Gemma4TextConfig.__post_init__ leaves it: its default pattern (the last of every
    `global_every` layers full) where config.json has none, the last layer full attention either way. Anything but
    a list of `layers` entries is returned as it is (attention_window reads it as any family's)."""
    types = c.config.get("layer_types")
    if layers > MAX_LAYERS:  # the Architecture refuses it, naming the key; no list that long is built
        return types
    if types is None:
        every = c.count("global_every")
        types = ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(layers)]
    if isinstance(types, list) and len(types) == layers and layers:
        types = [*types[:-1], "full_attention"]
    return types


def global_shape(c: Reader, fields: dict[str, Any]) -> dict[str, Any]:
    """The full layers' head width, KV heads and values (the architecture's), and the sliding layers' where they
    differ (local_head_dim, local_kv_heads), after the local/global pattern is in `fields`."""
    if c.raw("bidirectional_attention") == "all":
        raise c.unsupported("bidirectional_attention", "makes every token attend both ways (and halves the window), "
                            "which is not modelled")
    shares_values = c.flag("value_from_key")
    sliding_dim, sliding_kv = fields["head_dim"], fields["num_kv_heads"]
    overrides = c.config.get("per_layer_config")
    if overrides is None:
        dim = c.count("global_head_dim")
        kv = c.count("global_kv_heads", optional=True) if shares_values else None
    else:
        dim, kv = _full_layer_overrides(c, overrides, fields)
    kv = kv or sliding_kv
    if fields["num_attention_heads"] % kv:
        key = "per_layer_config" if overrides is not None else c.key("global_kv_heads")
        raise VramplanError(key, _show(kv), f"the full layers' KV heads must divide num_attention_heads="
                                     f"{fields['num_attention_heads']} (in {c.source})")
    shape: dict[str, Any] = {"head_dim": dim, "num_kv_heads": kv, "value_from_key": shares_values}
    if fields.get("local_attention", "none") != "none":
        shape.update(local_head_dim=sliding_dim if sliding_dim != dim else 0,
                     local_kv_heads=sliding_kv if sliding_kv != kv else 0)
    return shape | _experts(c, fields) | _per_layer_inputs(c, fields)


def _per_layer_inputs(c: Reader, fields: dict[str, Any]) -> dict[str, Any]:
    """E2B / E4B: per-layer input embeddings (hidden_size_per_layer_input wide, vocab_size_per_layer_input rows; on by
    default in Gemma4TextConfig) and the last num_kv_shared_layers layers reusing an earlier layer's keys and values,
    their MLP twice as wide under use_double_wide_mlp."""
    shared = c.count("kv_shared_layers", minimum=0, optional=True) or 0
    layers = fields["num_layers"]
    if shared and shared >= layers:
        raise c.unsupported("kv_shared_layers", f"leaves no layer producing keys and values: it must be below "
                                                f"num_hidden_layers ({layers})")
    if shared and layers <= MAX_LAYERS:
        rule = local_rule(fields)
        producing = {local_layer(i, *rule) for i in range(layers - shared)}
        if any(local_layer(i, *rule) not in producing for i in range(layers - shared, layers)):
            raise c.unsupported("kv_shared_layers", "leaves an attention kind of the shared layers without an earlier "
                                                    "layer producing its keys and values (Gemma4TextConfig raises)")
    parts: dict[str, Any] = {"kv_shared_layers": shared,
                             "double_wide_shared_mlp": shared > 0 and c.flag("double_wide_mlp")}
    if c.names("per_layer_input_width"):
        width = c.count("per_layer_input_width", minimum=0, optional=True) or 0
        parts.update(per_layer_input_width=width, per_layer_input_vocab=c.count("per_layer_input_vocab") if width else 0)
    return parts


def _experts(c: Reader, fields: dict[str, Any]) -> dict[str, Any]:
    """enable_moe_block (26B-A4B): every layer's routed experts (num_experts, top_k_experts, moe_intermediate_size
    wide) beside its MLP (intermediate_size wide, the dense width); the counts are read only then, as the config
    class does (Gemma4TextExperts is built only with it)."""
    if not c.names("experts_beside_mlp") or not c.flag("experts_beside_mlp"):
        return {}
    experts, top_k = c.count("expert_count", minimum=2), c.count("expert_top_k")
    if top_k > experts:
        raise c.unsupported("expert_top_k", f"routes a token to more experts than num_experts holds ({experts})")
    return {"num_experts": experts, "experts_per_token": top_k, "intermediate_size": c.count("expert_width"),
            "dense_intermediate_size": fields["intermediate_size"], "moe_beside_mlp": True}


def _full_layer_overrides(c: Reader, overrides: Any, fields: dict[str, Any]) -> tuple[int, int | None]:
    """(head width, KV heads or None) that per_layer_config sets on the full layers: one override, the same for
    every full layer and on no sliding one (PreTrainedConfig.to_dict leaves out what equals the layer's own value, so
    an empty one overrides nothing); anything else is refused."""
    layers = fields["num_layers"]
    if layers > MAX_LAYERS:  # the Architecture refuses it, naming the key
        return fields["head_dim"], None
    rule = local_rule(fields)
    full = {i for i in range(layers) if not local_layer(i, *rule)}
    why = ("must set head_dim (and num_key_value_heads) alike on exactly the full-attention layers, as Gemma4TextConfig "
           "writes it; vramplan models one shape for the full layers and one for the sliding ones")
    if not isinstance(overrides, dict):
        raise VramplanError("per_layer_config", _show(overrides), f"{why} (in {c.source})")
    if not overrides:  # transformers saves no override equal to the layer's own value: the full layers are the sliding ones'
        return fields["head_dim"], None
    indices = set()
    for key in overrides:
        index = int(key) if isinstance(key, str) and key.isdigit() and len(key) <= 7 else (
            key if isinstance(key, int) and not isinstance(key, bool) and key >= 0 else None)
        if index is None or index >= layers:
            raise VramplanError("per_layer_config", _show(overrides), f"{why}; a key is not a layer index (in {c.source})")
        indices.add(index)
    values = list(overrides.values())
    if indices != full or any(not isinstance(v, dict) or set(v) - set(_OVERRIDES) or v != values[0] for v in values):
        raise VramplanError("per_layer_config", _show(overrides), f"{why} (in {c.source})")
    dim, kv = values[0].get("head_dim"), values[0].get("num_key_value_heads")
    for name, value in (("head_dim", dim), ("num_key_value_heads", kv)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65_536):
            raise VramplanError(f"per_layer_config.{name}", _show(value), f"must be a whole number in 1-65,536 (in {c.source})")
    return dim or fields["head_dim"], kv
