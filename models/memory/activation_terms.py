"""Which tensors a decoder layer saves for backward, term by term, for two implementations.

Notation: T = b*s tokens of one micro-batch, e = bytes of a 16-bit (or fp32) activation,
h hidden, a heads, k kv heads, d head dim, f MLP width, v vocab, E experts, K experts per token.
Terms with a literal 4 are fp32, with 8 int64, with 1 bool (CUDA dropout masks).

kernels="eager": the module code of Hugging Face transformers 5.24 on CUDA. Every term was measured
with torch.autograd.graph.saved_tensors_hooks on CPU (tests/tools/saved_tensors_probe.py; the
optional test tests/models/memory/test_saved_tensors.py re-measures them); two CUDA facts come from the ATen
source instead: dropout saves a 1-byte bool mask (fused native_dropout) and LayerNorm keeps fp32
mean/rstd. Highlights: HF RMSNorm upcasts to fp32 and saves that copy (4Th) and the normalised
value (eTh); SwiGLU saves gate, up, act(gate) and the product (4eTf); GPT-2's gelu_new is a
Python formula that saves four f-wide intermediates; eager attention saves the fp32 softmax
(4 b a s^2) and its 16-bit cast, with K/V repeated to a heads; SDPA/flash saves q, k and v at their
own head counts, the output (which is o_proj's input) and an fp32 logsumexp. Under autocast (the
"hf" accounting: fp32 weights, 16-bit compute), norms run in fp32 and every linear saves its own
16-bit cast of its input.

kernels="fused": Megatron-Core / Transformer Engine kernels, as Korthikanti et al. account them
(arXiv:2205.05198 sec. 4.1): a norm saves its input and fp32 statistics, a linear its input, GELU
its input, fused SwiGLU the gate/up GEMM output, dropout a 1-byte mask; eager ("core") attention
saves Q, K, V (K/V repeated for GQA), softmax output, dropout mask and dropped probabilities. For
the GPT layer this sums to exactly s*b*h*34 + 5*a*s^2*b plus the fp32 norm statistics
(16 bytes per token, which the paper neglects).

A Term flagged `attention_core` is what selective recompute (Korthikanti sec. 5) recomputes.
"""

from __future__ import annotations

from vramplan.models.architecture.module_names import NOT_GATED
from vramplan.models.architecture.params import (
    LayerGroup,
    layer_architecture,
    layer_group,
    linear_attention_widths,
)
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Attention, Kernels
from vramplan.models.memory.linear_attention_terms import linear_attention_terms
from vramplan.models.memory.mlp_terms import mlp_terms
from vramplan.models.memory.norm_terms import norm_terms, qk_norm_terms, value_norm_terms
from vramplan.models.memory.saved_tensors import BOOL, FP32, INT64, Shape, Term
from vramplan.models.memory.sparse_attention_terms import index_mask_terms

PER_LAYER_ROPE = ("per_layer", "per_layer_fp32", "per_call")  # RoPE tables each layer copies (Architecture.rope_tables)


def _per_layer_input(arch: Architecture, kernels: Kernels, x: Shape) -> list[Term]:
    """Gemma 4's per-layer input (Gemma4TextDecoderLayer, E2B / E4B): per_layer_input_gate keeps the layer's output so
    far, gelu its input, the product with the layer's slice of the per-layer inputs its gelu output (the slice is the
    model's one tensor: embedding_terms), per_layer_projection that product, then post_per_layer_input_norm (measured:
    test_saved_tensors_families.py "gemma4_e")."""
    width = arch.per_layer_input_width
    if not width:
        return []
    return ([Term("per_layer_input.gate_input", x.e * x.t * arch.hidden_size),
             Term("per_layer_input.gelu_product", 3 * x.e * x.t * width)]
            + norm_terms(arch, kernels, x, "per_layer_input_norm"))


