"""config.json's `quantization_config` as Architecture.checkpoint_quantization (never ignored).

The transformers 5.24 config classes (utils/quantization_config.py) name the keys read here:
GPTQConfig / AwqConfig `bits`, `group_size` (-1: one group per input column); BitsAndBytesConfig
`load_in_4bit`, `load_in_8bit`, `bnb_4bit_quant_type` (nf4 / fp4, default fp4),
`bnb_4bit_use_double_quant` (default false); FineGrainedFP8Config `weight_block_size` (null: one scale
per tensor); Mxfp4Config (gpt-oss). What the stored bytes are and what training does with them:
models/architecture/quantization.py. Any other quant_method is a one-line error: its bytes are
not modelled, and reading the weights as 16-bit would be silently wrong. Errors name the file and
the key, never the value (models/catalogue/config_file.py show_kind).
"""

from __future__ import annotations

from typing import Any

from vramplan.models.architecture.skip_modules import MAX_SKIP_ENTRIES, readable_skip_entry
from vramplan.models.catalogue.config_file import show_kind
from vramplan.models.core.errors import VramplanError

METHODS = ("gptq", "awq", "bitsandbytes", "fp8", "mxfp4")
MAX_GROUP = 9_999_999  # checkpoint_quantization's canonical text holds 7 digits (a 1e8 group printed its regex)
_BITS = (2, 3, 4, 8)


def _error(key: str, value: Any, why: str, source: str) -> VramplanError:
    return VramplanError(f"quantization_config.{key}", show_kind(value), f"{why} (in {source})")


def _int(qc: dict[str, Any], key: str, source: str, allowed: tuple[int, ...] | None = None, default: Any = None) -> int:
    value = qc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or (allowed is not None and value not in allowed):
        want = f"one of {', '.join(map(str, allowed))}" if allowed else "a whole number"
        raise _error(key, value, f"must be {want}", source)
    return value


def _flag(qc: dict[str, Any], key: str, source: str) -> bool:
    value = qc.get(key, False)
    if not isinstance(value, bool):
        raise _error(key, value, "must be true or false", source)
    return value


def _grouped(method: str, qc: dict[str, Any], source: str) -> str:
    bits = _int(qc, "bits", source, _BITS, default=4)
    group = _int(qc, "group_size", source, default=128)
    if group == 0 or group < -1 or group > MAX_GROUP:
        raise _error("group_size", group, f"must be -1 (one group per column) or a whole number from 1 to {MAX_GROUP:,}",
                     source)
    return f"{method}:{bits}:{max(group, 0)}"


def _bitsandbytes(qc: dict[str, Any], source: str) -> str:
    if _flag(qc, "load_in_8bit", source) and _flag(qc, "load_in_4bit", source):
        # transformers' BitsAndBytesConfig raises "load_in_4bit and load_in_8bit are both True, but only
        # one can be used at the same time"
        raise _error("load_in_8bit", True, "is true beside load_in_4bit: a bitsandbytes checkpoint loads in 4 or "
                     "8 bits, not both (transformers refuses it)", source)
    if _flag(qc, "load_in_8bit", source):
        return "int8" + _skips(qc, source)
    if not _flag(qc, "load_in_4bit", source):
        raise _error("load_in_4bit", qc.get("load_in_4bit"), "a bitsandbytes checkpoint loads in 4 or 8 bits: "
                     "load_in_4bit or load_in_8bit must be true", source)
    kind = qc.get("bnb_4bit_quant_type", "fp4")
    if kind not in ("nf4", "fp4"):
        raise _error("bnb_4bit_quant_type", kind, "must be nf4 or fp4", source)
    return kind + (":dq" if _flag(qc, "bnb_4bit_use_double_quant", source) else "") + _skips(qc, source)


def _skips(qc: dict[str, Any], source: str) -> str:
    """':skip=ENTRY|ENTRY...' where llm_int8_skip_modules keeps modules beyond the lm_head (never
    quantised) in 16 bits: Unsloth's dynamic 4-bit checkpoints list decoder layers ('model.layers.3.mlp'),
    whose bytes models/architecture/quantization.py counts in 16 bits. An entry the model cannot read
    safely as transformers' pattern (another character than letters, digits, '_', '.', '-' and at most
    two '*', longer than 200, or no valid pattern) leaves the flag alone (':skip': which modules is not
    known, counted quantised and said so)."""
    modules = qc.get("llm_int8_skip_modules")
    if modules is None:
        return ""
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise _error("llm_int8_skip_modules", modules, "must be a list of module names", source)
    entries = list(dict.fromkeys(m for m in modules if m != "lm_head"))
    if not entries:
        return ""
    if all(readable_skip_entry(m) for m in entries) and len(entries) <= MAX_SKIP_ENTRIES:
        return ":skip=" + "|".join(entries)
    return ":skip"


def _fp8(qc: dict[str, Any], source: str) -> str:
    block = qc.get("weight_block_size")
    if block is None:
        return "fp8"
    if (not isinstance(block, list) or len(block) != 2
            or any(isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= 10**6 for b in block)):
        raise _error("weight_block_size", block, "must be [rows, cols], two whole numbers >= 1", source)
    return f"fp8:{block[0]}:{block[1]}"


def checkpoint_quantization(config: dict[str, Any], source: str) -> str:
    """The canonical checkpoint_quantization text of a config.json ('' without quantization_config)."""
    qc = config.get("quantization_config")
    if qc is None:
        return ""
    if not isinstance(qc, dict):
        raise VramplanError("quantization_config", show_kind(qc), f"must be an object (in {source})")
    method = qc.get("quant_method")
    if method is None and ("load_in_4bit" in qc or "load_in_8bit" in qc):
        method = "bitsandbytes"  # BitsAndBytesConfig files written before quant_method existed
    if method in ("gptq", "awq"):
        return _grouped(method, qc, source)
    if method == "bitsandbytes":
        return _bitsandbytes(qc, source)
    if method == "fp8":
        return _fp8(qc, source)
    if method == "mxfp4":
        return "mxfp4"
    raise _error("quant_method", method, f"is not a checkpoint format vramplan models ({', '.join(METHODS)}); remove "
                 "quantization_config to plan from the 16-bit weights", source)
