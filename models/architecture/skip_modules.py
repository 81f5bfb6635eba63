"""bitsandbytes' `llm_int8_skip_modules` (a checkpoint's modules kept in 16 bits) matched against a
family's decoder matrices as transformers 5 matches them (models/architecture/quantization.py
counts what they keep; models/catalogue/hf_quantization.py reads the entries)."""

from __future__ import annotations

import re
from functools import lru_cache

from vramplan.models.architecture.params import LinearModule, attention_module_names, layer_group
from vramplan.models.core.catalogue_schema import Architecture

MAX_SKIP_ENTRIES = 4096  # llm_int8_skip_modules entries read (config.json holds at most 1 MiB)
_SKIP_ENTRY = re.compile(r"[A-Za-z0-9_.*-]{1,200}")


def readable_skip_entry(entry: str) -> bool:
    """An llm_int8_skip_modules entry matched as transformers matches it (a regex from the start of a
    module's name): module-path characters and at most two '*', so matching stays cheap."""
    if not _SKIP_ENTRY.fullmatch(entry) or entry.count("*") > 2:
        return False
    try:
        re.compile(entry)
    except re.error:
        return False
    return True


# The names transformers gives a decoder layer's matrices, which skip entries are matched against:
# the layer list (model.layers in the Llama-style families, the multimodal wrappers' language model
# under transformers 5 and 4, GPT-2 / Falcon transformer.h, GPT-NeoX gpt_neox.layers), then the
# attention or MLP block (modeling_<type>.py attribute names), then the module (module_names.py module_name;
# MoE experts as one name per matrix kind: an entry naming one expert by index is not matched).
# A name no real checkpoint of the family has matches no real entry.
_LAYER_PATHS = ("model.layers", "model.language_model.layers", "language_model.model.layers", "transformer.h",
                "gpt_neox.layers")
_ATTENTION_BLOCKS = ("self_attn", "attention", "attn", "self_attention")
_MLP_BLOCKS = ("mlp", "block_sparse_moe", "feed_forward")


def _module_names(arch: Architecture, index: int, module: LinearModule) -> list[str]:
    blocks = _ATTENTION_BLOCKS if module.name in attention_module_names(arch) else _MLP_BLOCKS
    return [f"{path}.{index}." + (module.name if module.name.startswith(block + ".") else f"{block}.{module.name}")
            for path in _LAYER_PATHS for block in blocks]


@lru_cache(maxsize=256)
def matched_matrices(arch: Architecture, entries: tuple[str, ...]) -> frozenset[tuple[int, str]]:
    """(layer index, module name) of the decoder matrices whose name an entry matches as transformers 5
    matches it (quantizers_utils.py should_convert_module @ 0eb492cb: `re.match(f"{key}\\.", name) or
    re.match(key, name) or name.endswith(key)`, so 'model.layers.1' also reaches layers 10-19, as it
    does there)."""
    starts = re.compile("|".join(f"(?:{entry})" for entry in entries))
    return frozenset((index, m.name) for index in range(arch.num_layers) for m in layer_group(arch, index).modules
                     if any(starts.match(name) or name.endswith(entries) for name in _module_names(arch, index, m)))