def _moe_beside_mlp(arch: Architecture, kernels: Kernels, x: Shape) -> list[Term]:
    """Gemma 4's MoE layer (Gemma4TextDecoderLayer with enable_moe_block): the dense MLP (its input counted with the
    layer's MLP norm) and its post-norm; the router's weightless norm of the residual, whose cast times router.scale
    and that product times hidden_size^-0.5 (proj's input) it keeps; the experts' pre-norm, the routed block and the
    experts' post-norm (measured: test_saved_tensors_families.py "gemma4_moe")."""
    e, t, h = x.e, x.t, arch.hidden_size
    return (mlp_terms(arch, kernels, x, moe=False) + norm_terms(arch, kernels, x, "mlp_output_norm")
            + norm_terms(arch, kernels, x, "router_norm", scaled=False) + [Term("moe.router_input", 2 * e * t * h)]
            + norm_terms(arch, kernels, x, "moe_input_norm") + mlp_terms(arch, kernels, x, moe=True)
            + norm_terms(arch, kernels, x, "moe_output_norm"))


def stored_kv_terms(arch: Architecture, kernels: Kernels, x: Shape, local: bool) -> list[Term]:
    """What the store layer of one attention kind (Architecture.stored_kv: Gemma 4's last layer of each kind) keeps
    from its recompute to the end of a checkpointed backward: the dict the model holds (shared_kv_states) keeps its
    recomputed keys and values, whose autograd graph keeps every tensor saved on the way to them: the attention
    norm's, the k/v projections' input, the k and v norms' and the two outputs (measured: 984,256 bytes for the two
    layers of the 4-layer probe, rope tables and weights included; the layer's named terms, so they shard alike)."""
    if not arch.stored_kv:
        return []
    shape = layer_architecture(arch, local)
    k, d, dv = shape.num_kv_heads, shape.head_dim, shape.value_head_dim
    qk_norm = (norm_terms(shape, kernels, x, "k_norm", k * d, k if shape.qk_norm in ("head", "per_head") else 1)
               if shape.qk_norm not in ("none", "l2") else [])
    return (norm_terms(shape, kernels, x, "attn_norm") + _linear_inputs(shape, x, "attn", 2 - shape.value_from_key) + qk_norm
            + value_norm_terms(shape, kernels, x) + [Term("attn.k", x.e * x.t * k * d), Term("attn.v", x.e * x.t * k * dv)])


def _linear_inputs(arch: Architecture, x: Shape, name: str, num_linears: int) -> list[Term]:
    """Input saved by the linears that read one tensor: shared, or one cast each under autocast."""
    copies = num_linears if x.autocast else 1
    return [Term(f"{name}.linear_input", copies * x.e * x.t * arch.hidden_size)]


def _mla(arch: Architecture, kernels: Kernels, x: Shape) -> list[Term]:
    """MLA's low-rank projections (modeling_deepseek_v3.py): the q_a / kv_a latents are normed, and
    q_b_proj / kv_b_proj save their inputs (the normed latents times the norm weight); the decoupled
    rope key is concatenated into k, so it is part of attn.k (measured)."""
    terms = []
    if arch.q_lora_rank:
        terms += norm_terms(arch, kernels, x, "q_a_norm", arch.q_lora_rank)
        terms.append(Term("attn.q_b_input", x.e * x.t * arch.q_lora_rank))
    terms += norm_terms(arch, kernels, x, "kv_a_norm", arch.kv_lora_rank)
    return terms + [Term("attn.kv_b_input", x.e * x.t * arch.kv_lora_rank)]


