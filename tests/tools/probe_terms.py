"""vramplan's per-layer terms in the units the CPU saved-tensor probe measures (b = 2, s = 64, bf16):
a CUDA dropout's 1-byte mask is an activation-dtype mask on CPU, and CPU LayerNorm keeps its
statistics in the activation dtype (tests/models/memory/test_saved_tensors*.py)."""

from __future__ import annotations

from vramplan.models.architecture.params import layer_group
from vramplan.models.memory.activation_terms import layer_terms
from vramplan.models.memory.saved_tensors import Shape

B, S, E = 2, 64, 2


def cpu_bytes(term, arch) -> int:
    if term.name.endswith("dropout_mask"):
        return term.num_bytes * E
    if term.name.endswith(".stats") and arch.norm_kind in ("layernorm", "layernorm_weight"):
        return term.num_bytes * E // 4
    return term.num_bytes


def layer_terms_bytes(arch, attention: str, index: int) -> list[int]:
    terms = layer_terms(arch, "eager", attention, Shape(b=B, s=S, e=E), group=layer_group(arch, index))
    return [cpu_bytes(t, arch) for t in terms]


def layer_ratios(model_type: str, kwargs: dict, attn: str, name: str = "test") -> list[float]:
    """Measured / estimated bytes of each decoder layer: the probe's one training forward of the tiny
    config (bf16, b = 2, s = 64) under SDPA ("sdpa", the flash terms) or eager attention."""
    import torch
    from transformers import AutoConfig

    from tools.saved_tensors_probe import probe
    from vramplan.models.catalogue.hf_config import architecture_from_config

    arch = architecture_from_config(AutoConfig.for_model(model_type, **kwargs).to_dict(), name=name, source="test")
    measured = probe(model_type, kwargs, B, S, torch.bfloat16, attn)
    attention = "flash" if attn == "sdpa" else "eager"
    return [measured.layer_bytes(i) / sum(layer_terms_bytes(arch, attention, i)) for i in measured.layer_indices]
