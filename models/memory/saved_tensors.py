"""The unit of the activation accounting: one tensor (or tensors alike) a layer saves for backward, and
the sizes of the micro-batch it is counted for (models/memory/activation_terms.py; the Gated DeltaNet
layer's, models/memory/linear_attention_terms.py). A literal 4 in a term is fp32, 8 int64, 1 a bool
(CUDA dropout masks)."""

from __future__ import annotations

from dataclasses import dataclass

INT64 = 8
FP32 = 4
BOOL = 1


@dataclass(frozen=True)
class Term:
    name: str
    num_bytes: int
    attention_core: bool = False


@dataclass(frozen=True)
class Shape:
    """The sizes one micro-batch's activations are built from."""

    b: int
    s: int
    e: int  # bytes per activation element
    autocast: bool = False  # fp32 weights with 16-bit autocast (HF Trainer AMP)
    # bytes per element of the routed experts' activations where they differ from e: fp32 experts
    # under autocast, which transformers' grouped_mm is not enabled for, so it casts its input to the
    # weight's dtype (transformers 5.24 integrations/moe.py _grouped_mm: `input.to(weight.dtype)`)
    expert_e: int = 0

    @property
    def t(self) -> int:
        return self.b * self.s