def _attention(arch: Architecture, kernels: Kernels, attention: Attention, x: Shape, kv_shared: bool = False) -> list[Term]:
    """kv_shared: the keys and values are an earlier layer's (Gemma 4's KV-shared layers), already kept there: SDPA keeps
    none of its own; eager attention its copies, as any layer's."""
    t, b, s, e = x.t, x.b, x.s, x.e
    a, k, d, dv = arch.num_attention_heads, arch.num_kv_heads, arch.head_dim, arch.value_head_dim
    scores = b * a * s * s
    dropout = arch.attention_dropout > 0
    rotated = not arch.learned_position_embeddings and not arch.alibi  # RoPE writes new q and k; v stays a view
    # BLOOM reshapes its fused projection into per-head copies of q, k and v: the unfused path's terms (measured)
    views = not arch.qkv_head_copies
    if arch.fused_qkv and views and kernels == "eager" and (attention == "flash" or (not rotated and k == a)):
        # q, k, v are views of one projection output, which autograd keeps whole (measured, GPT-2/Phi-3/NeoX); eager
        # attention over fewer KV heads copies q and repeats k and v instead (GPTBigCode's multi-query: measured)
        qkv = [Term("attn.qkv_output", e * t * (a * d + 2 * k * d))]
        if rotated:
            qkv += [Term("attn.q", e * t * a * d), Term("attn.k", e * t * k * d)]
    elif attention == "flash" and arch.is_mla:
        # v is a view of kv_b_proj's output (k_nope | v per head), so SDPA keeps that whole storage;
        # k is a new tensor (k_nope | shared k_rope). Reasoned from the view, as for fused q/k/v: on CPU,
        # SDPA runs MLA's unequal head widths through its math path (tests/models/memory/test_saved_tensors_families.py).
        kv_b_output = e * t * a * (d - arch.qk_rope_head_dim + dv)
        qkv = [Term("attn.q", e * t * a * d), Term("attn.k", e * t * a * d), Term("attn.kv_b_output", kv_b_output)]
    elif attention == "flash":
        qkv = [Term("attn.q", e * t * a * d)]
        qkv += [] if kv_shared else [Term("attn.k", e * t * k * d), Term("attn.v", e * t * k * dv)]
    else:  # eager attention repeats K/V to all heads (HF repeat_kv, Megatron repeat_interleave)
        qk = FP32 if arch.eager_scores_fp32 and kernels == "eager" else e  # GPT-J scores fp32 copies of q and k
        # (a KV-shared layer too: matmul copies the earlier layer's transposed keys and its values into its own
        # batched operands, which it keeps; measured on Gemma 4's)
        qkv = [Term("attn.q", qk * t * a * d), Term("attn.k_repeated", qk * t * a * d), Term("attn.v_repeated", e * t * a * dv)]
    if arch.attention_gate_per_head:
        # Laguna: softplus(g_proj(x).float()).to(dtype), one value per head, times the output: softplus keeps its fp32
        # input, the product the cast and the ungated output (measured: test_saved_tensors_families.py)
        qkv.append(Term("attn.output_gate", FP32 * t * a + e * t * a + e * t * a * dv))
    elif arch.attention_output_gate:  # AFMoE: output * sigmoid(gate): the sigmoid and the product (o_proj's input)
        qkv.append(Term("attn.output_gate", 2 * e * t * a * dv))
    if arch.clip_qkv:  # OLMo's q/k/v clamp_ in place: each keeps its input for the clamp's mask (measured)
        qkv.append(Term("attn.clip_qkv_inputs", e * t * (a * d + k * d + k * dv)))
    out = [Term("attn.output", e * t * a * dv)]  # = o_proj input; flash saves this same storage
    # RoPE that concatenates its parts (the rotated and pass-through dims of a partial rotary: GLM-4,
    # GLM-4.5; gpt-oss's halves) makes q a new tensor contiguous in (b, heads, s, d) order
    # (GPT-J concatenates q in (b, s, heads, d) order before its transpose: SDPA's output comes back token-major)
    concatenated = (arch.rope_tables == "half" or arch.rope_concatenated
                    or (arch.partial_rotary_factor < 1 and arch.rope_tables != "per_call"))
    # concatenate (Helium rotates its whole head in place: measured, test_saved_tensors_families.py)
    # MLA concatenates q's nope and rope parts of the head-major q_b_proj view (DeepseekV3Attention:
    # torch.cat((q_pass, q_rot), dim=-1)): measured under CPU SDPA's fused kernel where q/k and v are
    # equally wide (tests/models/memory/test_saved_tensors_sparse_attention.py)
    head_major = arch.fused_qkv or concatenated or arch.is_mla
    if head_major and rotated and attention == "flash" and kernels == "eager":
        # RoPE on a view of the fused projection (NeoX, Phi-3), or RoPE that concatenates its parts,
        # writes q head-major, so SDPA's output comes back head-major and reshaping it for the output
        # projection copies it (measured: tests/models/memory/test_saved_tensors_families.py)
        out.append(Term("attn.output_copy", e * t * a * dv))
    if attention == "flash":
        core = [Term("attn.logsumexp", FP32 * t * a, attention_core=True)]
    else:
        fp32_softmax = kernels == "eager" and arch.eager_softmax_fp32
        # gpt-oss's sinks: the softmax runs over s + 1 columns after subtracting the row max, whose
        # int64 argmax autograd keeps (modeling_gpt_oss.eager_attention_forward, measured)
        joined = arch.attention_sinks and not arch.sink_scaling  # a sink column joins the softmax (gpt-oss)
        softmax = b * a * s * (s + joined)
        core = [Term("attn.softmax", (FP32 if fp32_softmax else e) * softmax, attention_core=True)]
        # the eager forward of a model with sinks subtracts the row max on every layer, sinks or not (MiMo-V2-Flash's
        # full layers: modeling_mimo_v2_flash.eager_attention_forward)
        if (joined or arch.local_attention_sinks) and kernels == "eager":
            core.append(Term("attn.sink_max_indices", INT64 * b * a * s, attention_core=True))
        if arch.sink_scaling and kernels == "eager":
            # Granite SWA: output * sigmoid(logsumexp(scores) - sink) in fp32: logsumexp keeps the scores and its result,
            # sigmoid its fp32 result, the product the unscaled output and the cast scale (modular_granite_swa.py
            # eager_attention_forward; measured: test_saved_tensors_families.py)
            core += [Term("attn.sink_logsumexp", e * scores + e * b * a * s, attention_core=True),
                     Term("attn.sink_scale", FP32 * b * a * s + e * b * a * s, attention_core=True),
                     Term("attn.unscaled_output", e * t * a * dv, attention_core=True)]
        if fp32_softmax and e != FP32 and not dropout:
            # the cast back is a new tensor unless activations are fp32; under dropout it feeds the
            # dropout, which keeps only its mask, and the value matmul keeps the dropped copy (measured,
            # Seed-OSS: tests/models/memory/test_saved_tensors_families.py)
            core.append(Term("attn.softmax_cast", e * scores, attention_core=True))
        if arch.attn_logit_softcapping:
            core.append(Term("attn.softcap_tanh", e * scores, attention_core=True))
        if dropout:
            core += [Term("attn.dropout_mask", BOOL * scores, attention_core=True),
                     Term("attn.dropout_output", e * scores, attention_core=True)]
    core += index_mask_terms(arch, attention, x)  # DeepSeek Sparse Attention's top-k mask, saved by masked SDPA
    return qkv + core + out


