"""A Hugging Face config.json as an Architecture, through the same schema as catalogue rows.

One generic reader for every family: models/catalogue/hf_families.py says, per model_type, where each value
lives, what the transformers 5.24 config class defaults it to, and which parts the modeling code
fixes. Values are type-checked as they are read (a count is an int and never a bool), and every
problem is one VramplanError naming the config key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from vramplan.models.catalogue.config_file import read_config_json
from vramplan.models.catalogue.config_file import show_kind as _show
from vramplan.models.catalogue.hf_families import (
    FAMILIES,
    SUPPORTED_MODEL_TYPES,
    TEXT_CONFIG_TYPES,
    Family,
)
from vramplan.models.catalogue.hf_gemma4 import global_shape
from vramplan.models.catalogue.hf_layer_kinds import (
    attention_window,
    global_every,
    local_shape,
    rope_per_type,
    type_share,
)
from vramplan.models.catalogue.hf_quantization import checkpoint_quantization
from vramplan.models.catalogue.hf_reader import COMMON_KEYS, MISSING, Reader
from vramplan.models.catalogue.hf_switches import apply_switches
from vramplan.models.catalogue.hf_unmodelled import UNMODELLED_FAMILIES
from vramplan.models.catalogue.hf_vision import vision_params
from vramplan.models.core.catalogue_schema import MAX_LAYERS, Architecture
from vramplan.models.core.errors import VramplanError

__all__ = ["SUPPORTED_MODEL_TYPES", "architecture_from_config", "architecture_from_config_file"]

# Dropout roles (a family's keys name each role it has; Llama's layer has attention dropout only) and the
# Architecture field each is read into
_DROPOUT_ROLES = {"residual_dropout": "dropout_prob", "attention_dropout": "attention_dropout_prob",
                  "embedding_dropout": "embedding_dropout_prob"}
_SWIGLU_ACTS = ("silu", "swish")
_GELU_ACTS = ("gelu", "gelu_pytorch_tanh", "gelu_new", "gelu_fast")


def _mlp_kind(c: Reader, gated: bool) -> str:
    act = c.raw("hidden_act")
    if gated and act in _SWIGLU_ACTS:
        return "swiglu"
    if gated and act in _GELU_ACTS:
        return "geglu"
    if not gated and act in _GELU_ACTS:
        return "gelu_new" if act == "gelu_new" else "gelu"
    if not gated and act in ("relu", "relu2", "xielu"):  # OPT: fc1 -> relu -> fc2; Nemotron, Arcee: relu(x)^2; Apertus
        return act
    if not gated and act == "bloom_gelu":  # BloomGelu's GeLUFunction (the family's default: BloomConfig has no key)
        return "gelu_function"
    raise c.unsupported("hidden_act", "is not a modelled MLP activation (silu, gelu, gelu_pytorch_tanh, gelu_new; "
                                      "relu, relu2 and xielu in an MLP without a gate)")


def _dropouts(c: Reader) -> dict[str, float | None]:
    """Each dropout role the family's modeling code has, from its own key; a role it lacks is 0 (nothing kept)."""
    fields: dict[str, float | None] = {}
    for role, field_name in _DROPOUT_ROLES.items():
        value = c.raw(role) if c.names(role) or role in COMMON_KEYS else None
        value = 0.0 if value is None else value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise c.unsupported(role, "must be a number in [0, 1)")
        fields[field_name] = float(value)
    for field_name in ("attention_dropout_prob", "embedding_dropout_prob"):  # one canonical form: empty when equal
        if fields[field_name] == fields["dropout_prob"]:
            fields[field_name] = None
    return fields


