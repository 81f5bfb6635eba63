"""Precision recipes: bytes per parameter of each model-state pillar, as exact fractions.

| recipe, optimizer                 | weights | gradients (zero / hf) | optimizer states             |
|-----------------------------------|---------|-----------------------|------------------------------|
| bf16 / fp16 / fp8 mixed, adamw    | 2       | 2 / 4                 | 12 = fp32 master 4 + m 4 + v 4 |
| fp32, adamw                       | 4       | 4                     | 8 = m 4 + v 4                |
| mixed, adamw-8bit                 | 2       | 2 / 4                 | 4 master + 2 x (1 + 4/256)   |
| mixed, sgd (momentum)             | 2       | 2 / 4                 | 4 master + 4 momentum        |

Sources: ZeRO (arXiv:1910.02054) sec. 3.1, K = 12 for mixed-precision Adam and 2-byte gradients;
Megatron-LM `theoretical_memory_usage.py` (18 bytes/param: fp32 main grads, the "hf" accounting,
also what HF Trainer keeps under AMP); bitsandbytes 8-bit blockwise optimizers (Dettmers et al.,
arXiv:2110.02861): one uint8 per state element plus one fp32 absmax per block of 256.
QLoRA (arXiv:2305.14314 sec. 3): NF4 base weights, 4 bits + double-quantised constants
(8-bit absmax per 64-block + fp32 per 256 absmaxes) = 4.127 bits per parameter.
LLM.int8 bases (bitsandbytes Linear8bitLt): 1 byte per weight + one fp32 scale per output row.
"""

from __future__ import annotations

from fractions import Fraction

from vramplan.models.architecture.quantization import BNB4_BLOCK, BNB4_DOUBLE_QUANT_BLOCK, bnb4_bytes_per_weight
from vramplan.models.core.setup import Accounting, Optimizer, Precision

FP32_BYTES = 4
HALF_BYTES = 2  # bf16 / fp16
FP8_BYTES = 1

BNB_OPTIMIZER_BLOCK = 256  # bitsandbytes blockwise 8-bit optimizer block size
NF4_BLOCK = BNB4_BLOCK  # QLoRA first-level quantisation block
NF4_DOUBLE_QUANT_BLOCK = BNB4_DOUBLE_QUANT_BLOCK  # QLoRA second-level block (of absmax values)


def weight_bytes_per_param(precision: Precision) -> Fraction:
    """Bytes of the working (compute) copy of a trainable or 16-bit frozen parameter."""
    return Fraction(FP32_BYTES if precision == "fp32" else HALF_BYTES)


def gradient_bytes_per_param(precision: Precision, accounting: Accounting) -> Fraction:
    if precision == "fp32" or accounting == "hf":
        return Fraction(FP32_BYTES)
    return Fraction(HALF_BYTES)


def _eight_bit_state_bytes() -> Fraction:
    return 1 + Fraction(FP32_BYTES, BNB_OPTIMIZER_BLOCK)


def optimizer_bytes_per_param(optimizer: Optimizer, precision: Precision) -> Fraction:
    """Optimizer state bytes per trainable parameter, including the fp32 master copy of mixed recipes."""
    master = Fraction(0 if precision == "fp32" else FP32_BYTES)
    if optimizer == "adamw":
        return master + 2 * FP32_BYTES
    if optimizer == "adamw-8bit":
        return master + 2 * _eight_bit_state_bytes()
    if optimizer == "sgd":
        return master + FP32_BYTES
    raise ValueError(f"unknown optimizer {optimizer!r}")


def nf4_bytes_per_param() -> Fraction:
    """QLoRA NF4 with double quantisation: 4 bits + 8 bits / 64 + 32 bits / (64 * 256)
    (models/architecture/quantization.py, which every quantised frozen base goes through)."""
    return bnb4_bytes_per_weight(double_quant=True)


def activation_bytes(precision: Precision) -> int:
    """Bytes per element of stored activations: 16-bit under mixed precision and fp8 (TE keeps
    bf16 activations outside the GEMM inputs), 4 under fp32."""
    return FP32_BYTES if precision == "fp32" else HALF_BYTES


def params_bytes(num_params: int, bytes_per_param: Fraction) -> int:
    """ceil(num_params x bytes_per_param), in integers (a Fraction product costs ten times more:
    the solver asks the model states for every ZeRO stage, offload, precision and pipeline rank)."""
    return -(-num_params * bytes_per_param.numerator // bytes_per_param.denominator)
