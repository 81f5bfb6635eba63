"""The parameters a multimodal checkpoint loads beside its decoder: the vision tower and the projector
that maps its patches into the decoder's width, counted exactly as transformers 5.24 builds them.

Which checkpoints load one for a text fine-tune: transformers' AutoModelForCausalLM maps `gemma3` to
Gemma3ForConditionalGeneration (models/auto/modeling_auto.py MODEL_FOR_CAUSAL_LM_MAPPING_NAMES), and
`mistral3` has no causal-LM class at all (AutoModelForImageTextToText builds
Mistral3ForConditionalGeneration): both hold the tower on the GPU whatever the data. `llama4` maps to
Llama4ForCausalLM, the decoder alone (the checkpoint's vision weights are not loaded), so it counts
none (docs/memory-model.md).

- SigLIP (`siglip_vision_model`, Gemma 3's tower; models/siglip/modeling_siglip.py): a patch Conv2d
  with bias (c p^2 h + h), learned positions ((image / patch)^2 x h), per layer q/k/v/out_proj with
  biases (4 (h^2 + h)), two LayerNorms (4 h) and fc1/fc2 with biases (2 h f + f + h), a post
  LayerNorm (2 h), and with `vision_use_head` the attention-pooling head (a probe h, torch's
  MultiheadAttention 4 (h^2 + h), a LayerNorm 2 h, an MLP 2 h f + f + h).
  Gemma3MultiModalProjector (models/gemma3/modeling_gemma3.py): mm_input_projection_weight
  (h x text h) and mm_soft_emb_norm, an RMSNorm of h.
- Pixtral (`pixtral`, Mistral 3's tower; models/pixtral/modeling_pixtral.py): a patch Conv2d
  without bias (c p^2 h), ln_pre (RMSNorm h), per layer attention_norm and ffn_norm (2 h), q/k/v/o
  without bias (each h x h: PixtralAttention), gate/up/down without bias (3 h f).
  Mistral3MultiModalProjector (models/mistral3/modeling_mistral3.py): norm (RMSNorm h),
  patch_merger.merging_layer (h s^2 -> h, no bias), linear_1 (h x feature layers -> text h) and
  linear_2 (text h -> text h), both with `multimodal_projector_bias`.

Missing keys take the defaults transformers would build with (the config classes' fields, and
Mistral3Config's own vision defaults when vision_config is absent).
"""

from __future__ import annotations

from typing import Any

from vramplan.models.core.errors import VramplanError

# configuration_siglip.py SiglipVisionConfig's fields (transformers 5.24); Gemma3Config builds one of
# these when its config.json has no vision_config
_SIGLIP_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_channels": 3,
                    "image_size": 224, "patch_size": 16, "vision_use_head": True}
# configuration_pixtral.py PixtralVisionConfig's fields that size its parameters (its positions are
# rotary: the image size sizes nothing)
_PIXTRAL_DEFAULTS = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "num_channels": 3,
                     "patch_size": 16}
# configuration_mistral3.py Mistral3Config.sub_configs_defaults["vision_config"].init_kwargs: the tower a
# config.json without vision_config gets
_MISTRAL3_VISION = {**_PIXTRAL_DEFAULTS, "patch_size": 14}
# configuration_gemma4.py Gemma4VisionConfig's fields that size its parameters (transformers 5.24)
_GEMMA4_VISION_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 16, "num_attention_heads": 12,
                           "num_key_value_heads": 12, "head_dim": 64, "patch_size": 16, "position_embedding_size": 10240}
# the towers each wrapper family loads, by the vision_config's model_type
TOWERS = {"gemma3": "siglip_vision_model", "mistral3": "pixtral", "gemma4": "gemma4_vision"}
OPTIONAL_TOWERS = frozenset({"gemma4"})  # Gemma4Config builds no tower without a vision_config (SubConfigSpec optional)
MAX_VISION_PARAMS = 10**12  # Architecture.vision_params' bound


# Mistral3Config's projector fields (configuration_mistral3.py), read from the top level of its config.json
_MISTRAL3_PROJECTOR = {"spatial_merge_size": 2, "multimodal_projector_bias": False}


class _Level:
    """Reads one level of a config (vision_config's keys, or the wrapper's projector keys: `scope` names
    where), a missing key taking the class's default, a bad value one line naming the key."""

    def __init__(self, config: dict[str, Any], defaults: dict[str, Any], source: str, scope: str = "vision_config.") -> None:
        self.config, self.defaults, self.source, self.scope = config, defaults, source, scope

    def _bad(self, key: str, why: str) -> VramplanError:
        return VramplanError("model", self.source, f"{self.scope}{key}: {why}")

    def count(self, key: str) -> int:
        value = self.config.get(key, self.defaults[key])
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10_000_000:
            raise self._bad(key, "must be an integer from 1 to 10,000,000")
        return value

    def flag(self, key: str) -> bool:
        value = self.config.get(key, self.defaults[key])
        if not isinstance(value, bool):
            raise self._bad(key, "must be true or false")
        return value