def _dropout_mask(arch: Architecture, x: Shape, name: str, prob: float) -> list[Term]:
    """A dropout's 1-byte mask of t x h (nn.Dropout at p = 0 returns its input and keeps nothing)."""
    if prob <= 0:
        return []
    return [Term(f"{name}.dropout_mask", BOOL * x.t * arch.hidden_size)]


def _lora(arch: Architecture, x: Shape, adapters: int, rank: int, dropout_inputs: int = 0) -> list[Term]:
    """lora_B saves lora_A's output (e*T*r) per adapter; lora_A shares the base linear's input,
    unless PEFT's lora_dropout > 0: each adapted linear then runs lora_B(lora_A(dropout(x)))
    (peft/tuners/lora/layer.py Linear.forward), so lora_A saves its own dropped-out copy of the input
    and dropout its 1-byte mask (torch native_dropout on CUDA): (e + 1) T x the adapted modules'
    input widths (`dropout_inputs`). A CPU probe of PEFT 0.21.2 saves one e-byte copy per adapted
    module (its CPU dropout keeps no separate bool mask)."""
    if not adapters:
        return []
    terms = [Term("lora.a_outputs", adapters * x.e * x.t * rank)]
    if dropout_inputs:
        terms += [Term("lora.dropout_outputs", x.e * x.t * dropout_inputs),
                  Term("lora.dropout_masks", BOOL * x.t * dropout_inputs)]
    return terms


