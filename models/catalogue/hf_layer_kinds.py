"""Which layers of a Hugging Face config are local (sliding-window / chunked) and which global, and what the local
layers' attention has of its own: the local/global pattern of layer_types (or a family's period), the RoPE share of
each layer type's rope_parameters, a head count per layer kind (models/catalogue/hf_config.py reads the rest)."""

from __future__ import annotations

from typing import Any, TypeGuard

from vramplan.models.catalogue.config_file import show_kind as _show
from vramplan.models.catalogue.hf_gemma4 import gemma4_layer_types
from vramplan.models.catalogue.hf_reader import Reader
from vramplan.models.core.architecture_schema import local_layer, local_rule
from vramplan.models.core.errors import VramplanError


def global_period(types: list[Any]) -> tuple[int, bool, bool] | None:
    """Period N of the global layers in a local/global layer list, whether the first of each N is global instead of
    the last, and whether layer 0 is global beside the last of each N: layer i global iff (i+1) % N == 0, iff
    i % N == 0 (CWM: CwmConfig's window_pattern), or iff i == 0 or (i+1) % N == 0 (MiMo-V2-Flash's layer_types); None
    when no such rule gives the list."""
    is_global = [t == "full_attention" for t in types]
    if not any(is_global):
        return 0, False, False
    rest = [i for i, g in enumerate(is_global) if g and i > 0]
    candidates = [(is_global.index(True) + 1, False, False)]  # the last of each N
    if is_global[0] and not all(is_global):
        candidates += [(rest[0] if rest else len(types), True, False), ((rest[0] if rest else len(types)) + 1, False, True)]
    for every, first, first_layer in candidates:
        rule = [(i if first else i + 1) % every == 0 or (first_layer and i == 0) for i in range(len(types))]
        if rule == is_global:
            return every, first, first_layer
    return None


def global_every(c: Reader, types: list[Any]) -> int:
    """Period N of the global layers where layer i is global iff (i+1) % N == 0 (the last of each N)."""
    period = global_period(types)
    if period is None or period[1] or period[2]:
        raise c.unsupported("layer_types", "is not a periodic local/global pattern vramplan models")
    every, _, _ = period
    return every


def attention_window(c: Reader, layers: int) -> dict[str, Any]:
    if c.has("use_sliding_window") and c.flag("use_sliding_window"):
        raise c.unsupported("use_sliding_window", "Qwen sliding windows above max_window_layers are not modelled")
    if c.has("use_sliding_window") or not c.has("sliding_window") or c.raw("sliding_window") is None:
        return {}
    window = c.count("sliding_window")
    types = gemma4_layer_types(c, layers) if c.family.parts.get("last_layer_global") else c.config.get("layer_types")
    if types is not None and not (isinstance(types, list) and len(types) == layers):
        # transformers refuses it (layer_type_validation); it was skipped for the family's default pattern
        raise c.unsupported("layer_types", f"must list one attention type per layer ({layers} layers)")
    first = bool(c.family.parts.get("global_attention_first", False))  # the family's default pattern (CWM)
    first_layer = bool(c.family.parts.get("global_first_layer", False))  # (MiMo-V2-Flash)
    explicit = ""
    if isinstance(types, list) and len(types) == layers:
        period = global_period(types)
        if period is None:  # no periodic rule: the global layers listed (Flint-like patterns, dense prefixes)
            every, first, first_layer = 0, False, False
            explicit = " ".join(str(i) for i, t in enumerate(types) if t == "full_attention")
        else:
            every, first, first_layer = period
    elif isinstance(c.config.get("no_rope_layers"), list) and c.config["no_rope_layers"]:  # Llama 4: NoPE = global
        every = global_every(c, ["full_attention" if not r else "chunked" for r in c.config["no_rope_layers"]])
    elif c.has("global_every"):
        every = c.count("global_every")
    else:
        every = 0
    return {"local_attention": c.family.parts.get("local_attention", "sliding"), "attention_window": window,
            "global_attention_every": every, "global_attention_first": first and every > 0,
            "global_first_layer": first_layer and every > 0, "global_layers": explicit}