def _siglip_params(v: _Level) -> tuple[int, int]:
    """(the tower's parameters, its hidden width)."""
    h, f, layers = v.count("hidden_size"), v.count("intermediate_size"), v.count("num_hidden_layers")
    image, patch = v.count("image_size"), v.count("patch_size")
    mlp = 2 * h * f + f + h
    # SiglipVisionEmbeddings: num_patches = (image_size // patch_size) ** 2 learned positions
    embeddings = v.count("num_channels") * patch * patch * h + h + (image // patch) ** 2 * h
    layer = 4 * (h * h + h) + 4 * h + mlp
    head = (h + 4 * (h * h + h) + 2 * h + mlp) if v.flag("vision_use_head") else 0
    return embeddings + layers * layer + 2 * h + head, h


def _pixtral_params(v: _Level) -> tuple[int, int]:
    h, f, layers = v.count("hidden_size"), v.count("intermediate_size"), v.count("num_hidden_layers")
    layer = 2 * h + 4 * h * h + 3 * h * f
    patch = v.count("patch_size")
    return v.count("num_channels") * patch * patch * h + h + layers * layer, h


def _gemma4_vision_params(v: _Level) -> tuple[int, int]:
    """Gemma4VisionModel (modeling_gemma4.py): the patch embedder's input_proj (3 p^2 -> h, no bias) and its two learned
    position tables (2 x position_embedding_size x h); per layer q/k/v/o (Gemma4ClippableLinear, no bias), q_norm and
    k_norm (head_dim each; v_norm has no weight), four block norms and gate/up/down; no parameter in the pooler (the
    standardize bias and scale are buffers)."""
    h, f, layers = v.count("hidden_size"), v.count("intermediate_size"), v.count("num_hidden_layers")
    heads, kv, d = v.count("num_attention_heads"), v.count("num_key_value_heads"), v.count("head_dim")
    patch = v.count("patch_size")
    layer = 2 * h * heads * d + 2 * h * kv * d + 2 * d + 4 * h + 3 * h * f
    return 3 * patch * patch * h + 2 * v.count("position_embedding_size") * h + layers * layer, h


def _feature_layers(config: dict[str, Any], source: str) -> int:
    """Mistral3MultiModalProjector.num_feature_layers: 1 for one vision_feature_layer, else how many."""
    value = config.get("vision_feature_layer", -1)
    if isinstance(value, int) and not isinstance(value, bool):
        return 1
    if isinstance(value, list) and value and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        return len(value)
    raise VramplanError("model", source, "vision_feature_layer: must be an integer or a list of integers")


def vision_params(model_type: str, config: dict[str, Any], text_hidden: int, source: str) -> int:
    """Parameters of the vision tower and projector that `model_type`'s checkpoint loads beside its
    decoder of width `text_hidden`; 0 for a family that loads none."""
    tower = TOWERS.get(model_type)
    if tower is None:
        return 0
    if model_type == "gemma4" and config.get("audio_config") is not None:
        raise VramplanError("model", source, "audio_config: the audio tower Gemma4ForConditionalGeneration loads beside "
                                             "the decoder (Gemma 4 E2B / E4B) is not counted")
    raw = config.get("vision_config")
    if raw is None and model_type in OPTIONAL_TOWERS:
        return 0
    if raw is None:
        raw = {"model_type": tower}
    if not isinstance(raw, dict):
        raise VramplanError("model", source, "vision_config: must be an object")
    if raw.get("model_type", tower) != tower:
        raise VramplanError("model", source, f"vision_config.model_type: a {model_type} checkpoint's tower is read "
                                             f"as {tower}; another tower's parameters are not modelled")
    total = _tower_and_projector(model_type, config, raw, text_hidden, source)
    if total > MAX_VISION_PARAMS:  # each key is in range, their product is not (Architecture.vision_params)
        raise VramplanError("model", source, f"vision_config: the tower and projector come to {total:,} parameters, "
                                             f"more than {MAX_VISION_PARAMS:,}")
    return total


def _tower_and_projector(model_type: str, config: dict[str, Any], raw: dict[str, Any], text_hidden: int,
                         source: str) -> int:
    if model_type == "gemma3":
        params, h = _siglip_params(_Level(raw, _SIGLIP_DEFAULTS, source))
        return params + h * text_hidden + h  # mm_input_projection_weight + mm_soft_emb_norm
    if model_type == "gemma4":
        params, h = _gemma4_vision_params(_Level(raw, _GEMMA4_VISION_DEFAULTS, source))
        return params + h * text_hidden  # Gemma4MultimodalEmbedder: embedding_projection (its norm has no weight)
    defaults = _MISTRAL3_VISION if "vision_config" not in config else _PIXTRAL_DEFAULTS
    vision = _Level(raw, defaults, source)
    params, h = _pixtral_params(vision)
    projector_keys = _Level(config, _MISTRAL3_PROJECTOR, source, scope="")
    merge, bias = projector_keys.count("spatial_merge_size"), projector_keys.flag("multimodal_projector_bias")
    projector = (h  # norm
                 + h * merge * merge * h  # patch_merger.merging_layer
                 + h * _feature_layers(config, source) * text_hidden + bias * text_hidden  # linear_1
                 + text_hidden * text_hidden + bias * text_hidden)  # linear_2
    return params + projector