def layer_terms(
    arch: Architecture, kernels: Kernels, attention: Attention, x: Shape, lora_adapters: int = 0, lora_rank: int = 0,
    group: LayerGroup | None = None, lora_dropout_inputs: int = 0, compiled: bool = False,
) -> list[Term]:
    """Everything one decoder layer (of `group`'s kind; default the last layer's) saves for backward
    with no recompute; `compiled`: the block runs under torch.compile (compiled_block_terms)."""
    group = layer_group(arch, arch.num_layers - 1) if group is None else group
    arch = layer_architecture(arch, group.local)  # a sliding layer's own KV heads and sinks (MiMo-V2-Flash)
    sandwich = arch.norm_position == "sandwich"  # Gemma's extra post-attention / post-feedforward norms
    one_input = arch.parallel_attention_mlp and arch.norms_per_layer == 1  # attention and MLP read one norm
    attn_linears = 1 if arch.fused_qkv else 2 if arch.is_mla else 3 - arch.value_from_key  # Gemma 4's global layers: no v_proj
    if group.kv_shared:  # q_proj alone (Gemma 4's KV-shared layers)
        attn_linears = 1
    if group.linear:  # in_proj_qkvz and in_proj_ba, or Qwen3.5's four projections, read the norm's output
        attn_linears = 4 if arch.linear_split_projections else 2
    mlp_linears = 1 if arch.mlp_kind in NOT_GATED or arch.fused_gate_up else 2
    terms = norm_terms(arch, kernels, x, "attn_norm")
    terms += _linear_inputs(arch, x, "attn", attn_linears + (mlp_linears if one_input else 0))
    if arch.is_mla:
        terms += _mla(arch, kernels, x)
    if group.qk_norm:
        terms += qk_norm_terms(arch, kernels, x, keys=not group.kv_shared)
    terms += [] if group.linear or group.kv_shared else value_norm_terms(arch, kernels, x)
    terms += linear_attention_terms(arch, x) if group.linear else _attention(arch, kernels, attention, x, group.kv_shared)
    rotated = not group.linear and not arch.learned_position_embeddings and not arch.alibi  # no RoPE there
    if arch.rope_tables in PER_LAYER_ROPE and kernels == "eager" and rotated:
        # GLM-4 apply_rotary_pos_emb: cos/sin sliced and repeat_interleaved in every layer; q_rot * cos
        # and rotate_half(q_rot) * sin keep those copies (measured); ERNIE 4.5 rotates q.float(), so its
        # copies are fp32 whatever the activations (measured)
        fp32 = x.autocast or arch.rope_tables == "per_layer_fp32"
        pairs = 2 if arch.rope_tables == "per_call" else 1  # GPT-J's apply_rotary_pos_emb repeats sin/cos for q and for k
        terms.append(Term("rope.cos_sin_copies", 2 * pairs * (FP32 if fp32 else x.e) * x.s * arch.rotary_dim))
    if sandwich:
        terms += norm_terms(arch, kernels, x, "post_attn_norm")
    terms += _dropout_mask(arch, x, "attn_residual", arch.dropout_prob)
    # a MoE block whose router runs on an fp32 copy of its input and has no shared expert keeps no 16-bit copy of it:
    # the experts gather their tokens by index (MiMo-V2-Flash: measured, test_saved_tensors_families.py)
    input_read = not (group.moe and kernels == "eager" and arch.router_fp32 and not arch.shared_expert_intermediate_size
                      and not arch.moe_all_experts)
    if not one_input:
        terms += norm_terms(arch, kernels, x, "mlp_norm", input_saved=not arch.parallel_attention_mlp)
        terms += _linear_inputs(arch, x, "mlp", mlp_linears) if input_read else []
    if group.moe and arch.moe_beside_mlp:
        terms += _moe_beside_mlp(arch, kernels, x)
    else:
        wide = group.kv_shared and arch.double_wide_shared_mlp  # Gemma4TextMLP: twice as wide on the shared layers
        terms += mlp_terms(arch, kernels, x, group.moe, 2 * (arch.dense_intermediate_size or arch.intermediate_size)
                           if wide else None)
    if group.moe and arch.moe_output_norm:  # A.X-K1: AXK1MoE.post_mlp_layernorm on the experts' + shared output
        terms += norm_terms(arch, kernels, x, "moe_output_norm")
    if sandwich:
        terms += norm_terms(arch, kernels, x, "post_mlp_norm")
    terms += _dropout_mask(arch, x, "mlp_residual", arch.dropout_prob)
    terms += _per_layer_input(arch, kernels, x)
    terms += _lora(arch, x, lora_adapters, lora_rank, lora_dropout_inputs)
    return compiled_block_terms(arch, kernels, x, terms) if compiled else terms