def _moe(c: Reader, layers: int, intermediate: int) -> dict[str, Any]:
    # A MoE family's config class builds its experts from the count (nn.ModuleList over num_experts):
    # null there is no model, not a dense one (it read as dense: the hostile-input review of 2026-12-06)
    moe_family = (c.family.defaults.get("num_experts") or 1) > 1 or "num_experts" in c.family.required
    experts = None if not c.has("num_experts") and not moe_family else (
        c.count("num_experts") if moe_family else c.count("num_experts", optional=True))
    # a family whose config must name its experts builds its MoE block whatever the count: one expert
    # (HunYuan's class default, beside its shared MLP) is no dense MLP
    if experts == 1 and "num_experts" in c.family.required:
        raise c.unsupported("num_experts", "is 1: a single routed expert beside the shared MLP is not modelled")
    if not experts or experts == 1:
        if experts == 1 and c.has("experts_per_token") and (c.count("experts_per_token") or 1) > 1:
            raise c.unsupported("experts_per_token", "routes a token to more experts than num_experts holds (1)")
        return {"num_experts": 1, "experts_per_token": 1}
    expert_width = c.count("moe_intermediate_size") if c.has("moe_intermediate_size") else intermediate
    fields = {"num_experts": experts, "experts_per_token": c.count("experts_per_token"), "intermediate_size": expert_width}
    if c.has("moe_intermediate_size"):
        fields["dense_intermediate_size"] = c.count("dense_intermediate_size") if c.has("dense_intermediate_size") else intermediate
    elif c.names("dense_intermediate_size") and c.raw("dense_intermediate_size") is not None:  # Command A+'s prefix MLP
        fields["dense_intermediate_size"] = c.count("dense_intermediate_size")
    if c.has("shared_experts"):
        fields["shared_expert_intermediate_size"] = (c.count("shared_experts", minimum=0, optional=True) or 0) * expert_width
    elif c.names("shared_expert_width"):  # Qwen2-MoE names the width itself
        fields["shared_expert_intermediate_size"] = c.count("shared_expert_width", minimum=0)
    if c.has("first_dense_layers"):
        fields["first_dense_layers"] = c.count("first_dense_layers", minimum=0)
    kinds = c.config.get("mlp_layer_types")  # transformers 5: "dense" / "sparse" per layer (GLM-4.7-Flash)
    if isinstance(kinds, list) and kinds:
        leading = next((i for i, kind in enumerate(kinds) if kind != "dense"), len(kinds))
        if len(kinds) != layers or any(kind != "sparse" for kind in kinds[leading:]):
            raise c.unsupported("mlp_layer_types", f"only leading dense layers, then sparse ones, {layers} in all, "
                                                   "are modelled")
        fields["first_dense_layers"] = leading
    only_dense = c.config.get("mlp_only_layers") or []
    if not isinstance(only_dense, list):  # a number here raised a TypeError (hostile-input sweep, 2026-12-06)
        raise c.unsupported("mlp_only_layers", "must be a list of layer indices")
    if only_dense:
        if only_dense != list(range(len(only_dense))):
            raise c.unsupported("mlp_only_layers", "only leading dense layers are modelled")
        fields["first_dense_layers"] = len(only_dense)
    end = c.raw("last_moe_layer") if c.names("last_moe_layer") else None  # ERNIE 4.5; -1 is the last layer
    if end is not None and end not in (-1, layers - 1):
        raise c.unsupported("last_moe_layer", f"trailing dense layers are not modelled: MoE runs up to the last "
                                              f"layer ({layers - 1}) or -1")
    if c.has("moe_layer_freq") and c.count("moe_layer_freq") != 1:
        raise c.unsupported("moe_layer_freq", "only 1 (every layer past first_k_dense_replace) is modelled")
    if c.has("moe_layer_interval"):
        fields["moe_layer_interval"] = c.count("moe_layer_interval")
    return fields


def _linear_attention(c: Reader, layers: int) -> dict[str, Any]:
    """Gated DeltaNet layers (Qwen3-Next, Qwen3.5): which layers, from layer_types ("linear_attention" /
    "full_attention" per layer, a periodic pattern) or full_attention_interval (what the config classes
    build layer_types from: configuration_qwen3_next.py __post_init__), and their widths."""
    types = c.config.get("layer_types")
    if isinstance(types, list):
        if len(types) != layers or any(t not in ("linear_attention", "full_attention") for t in types):
            raise c.unsupported("layer_types", f"must name linear_attention or full_attention for each of the {layers} "
                                               "layers")
        every = global_every(c, types)
        if not every:
            raise c.unsupported("layer_types", "has no full_attention layer; only linear attention beside periodic "
                                               "full attention is modelled")
    else:
        every = c.count("full_attention_every")
    return {"full_attention_every": every, **{key: c.count(key) for key in (
        "linear_key_heads", "linear_value_heads", "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel")}}


