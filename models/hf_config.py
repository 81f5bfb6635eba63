"""A Hugging Face config.json as an Architecture, through the same schema as catalogue rows.

Defaults are those of the transformers config classes (`GPT2Config`, `LlamaConfig`, `MistralConfig`,
`MixtralConfig`, `Qwen2Config`, `Gemma2Config`) for keys a config.json may omit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from vramplan.models.catalogue_schema import Architecture
from vramplan.models.config_file import read_config_json
from vramplan.models.errors import VramplanError

SUPPORTED_MODEL_TYPES = ("gpt2", "llama", "mistral", "mixtral", "qwen2", "gemma2")
_TIED_BY_DEFAULT = {"gpt2": True, "gemma2": True}
_GATED_MLP = {"gemma2": "geglu"}


def _gpt2_fields(config: dict[str, Any]) -> dict[str, Any]:
    hidden = config.get("n_embd", 768)
    heads = config.get("n_head", 12)
    return {
        "num_layers": config.get("n_layer", 12),
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_kv_heads": heads,
        "head_dim": hidden // heads,
        "intermediate_size": config.get("n_inner") or 4 * hidden,
        "vocab_size": config.get("vocab_size", 50257),
        "max_position_embeddings": config.get("n_positions", 1024),
        "learned_position_embeddings": True,
        "qkv_bias": True,
        "linear_bias": True,
        "mlp_kind": "gelu",
        "norm_kind": "layernorm",
        "norms_per_layer": 2,
        "dropout_prob": config.get("resid_pdrop", 0.1),
        "num_experts": 1,
        "experts_per_token": 1,
    }


def _decoder_fields(model_type: str, config: dict[str, Any]) -> dict[str, Any]:
    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    attention_bias = bool(config.get("attention_bias", False))
    mlp_bias = bool(config.get("mlp_bias", False))
    if attention_bias != mlp_bias:
        raise VramplanError(
            "model", model_type, "attention_bias and mlp_bias differ; vramplan models o_proj and MLP biases together"
        )
    moe = model_type == "mixtral"
    return {
        "num_layers": config["num_hidden_layers"],
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_kv_heads": config.get("num_key_value_heads") or heads,
        "head_dim": config.get("head_dim") or hidden // heads,
        "intermediate_size": config["intermediate_size"],
        "vocab_size": config["vocab_size"],
        "max_position_embeddings": config.get("max_position_embeddings", 4096),
        "learned_position_embeddings": False,
        "qkv_bias": model_type == "qwen2" or attention_bias,  # Qwen2 hard-codes q/k/v biases
        "linear_bias": attention_bias,
        "mlp_kind": _GATED_MLP.get(model_type, "swiglu"),
        "norm_kind": "rmsnorm",
        "norms_per_layer": 4 if model_type == "gemma2" else 2,
        "dropout_prob": config.get("attention_dropout", 0.0),
        "num_experts": config.get("num_local_experts", 8) if moe else 1,
        "experts_per_token": config.get("num_experts_per_tok", 2) if moe else 1,
        "final_logit_softcapping": config.get("final_logit_softcapping") if model_type == "gemma2" else None,
    }


def architecture_from_config(config: dict[str, Any], name: str, source: str) -> Architecture:
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise VramplanError(  # never echo a value read from the file (it may hold anything)
            "model", source, f"its model_type is not supported; supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    try:
        fields = _gpt2_fields(config) if model_type == "gpt2" else _decoder_fields(model_type, config)
    except KeyError as error:
        raise VramplanError("model", source, f"config.json lacks {error.args[0]!r}") from None
    tied = config.get("tie_word_embeddings", _TIED_BY_DEFAULT.get(model_type, False))
    try:
        return Architecture(
            name=name, model_type=model_type, tie_word_embeddings=tied, source=source, **fields
        )
    except ValidationError as error:
        first = error.errors()[0]
        raise VramplanError("model", source, f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def architecture_from_config_file(path: Path, shown: str | None = None) -> Architecture:
    """`shown`: how errors and the architecture's source name the file (default: the path)."""
    shown = str(path) if shown is None else shown
    config = read_config_json(path, shown)
    name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return architecture_from_config(config, name=name.lower() or "model", source=shown)