def compiled_block_terms(arch: Architecture, kernels: Kernels, x: Shape, terms: list[Term]) -> list[Term]:
    """What a decoder block compiled with torch.compile saves instead (torchtitan apply_compile and
    torchtune compile_model compile each block; inductor's min-cut partitioner decides what the
    backward reads and recomputes the rest). Measured with torch 2.13 / inductor on CPU, saved-tensor
    hooks on torchtitan's Llama block (RMSNorm, complex RoPE, SDPA, SwiGLU; bf16; h 256-512, f 512-1024,
    tests/models/memory/test_compile.py): per token 16h + 6f + 4a + 8 bytes compiled against eager's
    28h + 8f + 4a + 8 (K/V repeated to every head, as torchtitan's repeat_kv does). Each pre-norm
    RMSNorm keeps only its fp32 rsqrt and its 16-bit output (which the linears read) instead of its
    fp32 copies; the block keeps its input and the attention's output projection, from which the
    backward recomputes both norms' inputs; SwiGLU keeps gate, up and their product (3 f-wide, not
    4). For the Hugging Face layer: T (8h + 4ad + 4kd + 6f + 4a + 8) against eager's
    T (16h + 4ad + 4kd + 8f + 4a + 8) (bf16, SDPA). Parts not measured keep their eager terms: other
    norm kinds, QK norms, MoE experts, autocast (fp32 weights), fused kernels."""
    if kernels != "eager" or x.autocast or arch.norm_kind != "rmsnorm" or arch.parallel_attention_mlp:
        return terms
    fused_norm = {f"{norm}.{part}" for norm in ("attn_norm", "mlp_norm") for part in ("input_fp32", "normed")}
    compiled = [term for term in terms if term.name not in fused_norm]
    compiled = [Term("mlp.gate_up_product", term.num_bytes * 3 // 4)  # of gate, up, act(gate), product
                if term.name == "mlp.gate_up_act_product" and arch.mlp_kind in ("swiglu", "geglu") else term
                for term in compiled]
    residual = x.e * x.t * arch.hidden_size
    return compiled + [Term("attn_norm.block_input", residual), Term("mlp_norm.attn_output", residual)]


def linear_input_bytes(arch: Architecture, x: Shape, group: LayerGroup | None = None) -> int:
    """Bytes of the distinct inputs of one decoder layer's linears (of `group`'s kind): the attention
    input (the norm's output, shared by q/k/v and, with parallel attention + MLP on one norm, by the
    MLP), MLA's q_b / kv_b latents, the output projection's input (a * dv), the MLP input and its
    down projection's input (f; MoE: the K routed copies of the token, h wide, gathered per expert as
    litgpt's LLaMAMoE `expert(x[token_idx])` does, and their K f-wide down inputs, plus a shared
    expert's f). What a layer keeps when every linear keeps its input (quantised linears of
    bitsandbytes before 0.43.2: models/memory/beyond_saved.py held_inputs_bytes)."""
    group = layer_group(arch, arch.num_layers - 1) if group is None else group
    h = arch.hidden_size
    one_input = arch.parallel_attention_mlp and arch.norms_per_layer == 1
    output = linear_attention_widths(arch)[1] if group.linear else arch.num_attention_heads * arch.value_head_dim
    width = h + output + (0 if one_input else h)
    if arch.is_mla:
        width += arch.q_lora_rank + arch.kv_lora_rank
    if group.moe:
        width += arch.experts_per_token * (h + arch.intermediate_size) + arch.shared_expert_intermediate_size
    else:
        width += arch.dense_intermediate_size or arch.intermediate_size
    return x.e * x.t * width


def embedding_terms(arch: Architecture, x: Shape) -> list[Term]:
    terms = [Term("embedding.token_ids", INT64 * x.t)]
    if arch.embedding_norm:  # nanochat normalises the embedding before the first layer (its final norm's module)
        terms += norm_terms(arch, "eager", x, "embedding_norm")
    if arch.per_layer_input_width:
        # Gemma 4's per-layer inputs (Gemma4TextModel.project_per_layer_inputs): per_layer_model_projection keeps the
        # scaled token embedding, per_layer_projection_norm normalises each layer's slice (num_layers rows a token), and
        # the layers keep the mixed per-layer inputs, one tensor (measured: test_saved_tensors_families.py "gemma4_e")
        width = arch.num_layers * arch.per_layer_input_width
        terms += ([Term("per_layer_input.projection_input", x.e * x.t * arch.hidden_size)]
                  + norm_terms(arch, "eager", x, "per_layer_projection_norm", width, rows=arch.num_layers)
                  + [Term("per_layer_input.inputs", x.e * x.t * width)])
    if arch.learned_position_embeddings:
        terms.append(Term("embedding.position_ids", INT64 * x.s))
    return terms + _dropout_mask(arch, x, "embedding", arch.embedding_dropout)


def shared_terms(arch: Architecture, x: Shape, kernels: Kernels = "eager") -> list[Term]:
    """Saved once for the whole model: RoPE's cos and sin, computed once and used by every layer; MPT's boolean causal
    mask, which every layer's masked_fill keeps (measured)."""
    mask = [Term("attn.causal_mask", BOOL * x.b * x.s * x.s)] if arch.mask_kept and kernels == "eager" else []
    if arch.learned_position_embeddings or arch.alibi or (arch.rope_tables in PER_LAYER_ROPE and kernels == "eager"):
        return mask  # GLM-4 and ERNIE 4.5 keep each layer's own RoPE copies instead (layer_terms)
    rope_bytes = FP32 if x.autocast else x.e
    width = arch.rotary_dim // 2 if arch.rope_tables == "half" else arch.rotary_dim  # gpt-oss: emb = freqs
    terms = [Term("rope.cos_sin", 2 * rope_bytes * x.s * width)]
    local = layer_architecture(arch, True)
    if arch.local_attention != "none" and local.rotary_dim != arch.rotary_dim:
        # local layers rotating another width have a table of their own (Gemma 4's 256-wide sliding heads beside its
        # 512-wide full ones: Gemma4TextRotaryEmbedding, one inv_freq per layer type; measured)
        terms.append(Term("rope.local_cos_sin", 2 * rope_bytes * x.s * local.rotary_dim))
    return terms + mask


def output_terms(arch: Architecture, kernels: Kernels, x: Shape) -> list[Term]:
    """Final norm, lm_head input and the loss's saved fp32 log-probabilities and targets."""
    t, v = x.t, arch.logits_width
    terms = norm_terms(arch, kernels, x, "final_norm") + [Term("lm_head.input", x.e * t * arch.hidden_size)]
    # At b = 1 the shifted targets are a view of the (s + 1)-long padded labels (measured).
    targets = INT64 * (t + 1 if x.b == 1 else t)
    terms += [Term("loss.log_probs_fp32", FP32 * t * v), Term("loss.targets", targets),
              Term("loss.total_weight", FP32)]
    if arch.final_logit_softcapping and kernels == "eager":
        terms.append(Term("loss.softcap_tanh", x.e * t * v))
    if kernels == "eager":  # HF returns the logits in the model output; a training loop holds it
        terms.append(Term("output.logits", x.e * t * v))
    return terms


def loss_backward_extra_bytes(arch: Architecture, kernels: Kernels, x: Shape) -> int:
    """Temporaries at the start of backward, in the loss.

    eager: cross_entropy's backward allocates the fp32 gradient of the log-probabilities and of the
    fp32 logits (2 x 4Tv), measured with MemTracker (peak = post-forward + 8Tv - 8T).
    fused: Megatron's cross entropy writes its gradient into the saved softmax in place and casts it
    to 16-bit for the output layer's backward: e*T*v.
    """
    if kernels == "eager":
        return 2 * FP32 * x.t * arch.logits_width
    return x.e * x.t * arch.logits_width


def xielu_note(arch: Architecture) -> str | None:
    """What the estimate of an xIELU model (Apertus) assumes runs (None for other models)."""
    if arch.mlp_kind != "xielu":
        return None
    return (f"{arch.name}'s xIELU MLP is estimated as transformers' Python formula, its default; the optional xielu "
            "CUDA kernel keeps other tensors (not modelled)")