def rope_per_type(rope: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(rope, dict) and bool(rope) and all(isinstance(kind, dict) for kind in rope.values())


def type_share(c: Reader, rope: dict[str, Any], layer_type: str) -> Any:
    """A layer type's partial_rotary_factor; a type the file leaves out, or without the key, rotates the family's
    default share (MiMoV2FlashRotaryEmbedding's .get(..., 0.334), LagunaRotaryEmbedding's .get(..., 1.0))."""
    default = c.family.defaults.get("partial_rotary_factor", 1.0)
    if layer_type == "sliding_attention":
        default = c.family.parts.get("local_rotary_default", default)
    kind = rope.get(layer_type, {})
    if kind.get("rope_type") == "proportional":
        # transformers' proportional RoPE (modeling_rope_utils._compute_proportional_rope_parameters, Gemma 4's full
        # layers) returns head_dim-wide cos/sin whatever its share, the rest of the head at frequency 0: the whole
        # head is rotated, in memory and in time
        return 1.0
    return kind.get("partial_rotary_factor", default)


def _local_rotary_factor(c: Reader, fields: dict[str, Any]) -> float:
    """The sliding layers' RoPE share where their rope_parameters give one of their own (Laguna: 1 against the full
    layers' 0.5); 0 where it is the same or the model has no sliding layer."""
    rope = c.config.get("rope_parameters")
    if fields.get("local_attention", "none") == "none":
        return 0.0
    if rope is None and "local_rotary_default" in c.family.parts:  # the config class's own per-type default (Laguna)
        value = c.family.parts["local_rotary_default"]
    elif rope_per_type(rope) and "sliding_attention" in rope:
        value = type_share(c, rope, "sliding_attention")
    else:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise VramplanError("rope_parameters.sliding_attention.partial_rotary_factor", _show(value),
                            f"must be a number in (0, 1] (in {c.source})")
    return 0.0 if float(value) == fields["partial_rotary_factor"] else float(value)


def _local_heads(c: Reader, fields: dict[str, Any]) -> dict[str, int]:
    """num_attention_heads_per_layer (Laguna): one count for the full layers and one for the sliding ones, where the
    list splits so; a list of one count is that count."""
    counts = c.config.get("num_attention_heads_per_layer")
    if counts is None:
        return {}
    layers = fields["num_layers"]
    if not isinstance(counts, list) or len(counts) != layers or any(
            isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 65_536 for n in counts):
        raise VramplanError("num_attention_heads_per_layer", _show(counts),
                            f"must list a head count (1-65,536) for each of the {layers} layers (in {c.source})")
    rule = local_rule(fields)
    by_kind: dict[bool, set[int]] = {}
    for index, count in enumerate(counts):
        by_kind.setdefault(local_layer(index, *rule), set()).add(count)
    if any(len(kind) > 1 for kind in by_kind.values()):
        raise VramplanError("num_attention_heads_per_layer", _show(counts), "varies within a layer kind; vramplan models "
                            f"one head count for the full layers and one for the sliding ones (in {c.source})")
    full, local = by_kind.get(False, by_kind.get(True)), by_kind.get(True, by_kind.get(False))
    heads = next(iter(full))  # type: ignore[arg-type]
    local_heads = next(iter(local))  # type: ignore[arg-type]
    return {"num_attention_heads": heads, **({"local_attention_heads": local_heads} if local_heads != heads else {})}


def local_shape(c: Reader, fields: dict[str, Any], parts: dict[str, Any]) -> dict[str, Any]:
    """What the sliding layers' attention has of its own (Architecture.local_*: models/architecture/params.py
    layer_architecture reads it), from the family's parts (popped from `parts`) and the config: MiMo-V2-Flash's twice
    the KV heads and sinks, Laguna's head count and RoPE share per layer kind. Nothing where the model has no sliding
    layer."""
    kv_factor = parts.pop("local_kv_heads_factor", 0)
    sinks = parts.pop("local_attention_sinks", False)
    per_layer_heads = parts.pop("heads_per_layer", False)
    shape: dict[str, Any] = {"local_partial_rotary_factor": _local_rotary_factor(c, fields)}
    parts.pop("local_rotary_default", None)  # read by type_share
    if per_layer_heads:  # with no sliding layer, the one count every layer has
        shape.update(_local_heads(c, fields))
    if fields.get("local_attention", "none") != "none":
        shape.update({"local_kv_heads": kv_factor * fields["num_kv_heads"], "local_attention_sinks": sinks})
    return shape