def _sparse_indexer(c: Reader, layers: int, glm_schedule: bool) -> dict[str, Any]:
    """DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): the indexer's heads, head width and top-k, and for GLM-5
    which layers run their own indexer: "full" layers do, "shared" ones reuse the previous full layer's top-k
    (GlmMoeDsaAttention). GlmMoeDsaConfig.__post_init__ builds indexer_types from index_topk_pattern ("F" / "S" per
    layer) or index_topk_freq / index_skip_topk_offset (layer i full when max(i - offset + 1, 0) % freq == 0);
    vramplan reads that rule (indexer_every, indexer_offset), and a list only where the rule reproduces it."""
    fields: dict[str, Any] = {key: c.count(key) for key in ("index_heads", "index_head_dim", "index_topk")}
    if not glm_schedule:
        return fields
    config = c.config
    if config.get("indexer_types") is None and config.get("index_topk_pattern") is None:
        every, offset = config.get("index_topk_freq", 1), config.get("index_skip_topk_offset", 2)
        for name, value, least in (("index_topk_freq", every, 1), ("index_skip_topk_offset", offset, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_LAYERS:
                raise VramplanError(name, _show(value), f"must be a whole number in [{least}, {MAX_LAYERS}] in {c.source}")
        key = "index_topk_freq"
    else:
        key = "indexer_types" if config.get("indexer_types") is not None else "index_topk_pattern"
        types = config[key]
        if isinstance(types, str) and key == "index_topk_pattern":
            types = [{"F": "full", "S": "shared"}.get(p, p) for p in types]
        if not isinstance(types, list) or len(types) != layers or any(t not in ("full", "shared") for t in types):
            raise VramplanError(key, _show(config[key]), f"must name full or shared for each of the {layers} layers "
                                                         f"(in {c.source})")
        every, offset = _indexer_period(types)
        if any((t == "full") != (max(i - offset + 1, 0) % every == 0) for i, t in enumerate(types)):
            raise VramplanError(key, _show(config[key]), "is not a schedule vramplan models: full layers up to an offset, "
                                                         f"then every N-th (GLM-5's index_topk_freq) (in {c.source})")
    if every > 1 and offset == 0:  # GlmMoeDsaAttention: a shared first layer has no top-k to reuse (ValueError)
        raise VramplanError(key, _show(config.get(key)), "makes the first layer reuse a top-k no layer made; "
                                                         f"transformers refuses it (in {c.source})")
    return {**fields, "indexer_every": every, "indexer_offset": offset if every > 1 else 0}


def _indexer_period(types: list[str]) -> tuple[int, int]:
    """(every, offset) of an indexer schedule: the first shared layer is the offset, the next full layer after it
    closes the period; (1, 0) when every layer is full."""
    if "shared" not in types:
        return 1, 0
    offset = types.index("shared")
    after = next((i for i in range(offset, len(types)) if types[i] == "full"), len(types))
    return after - offset + 1, offset


def _rotary_factor(c: Reader, head_dim: int) -> float:
    """partial_rotary_factor / rotary_pct from config.json, else transformers 5's rope_parameters, else
    MiniMax-M2's legacy rotary_dim over head_dim (MiniMaxM2Config.convert_rope_params_to_dict), else the default."""
    rope = c.config.get("rope_parameters")
    key = c.key("partial_rotary_factor")
    if any(n in c.config for n in c.config_names("partial_rotary_factor")):
        value = c.raw("partial_rotary_factor")
    elif isinstance(rope, dict) and "partial_rotary_factor" in rope:
        value, key = rope["partial_rotary_factor"], "rope_parameters.partial_rotary_factor"
    elif rope_per_type(rope):
        # one rope_parameters per layer type (Gemma 3's RotaryEmbedding: MiMo-V2-Flash, Mellum, Laguna): the full
        # layers' share here, the sliding layers' in local_shape
        value, key = type_share(c, rope, "full_attention"), "rope_parameters.full_attention.partial_rotary_factor"
    elif c.names("rotary_dim") and c.raw("rotary_dim") is not None:
        rotary = c.count("rotary_dim")
        if rotary > head_dim:
            raise c.unsupported("rotary_dim", f"is wider than head_dim ({head_dim})")
        value, key = rotary / head_dim, "rotary_dim"
    else:
        value = c.family.defaults.get("partial_rotary_factor", 1.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        # the key the value came from, and its kind (a value nested in rope_parameters read as '<null>')
        raise VramplanError(key, _show(value), f"must be a number in (0, 1] (in {c.source})")
    return float(value)


def _falcon_shape(c: Reader, heads: int) -> dict[str, Any]:
    """FalconConfig: kv heads from new_decoder_architecture / multi_query; 1 or 2 norms (modeling_falcon.py)."""
    if c.flag("alibi"):
        raise c.unsupported("alibi", "ALiBi position biases are not modelled")
    new = c.flag("new_decoder_architecture")
    kv = (c.count("num_kv_heads", optional=True) or heads) if new else (1 if c.flag("multi_query") else heads)
    parallel = c.flag("parallel_attn") or new
    two_norms = not c.flag("parallel_attn") or (new and c.raw("num_ln_in_parallel_attn") in (None, 2))
    return {"num_kv_heads": kv, "parallel_attention_mlp": parallel, "norms_per_layer": 2 if two_norms else 1}


def _fields(c: Reader) -> dict[str, Any]:
    for key in c.family.required:  # the config class's None here builds no model (Family.required)
        c.count(key, minimum=0)
    parts = dict(c.family.parts)
    gated = parts.pop("gated_mlp", True)
    layers = c.count("num_layers")
    hidden = c.count("hidden_size")
    heads = c.count("num_attention_heads")
    # 4 x hidden only where the family's config class derives it so (GPT-2 n_inner, Falcon ffn_hidden_size:
    # None); elsewhere a missing width is an error, as a missing hidden_size is (a Llama file without it
    # read 4 x 4096 where LlamaConfig's default is 11008: the hostile-input review of 2026-12-06)
    derived = c.family.defaults.get("intermediate_size", MISSING) is None
    intermediate = (c.count("intermediate_size", optional=True) if derived else c.count("intermediate_size")) or 4 * hidden
    attention_bias, mlp_bias = c.flag("attention_bias"), c.flag("mlp_bias")
    out = attention_bias  # o_proj's bias: attention_bias's, or its own switch
    if parts.pop("attention_bias_qkv_only", False):  # GLM-4: attention_bias puts biases on q/k/v only
        out = c.flag("out_bias") if c.names("out_bias") else mlp_bias  # Seed-OSS: o_proj's own switch
        parts["qkv_bias"] = attention_bias
    linear_bias, out_bias = mlp_bias, (None if out == mlp_bias else out)  # Hunyuan: o_proj biased, the MLP not
    head_dim = None if parts.pop("head_dim_from_hidden", False) else c.count("head_dim", optional=True)
    if head_dim is None and hidden < heads:  # transformers' hidden_size // num_attention_heads would be 0
        raise c.unsupported("num_attention_heads", "is more than hidden_size has channels; without head_dim each head "
                                                   "is hidden_size / heads wide")
    fields: dict[str, Any] = {
        "num_layers": layers, "hidden_size": hidden, "num_attention_heads": heads,
        "num_kv_heads": c.count("num_kv_heads", optional=True) or heads,
        "head_dim": head_dim or hidden // heads,
        "intermediate_size": intermediate, "vocab_size": c.count("vocab_size"),
        "max_position_embeddings": c.count("max_position_embeddings"),
        "tie_word_embeddings": c.flag("tie_word_embeddings"), "learned_position_embeddings": False,
        "qkv_bias": attention_bias, "linear_bias": linear_bias, "out_bias": out_bias, "mlp_kind": _mlp_kind(c, gated),
        "norm_kind": "rmsnorm", "norms_per_layer": 2, **_dropouts(c),
        "final_logit_softcapping": c.number("final_logit_softcapping"),
        "attn_logit_softcapping": c.number("attn_logit_softcapping"),
    }
    fields.update(attention_window(c, layers))
    parts.pop("global_attention_first", None)  # the default pattern attention_window reads when no layer_types says
    parts.pop("global_first_layer", None)
    if parts.pop("value_head_dim", False):  # a value head narrower than q/k's outside MLA (MiMo-V2-Flash)
        fields["v_head_dim"] = c.count("v_head_dim")
    fields.update(_moe(c, layers, intermediate))
    if parts.pop("linear_attention", False):
        fields.update(_linear_attention(c, layers))
    value_width_derived = parts.pop("v_head_dim_from_hidden", False)  # MiniCPM3: v_head_dim None is hidden / heads
    if c.has("kv_lora_rank"):  # MLA: q/k heads are nope + rope wide, values v_head_dim
        value_width = (c.count("v_head_dim", optional=True) or hidden // heads) if value_width_derived else c.count("v_head_dim")
        fields.update(num_kv_heads=heads, q_lora_rank=c.count("q_lora_rank", optional=True) or 0,
                      kv_lora_rank=c.count("kv_lora_rank"), qk_rope_head_dim=c.count("qk_rope_head_dim"),
                      head_dim=c.count("qk_nope_head_dim") + c.count("qk_rope_head_dim"), v_head_dim=value_width)
    if parts.pop("sparse_indexer", False):
        fields.update(_sparse_indexer(c, layers, parts.pop("indexer_types", False)))
    fields["partial_rotary_factor"] = _rotary_factor(c, fields["head_dim"])
    fields.update(local_shape(c, fields, parts))
    parts.pop("last_layer_global", None)  # read by attention_window
    if parts.pop("global_shape", False):  # Gemma 4: the full layers' own head width, KV heads and values
        fields.update(global_shape(c, fields))
    apply_switches(c, fields, parts, hidden)
    qk_norm_kind = parts.pop("qk_norm_kind", None)  # what use_qk_norm switches on (Llama 4: l2; GLM-4.5: head)
    qk_norm_bias = parts.pop("qk_norm_bias", False)  # and whether that norm has a bias (Phi's nn.LayerNorm)
    # Only the families whose modeling code reads use_qk_norm (a qk_norm_kind) switch a QK norm on with it; one that
    # always builds its QK norm (Qwen 3, Hunyuan, MiniMax-M2, ...) or never does (Llama) ignores the key, which some of
    # their hub files carry, as transformers ignores it
    if "qk_norm" not in c.family.parts and qk_norm_kind is not None and c.has("use_qk_norm") and c.flag("use_qk_norm"):
        parts["qk_norm"], parts["qk_norm_bias"] = qk_norm_kind, qk_norm_bias
    parts["qkv_bias"] = parts.get("qkv_bias", False) or attention_bias
    if c.names("lm_head_bias"):  # Phi-3.5-MoE: the output projection's bias is the config's to say
        parts["lm_head_bias"] = c.flag("lm_head_bias")
    if c.names("clip_qkv") and c.number("clip_qkv") is not None:  # OLMo, OLMoE: q/k/v clamped in place
        parts["clip_qkv"] = True
    fields.update(parts)
    if c.has("multi_query"):
        fields.update(_falcon_shape(c, heads))
    return fields


def _family(config: dict[str, Any], source: str) -> tuple[str, Family, dict[str, Any]]:
    model_type = config.get("model_type")
    supported = ", ".join(SUPPORTED_MODEL_TYPES)
    if "model_type" not in config:
        raise VramplanError("model", source, "model_type: missing; vramplan reads a Hugging Face config.json by its "
                                             f"model_type (the family whose modeling code it follows); supported: {supported}")
    if isinstance(model_type, str) and model_type in UNMODELLED_FAMILIES:  # named from vramplan's own list
        raise VramplanError("model", source, f"its model_type {model_type} has {UNMODELLED_FAMILIES[model_type]}; "
                                             f"supported: {supported}")
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        raise VramplanError(  # never echo a value read from the file (it may hold anything)
            "model", source, f"its model_type is not supported; supported: {supported}"
        )
    if model_type in TEXT_CONFIG_TYPES:
        text = config.get("text_config")
        if not isinstance(text, dict):
            raise VramplanError("model", source, f"a {model_type} config.json needs a text_config object")
        inner = text.get("model_type")  # the decoder's own family when it names one (Mistral 3: mistral)
        if inner is None:
            model_type, config = TEXT_CONFIG_TYPES[model_type], text
        elif isinstance(inner, str) and inner in FAMILIES and not FAMILIES[inner].text_config:
            model_type, config = inner, text
        else:  # a decoder family vramplan does not read (it was read as the wrapper's default decoder)
            raise VramplanError("model", source, f"its text_config's model_type is not a supported decoder; "
                                                 f"supported: {supported}")
    return model_type, FAMILIES[model_type], config


def architecture_from_config(config: dict[str, Any], name: str, source: str) -> Architecture:
    quantization = checkpoint_quantization(config, source)  # top level, also for multimodal checkpoints
    wrapper = config.get("model_type")
    model_type, family, decoder = _family(config, source)
    reader = Reader(decoder, family, source, "" if decoder is config else "text_config.")
    fields = _fields(reader)
    fields["checkpoint_quantization"] = quantization
    if isinstance(wrapper, str):  # the wrapper's vision tower and projector (0 for a decoder-only checkpoint)
        fields["vision_params"] = vision_params(wrapper, config, fields["hidden_size"], source)
    config = decoder
    try:
        return Architecture(name=name, model_type=family.modeling or model_type, source=source, **fields)
    except ValidationError as error:
        first = error.errors()[0]
        original = first.get("ctx", {}).get("error")  # a whole-model check (e.g. heads) says it itself
        reason = str(original) if isinstance(original, VramplanError) else first["msg"].removeprefix("Value error, ")
        where = ".".join(map(str, first["loc"]))
        if where and reader.has(where) and reader.key(where) in config:  # the file's own key (num_hidden_layers)
            where = reader.key(where)
        raise VramplanError("model", source, f"{where}: {reason}" if where else reason) from None


def architecture_from_config_file(path: Path, shown: str | None = None) -> Architecture:
    """`shown`: how errors and the architecture's source name the file (default: the path)."""
    shown = str(path) if shown is None else shown
    config = read_config_json(path, shown)
    name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    # a folder named with a newline or an escape split the table's header line: shown escaped
    name = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in name)
    return architecture_from_config(config, name=name.lower() or "model", source=shown)
