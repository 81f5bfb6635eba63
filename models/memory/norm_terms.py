"""What a norm saves for backward, per implementation and norm kind (Architecture.norm_kind): the block norms, the
QK norms and Gemma 4's value norm; the notation and the two implementations are models/memory/activation_terms.py's,
which places these terms in a layer (and models/memory/loss.py, the final norm)."""

from __future__ import annotations

from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Kernels
from vramplan.models.memory.saved_tensors import FP32, Shape, Term


def norm_terms(arch: Architecture, kernels: Kernels, x: Shape, name: str, width: int | None = None,
               rows: int = 1, input_saved: bool = True, weight_per_row: bool = False, scaled: bool = True) -> list[Term]:
    """One norm over `width` channels (`rows` independent norms per token: per-head QK norms, one weight for every
    row, or each row its own with weight_per_row: Cohere's CohereLayerNorm((heads, head_dim))).
    input_saved=False: the input is already saved by another norm (parallel attention + MLP); scaled=False: a norm
    without a weight (Gemma 4's v_norm and router norm, with_scale=False)."""
    t, e = x.t, x.e
    w = arch.hidden_size if width is None else width
    weight = w if weight_per_row else w // rows
    kind = arch.norm_kind
    # mean and rstd (LayerNorms) or rstd (RMSNorms) per row, fp32
    stats = Term(f"{name}.stats", (1 + kind.startswith("layernorm")) * FP32 * t * rows)
    if kernels == "fused" or kind in ("layernorm", "layernorm_weight"):
        return [Term(f"{name}.input", e * t * w)] * input_saved + [stats]
    if kind == "layernorm_noparams":  # OLMo 1: F.layer_norm(x.float()) keeps the fp32 copy, its mean and rstd
        return [Term(f"{name}.input_fp32", FP32 * t * w), stats]
    if kind == "rmsnorm_noparams":  # nanochat (Llama4TextL2Norm): x.float() * rsqrt(mean(x^2)) keeps both, then casts
        return [Term(f"{name}.input_fp32", FP32 * t * w), Term(f"{name}.rsqrt", FP32 * t * rows)]
    if kind == "layernorm_nobias":  # Cohere: fp32 (x - mean) twice, rsqrt, fp32 normalised, fp32 weight
        return [Term(f"{name}.centred_fp32", 2 * FP32 * t * w), Term(f"{name}.rsqrt", FP32 * t * rows),
                Term(f"{name}.normed_fp32", FP32 * t * w), Term(f"{name}.weight_fp32", FP32 * weight)]
    if kind == "rmsnorm_pow":
        # Gemma 4 (Gemma4RMSNorm): x.float() * pow(mean(x^2) + eps, -0.5), which keeps both pow's input and its result
        # (the product's other factor), then * weight.float(), which keeps that fp32 copy of the weight and the fp32
        # normalised value; with_scale=False stops at the product, whose cast the next op saves (measured:
        # test_saved_tensors_families.py)
        stats_terms = [Term(f"{name}.input_fp32", FP32 * t * w), Term(f"{name}.pow_input_output", 2 * FP32 * t * rows)]
        if not scaled:
            return stats_terms
        return stats_terms + [Term(f"{name}.normed_fp32", FP32 * t * w), Term(f"{name}.weight_fp32", FP32 * weight)]
    terms = [Term(f"{name}.input_fp32", FP32 * t * w), Term(f"{name}.rsqrt", FP32 * t * rows)]
    if kind == "rmsnorm_offset":  # Gemma: fp32 normalised value and (1 + w) in fp32
        return terms + [Term(f"{name}.normed_fp32", FP32 * t * w), Term(f"{name}.one_plus_weight", FP32 * weight)]
    if kind == "rmsnorm_fp32_weight":  # OLMo 2: weight * x in fp32, then cast
        return terms + [Term(f"{name}.normed_fp32", FP32 * t * w)]
    normed = FP32 if x.autocast else e  # under autocast the whole norm runs in fp32
    return terms + [Term(f"{name}.normed", normed * t * w)]


def qk_norm_terms(arch: Architecture, kernels: Kernels, x: Shape, keys: bool = True) -> list[Term]:
    """QK norms on q (a*d) and k (kv*d), of the block norms' form: per head (Qwen3, Gemma 3; Cohere and StableLM with a
    weight per head), whole width (OLMo 2), or L2 (Llama 4: x * rsqrt(mean(x^2)), which saves the fp32 input and rsqrt
    only). StableLM's LayerNorm per head (StableLmLayerNormPerHead) keeps each head's slice of q, one storage.
    keys=False: q's alone (a KV-shared layer has no k_norm: Gemma 4)."""
    a, k, d = arch.num_attention_heads, arch.num_kv_heads, arch.head_dim
    if arch.qk_norm == "l2":
        return [Term("qk_norm.input_fp32", FP32 * x.t * (a + k) * d), Term("qk_norm.rsqrt", FP32 * x.t * (a + k))]
    per_head = arch.qk_norm in ("head", "per_head")
    own = arch.qk_norm == "per_head"
    return (norm_terms(arch, kernels, x, "q_norm", a * d, a if per_head else 1, weight_per_row=own)
            + (norm_terms(arch, kernels, x, "k_norm", k * d, k if per_head else 1, weight_per_row=own) if keys else []))


def value_norm_terms(arch: Architecture, kernels: Kernels, x: Shape) -> list[Term]:
    """Gemma 4's v_norm: a weightless RMSNorm over each value head, of the block norms' form (Gemma4TextAttention:
    on the keys' projection where the values are the keys, value_from_key, an fp32 copy of its own)."""
    if not arch.value_norm:
        return []
    k, dv = arch.num_kv_heads, arch.value_head_dim
    return norm_terms(arch, kernels, x, "v_norm", k * dv, k, scaled=False)
