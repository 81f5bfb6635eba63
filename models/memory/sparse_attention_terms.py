"""DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5) as transformers runs it: what its layers save beside
MLA's own terms (models/memory/activation_terms.py), and the indexer's transient, the largest tensors of
the step.

transformers 5.24 (modeling_deepseek_v32.py DeepseekV32Attention / DeepseekV32Indexer; modeling_glm_moe_dsa.py
the same with interleaved RoPE in the indexer):
- the indexer runs under torch.no_grad, so autograd saves nothing of it. Its forward scores every key
  for every query and index head in fp32: `torch.matmul(q.float(), k.transpose(-1, -2).float()
  .unsqueeze(1))` broadcasts the keys (b x 1 x d_i x s) over the queries, and torch's matmul
  materialises that broadcast for its bmm (aten matmul: expand, then reshape, a copy of b x s x d_i x
  s), beside q.float() and the product (b x s x H_i x s); the product is then scaled and relu'd, each
  a new tensor while the one before it is alive (two b x s x H_i x s). At 4k tokens, DeepSeek-V3.2's
  64 index heads of 128 hold 13.0 GB a sequence at the matmul, at 16k 206 GB: in every layer's forward
  (and its recompute). The 16-bit queries and keys the indexer projected and rotated stay alive beside;
- the top-k becomes a boolean mask of the unselected keys (b x 1 x s x s), and-ed with the causal
  mask: SDPA converts a boolean mask to an additive one in the query's dtype
  (aten scaled_dot_product_attention: convert_boolean_attn_mask) and its masked kernels
  (memory-efficient, cuDNN) save that bias for backward: e x b x s^2 per layer (index_mask_terms).
  Eager attention adds the mask to its scores, which saves nothing more;
- the model builds its 4-D causal mask whatever the attention implementation
  (DeepseekV32Model.forward: `allow_is_causal_skip: False`), boolean under SDPA, in the activation
  dtype under eager: alive through the forward, and kept for the backward by every checkpoint's
  closure under full recompute (causal_mask_bytes).
The flash_attention_2 path is not one: it gets no 4-D mask to index (the indexer reads
`attention_mask[:, 0, :, :]`), so vramplan's `flash` attention means SDPA here, as transformers' default.
"""

from __future__ import annotations

from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Attention, Job
from vramplan.models.core.units import BYTES_PER_GIB
from vramplan.models.memory.saved_tensors import BOOL, FP32, Shape, Term


def index_mask_terms(arch: Architecture, attention: Attention, x: Shape) -> list[Term]:
    """The additive top-k mask SDPA's masked kernel saves (b x 1 x s x s in the activation dtype); none
    under eager attention or without an indexer."""
    if not arch.has_indexer or attention == "eager":
        return []
    return [Term("attn.index_mask", x.e * x.b * x.s * x.s, attention_core=True)]


def causal_mask_bytes(arch: Architecture, attention: Attention, x: Shape) -> int:
    """The 4-D causal mask a DeepSeek Sparse Attention model always builds: boolean for SDPA, additive in
    the activation dtype for eager (0 without an indexer)."""
    if not arch.has_indexer:
        return 0
    return (x.e if attention == "eager" else BOOL) * x.b * x.s * x.s


def indexer_largest_block_bytes(arch: Architecture, x: Shape) -> int:
    """The indexer's largest single tensor: its fp32 scores (b x s x index heads x s) or the keys its
    matmul broadcasts over the queries (b x s x index head width x s); 0 without an indexer."""
    return FP32 * x.t * x.s * max(arch.index_heads, arch.index_head_dim) if arch.has_indexer else 0


def indexer_transient_bytes(arch: Architecture, attention: Attention, x: Shape, mask_counted: bool) -> int:
    """What the indexer's forward holds beyond the saved tensors at its peak (measured with torch's
    MemTracker on CPU: tests/models/memory/test_saved_tensors_sparse_attention.py): the larger of the
    matmul's moment (q.float(), the keys broadcast over the queries in fp32, the product) and the
    scaling's (two fp32 score tensors), with the 16-bit queries (wq_b's output, its rotated part, the
    concatenation) and keys (k_norm's output, its rotated part, the concatenation, the fp32 copy) beside,
    and the model's 4-D causal mask unless `mask_counted` (kept under full recompute as a shared term)."""
    if not arch.has_indexer:
        return 0
    heads, width, rope, s, t = arch.index_heads, arch.index_head_dim, arch.qk_rope_head_dim, x.s, x.t
    matmul = FP32 * t * (heads * width + width * s + heads * s)
    scaled = 2 * FP32 * t * heads * s
    projected = x.e * t * (2 * heads * width + heads * rope + 2 * width + rope) + FP32 * t * width
    mask = 0 if mask_counted else causal_mask_bytes(arch, attention, x)
    return max(matmul, scaled) + projected + mask


def sparse_attention_note(arch: Architecture, job: Job, x: Shape) -> str | None:
    """What a DeepSeek Sparse Attention estimate's largest transient is for its micro-batch `x`
    (activations.activation_shape) and how it grows (None for other models)."""
    if not arch.has_indexer:
        return None
    gib = indexer_transient_bytes(arch, job.attention, x, mask_counted=False) / BYTES_PER_GIB
    return (f"{arch.name}'s DeepSeek Sparse Attention indexer holds {gib:,.1f} GiB of fp32 scores in each layer's "
            f"forward at micro-batch {x.b} x {job.seq_len:,} tokens (transformers' indexer scores every key; "
            "it grows with the square of the sequence)")
