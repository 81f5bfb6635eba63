"""Exact parameter counts, matrix by matrix, as Hugging Face transformers builds each architecture.

The counts follow the parts of models/catalogue_schema.Architecture, never the family name; the
family only names the modules (module_names.py: the attribute names of transformers'
`modeling_<type>.py`, which PEFT's `target_modules` match). Layouts (transformers 5.24):
- attention: q/k/v/o_proj (q: h -> a*d, k,v: h -> kv*d, o: a*dv -> h), or one fused q/k/v
  projection (GPT-2 `c_attn`, GPT-NeoX / Falcon `query_key_value`, Phi-3 `qkv_proj`); MLA
  (DeepSeek-V2/V3 `modeling_deepseek_v3.py`): q_a_proj (h -> r_q) + q_a_layernorm + q_b_proj
  (r_q -> a*d), or q_proj when q_lora_rank is 0; kv_a_proj_with_mqa (h -> r_kv + d_rope) +
  kv_a_layernorm + kv_b_proj (r_kv -> a*(d - d_rope + dv)); o_proj (a*dv -> h).
- QK norms: per head_dim (Qwen3, Gemma 3: 2d weights), over the whole width (OLMo 2: (a + kv)*d),
  or an unweighted L2 norm (Llama 4).
- MLP: gate/up (h -> f) and down (f -> h), one fused gate_up (Phi-3, GLM-4), or up/down for an
  ungated MLP. MoE layers: a router (h -> E), E experts (gate, up, down each, or one fused gate_up:
  gpt-oss `experts.gate_up_proj` [E, h, 2f]), and an optional shared expert MLP; the router and
  the experts carry biases only with `moe_bias` (gpt-oss `router.bias`, `gate_up_proj_bias`,
  `down_proj_bias`); MoE models may keep dense layers (first_dense_layers, moe_layer_interval)
  whose MLP width is dense_intermediate_size.
- norms: norms_per_layer of them (LayerNorm weight + bias, RMSNorm a weight); a final norm;
  lm_head unless tied. Attention sinks (gpt-oss `self_attn.sinks`): one parameter per head.
- Gated DeltaNet layers (Qwen3-Next, Qwen3.5: every layer but each full_attention_every-th): in_proj_qkvz
  (h -> 2 key + 2 value) and in_proj_ba (h -> 2 value heads), or in_proj_qkv / _z / _b / _a apart, and
  out_proj, without biases; a depthwise conv over q/k/v, dt_bias, A_log and the gated norm's weight.
  Their full-attention layers' q_proj emits the output gate too (attention_gate_in_q: h -> 2 a d).
- DeepSeek Sparse Attention (DeepSeek-V3.2 `modeling_deepseek_v32.py` DeepseekV32Indexer, GLM-5
  `modeling_glm_moe_dsa.py` GlmMoeDsaIndexer): every layer's lightning indexer, wq_b (q_lora_rank ->
  index heads x index head width), wk (h -> index head width), k_norm (a LayerNorm: weight and bias)
  and weights_proj (h -> index heads), none with a bias (indexer_params). transformers runs the
  indexer under torch.no_grad, so no FLOPs of backward and no LoRA target (models/time/flops.py).
- a multimodal checkpoint's vision tower and projector (Architecture.vision_params,
  models/catalogue/hf_vision.py): counted in the total beside the embedding, never active.
Tests compare every catalogue row against counts from transformers itself (tests/golden_params.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from vramplan.models.architecture.module_names import NOT_GATED, module_name
from vramplan.models.core.catalogue_schema import Architecture


@dataclass(frozen=True)
class LinearModule:
    """One weight matrix of a decoder layer, named as Hugging Face names it (PEFT target names)."""

    name: str
    in_features: int
    out_features: int
    has_bias: bool
    copies_per_layer: int = 1  # MoE experts repeat the expert matrices
    # Row-parallel under TP (Megatron RowParallelLinear, torchtitan RowwiseParallel: the attention
    # output and the MLP's down projection): each rank holds in / tp rows and outputs the full-width
    # partial sum; every other projection is column-parallel (out / tp per rank).
    row_parallel: bool = False

    @property
    def num_params(self) -> int:
        return self.copies_per_layer * (self.in_features * self.out_features + self.has_bias * self.out_features)


@dataclass(frozen=True)
class LayerGroup:
    """Decoder layers that are built alike: `count` of them, in a model of several kinds."""

    count: int
    moe: bool  # routed experts (else a dense MLP)
    local: bool  # sliding-window / chunked attention (else global)
    qk_norm: bool
    modules: tuple[LinearModule, ...]
    linear: bool = False  # Gated DeltaNet linear attention (else softmax attention)
    indexed: bool = False  # runs a DeepSeek Sparse Attention indexer of its own (else none, or another layer's top-k)
    kv_shared: bool = False  # reads an earlier layer's keys and values: no k/v projections or norms (Gemma 4 E2B / E4B)

    @property
    def key(self) -> LayerKey:
        return (self.moe, self.local, self.qk_norm, self.linear, self.indexed, self.kv_shared)


# (moe, local, qk_norm, linear, indexed, kv_shared): what makes two layers alike
LayerKey = tuple[bool, bool, bool, bool, bool, bool]


@lru_cache(maxsize=256)
def _local_architecture(arch: Architecture) -> Architecture:
    return arch.model_copy(update={"num_kv_heads": arch.local_kv_heads or arch.num_kv_heads,
                                   "num_attention_heads": arch.local_attention_heads or arch.num_attention_heads,
                                   "head_dim": arch.local_head_dim or arch.head_dim,
                                   "value_from_key": False,  # Gemma 4: v = k on the global layers only
                                   "partial_rotary_factor": arch.local_partial_rotary_factor or arch.partial_rotary_factor,
                                   "attention_sinks": arch.attention_sinks or arch.local_attention_sinks})


def has_local_attention_shape(arch: Architecture) -> bool:
    """The local (sliding-window) layers' attention differs from the global layers' in heads, head width, RoPE share,
    sinks or values of their own (Gemma 4's v_proj, which its global layers do without)."""
    return bool(arch.local_kv_heads or arch.local_attention_heads or arch.local_head_dim
                or arch.local_partial_rotary_factor or arch.local_attention_sinks
                or (arch.value_from_key and arch.local_attention != "none"))


def layer_architecture(arch: Architecture, local: bool) -> Architecture:
    """The architecture as the layers of one attention kind are built: a local (sliding-window) layer with its own
    heads, RoPE share or sinks (MiMo-V2-Flash: MiMoV2FlashAttention doubles the KV heads and adds sinks on its
    sliding layers; Laguna: num_attention_heads_per_layer and a rope_parameters per layer type) reads as a copy with
    those; every other layer, and every layer of a model whose kinds agree, reads `arch`."""
    if local and has_local_attention_shape(arch):
        return _local_architecture(arch)
    return arch


def _attention_modules(arch: Architecture) -> tuple[LinearModule, ...]:
    h, a, k, d = arch.hidden_size, arch.num_attention_heads, arch.num_kv_heads, arch.head_dim
    dv = arch.value_head_dim
    name = lambda role: module_name(arch, role)  # noqa: E731
    out = LinearModule(name("o"), a * dv, h, has_bias=arch.attention_out_bias, row_parallel=True)
    if arch.is_mla:
        if arch.q_lora_rank:
            q: tuple[LinearModule, ...] = (LinearModule(name("q_a"), h, arch.q_lora_rank, has_bias=arch.qkv_bias),
                 LinearModule(name("q_b"), arch.q_lora_rank, a * d, has_bias=False))
        else:
            q = (LinearModule(name("q"), h, a * d, has_bias=False),)
        rope = arch.qk_rope_head_dim
        kv = (LinearModule(name("kv_a"), h, arch.kv_lora_rank + rope, has_bias=arch.qkv_bias),
              LinearModule(name("kv_b"), arch.kv_lora_rank, a * (d - rope + dv), has_bias=False))
        return q + kv + (out,)
    if arch.fused_qkv:
        return (LinearModule(name("qkv"), h, (a + 2 * k) * d, has_bias=arch.qkv_bias), out)
    # AFMoE's self_attn.gate_proj: sigmoid(gate_proj(x)) scales the attention output before o_proj; Qwen3-Next's
    # and Qwen3.5's q_proj emits it beside the query (h -> 2 a d: Qwen3NextAttention.q_proj)
    separate_gate = arch.attention_output_gate and not arch.attention_gate_in_q
    gate_width = a if arch.attention_gate_per_head else a * dv  # Laguna's g_proj: one gate per head
    gate = (LinearModule(name("attn_gate"), h, gate_width, has_bias=False),) if separate_gate else ()
    return (
        LinearModule(name("q"), h, a * d * (2 if arch.attention_gate_in_q else 1), has_bias=arch.qkv_bias),
        LinearModule(name("k"), h, k * d, has_bias=arch.qkv_bias),
        *(() if arch.value_from_key else (LinearModule(name("v"), h, k * dv, has_bias=arch.qkv_bias),)),
        *gate,
        out,
    )


def linear_attention_widths(arch: Architecture) -> tuple[int, int]:
    """(key width, value width) of a Gated DeltaNet layer: key heads x key head width, value heads x value head width."""
    return (arch.linear_key_heads * arch.linear_key_head_dim, arch.linear_value_heads * arch.linear_value_head_dim)


def _linear_attention_modules(arch: Architecture) -> tuple[LinearModule, ...]:
    """A Gated DeltaNet layer's matrices, none with a bias: Qwen3-Next's in_proj_qkvz (h -> 2 key + 2 value:
    q, k, v and the output gate z) and in_proj_ba (h -> 2 value heads: beta and the decay's a), or
    Qwen3.5's in_proj_qkv, in_proj_z, in_proj_b and in_proj_a; and out_proj (value -> h)."""
    if not arch.has_linear_attention:
        return ()
    h, heads = arch.hidden_size, arch.linear_value_heads
    key, value = linear_attention_widths(arch)
    name = lambda role: module_name(arch, role)  # noqa: E731
    out = LinearModule(name("linear_out"), value, h, has_bias=False, row_parallel=True)
    if arch.linear_split_projections:
        return (LinearModule(name("linear_qkv"), h, 2 * key + value, has_bias=False),
                LinearModule(name("linear_z"), h, value, has_bias=False),
                LinearModule(name("linear_b"), h, heads, has_bias=False),
                LinearModule(name("linear_a"), h, heads, has_bias=False), out)
    return (LinearModule(name("linear_qkvz"), h, 2 * key + 2 * value, has_bias=False),
            LinearModule(name("linear_ba"), h, 2 * heads, has_bias=False), out)


@lru_cache(maxsize=256)
def attention_module_names(arch: Architecture) -> frozenset[str]:
    """The names of a layer's attention matrices, softmax or linear (the others are its MLP's or MoE's)."""
    return frozenset(m.name for m in _attention_modules(arch) + _linear_attention_modules(arch))


def _mlp_modules(arch: Architecture, width: int, bias: bool, prefix: str = "") -> tuple[LinearModule, ...]:
    h = arch.hidden_size
    name = lambda role: prefix + module_name(arch, role)  # noqa: E731
    down = LinearModule(name("down"), width, h, has_bias=bias, row_parallel=True)
    if arch.mlp_kind in NOT_GATED:
        return (LinearModule(name("up"), h, width, has_bias=bias), down)
    if arch.fused_gate_up:
        return (LinearModule(name("gate_up"), h, 2 * width, has_bias=bias), down)
    return (LinearModule(name("gate"), h, width, has_bias=bias), LinearModule(name("up"), h, width, has_bias=bias), down)


def _moe_modules(arch: Architecture) -> tuple[LinearModule, ...]:
    h, f, experts = arch.hidden_size, arch.intermediate_size, arch.num_experts
    name = lambda role: module_name(arch, role)  # noqa: E731
    bias = arch.moe_bias
    router = LinearModule(name("router"), h, experts, has_bias=bias)
    if arch.fused_gate_up:
        gate_up: tuple[LinearModule, ...] = (
            LinearModule(name("expert_gate_up"), h, 2 * f, has_bias=bias, copies_per_layer=experts),)
    else:
        gate_up = (LinearModule(name("expert_gate"), h, f, has_bias=bias, copies_per_layer=experts),
                   LinearModule(name("expert_up"), h, f, has_bias=bias, copies_per_layer=experts))
    modules = (router, *gate_up, LinearModule(name("expert_down"), f, h, has_bias=bias, copies_per_layer=experts))
    if arch.shared_expert_intermediate_size:
        modules += _mlp_modules(arch, arch.shared_expert_intermediate_size, False, module_name(arch, "shared") + ".")
    if arch.shared_expert_gate:  # Qwen2MoeSparseMoeBlock.shared_expert_gate: nn.Linear(h, 1, bias=False)
        modules += (LinearModule(name("shared_gate"), h, 1, has_bias=False),)
    return modules


def _per_layer_input_modules(arch: Architecture) -> tuple[LinearModule, ...]:
    """Gemma 4's per-layer input embeddings in each layer (Gemma4TextDecoderLayer): per_layer_input_gate (h -> width)
    and per_layer_projection (width -> h), without biases."""
    width = arch.per_layer_input_width
    if not width:
        return ()
    return (LinearModule("per_layer_input_gate", arch.hidden_size, width, has_bias=False),
            LinearModule("per_layer_projection", width, arch.hidden_size, has_bias=False, row_parallel=True))


def per_layer_input_params(arch: Architecture) -> int:
    """The model-level part of Gemma 4's per-layer input embeddings (Gemma4TextModel): embed_tokens_per_layer (vocab x
    num_layers x width), per_layer_model_projection (h -> num_layers x width, no bias) and per_layer_projection_norm
    (width); 0 without them."""
    width, layers = arch.per_layer_input_width, arch.num_layers
    if not width:
        return 0
    return arch.per_layer_input_vocab * layers * width + arch.hidden_size * layers * width + norm_params(arch, width)


def _layer_key(arch: Architecture, index: int) -> LayerKey:
    local, linear = arch.layer_is_local(index), arch.layer_is_linear(index)
    # a Gated DeltaNet layer has no q/k norm: its q and k are L2-normalised inside the kernel
    qk_norm = (arch.qk_norm != "none" and not linear
               and (local or arch.qk_norm_on_global_layers or arch.local_attention == "none"))
    return arch.layer_is_moe(index), local, qk_norm, linear, arch.layer_has_indexer(index), arch.layer_is_kv_shared(index)


@lru_cache(maxsize=256)
def layer_groups(arch: Architecture) -> tuple[LayerGroup, ...]:
    """The kinds of decoder layer, in order of first appearance, with how many there are."""
    counts: dict[LayerKey, int] = {}
    for index in range(arch.num_layers):
        key = _layer_key(arch, index)
        counts[key] = counts.get(key, 0) + 1
    linear_attention = _linear_attention_modules(arch)
    dense = _mlp_modules(arch, arch.dense_intermediate_size or arch.intermediate_size, arch.linear_bias)
    groups = []
    for (moe, local, qk_norm, linear, indexed, kv_shared), count in counts.items():
        attention = linear_attention if linear else _attention_modules(layer_architecture(arch, local))
        if kv_shared:  # Gemma4TextAttention builds no k_proj / v_proj where it reuses an earlier layer's keys and values
            own = {module_name(arch, "k"), module_name(arch, "v")}
            attention = tuple(m for m in attention if m.name not in own)
        mlp = dense
        if kv_shared and arch.double_wide_shared_mlp:  # Gemma4TextMLP: intermediate_size x 2 on the shared layers
            mlp = _mlp_modules(arch, 2 * (arch.dense_intermediate_size or arch.intermediate_size), arch.linear_bias)
        # Gemma 4's MoE layers keep their dense MLP beside the experts (moe_beside_mlp)
        modules = attention + ((mlp if arch.moe_beside_mlp else ()) + _moe_modules(arch) if moe else mlp)
        modules += _per_layer_input_modules(arch)
        groups.append(LayerGroup(count=count, moe=moe, local=local, qk_norm=qk_norm, modules=modules, linear=linear,
                                 indexed=indexed, kv_shared=kv_shared))
    return tuple(groups)


def layer_group(arch: Architecture, index: int) -> LayerGroup:
    key = _layer_key(arch, index)
    return next(g for g in layer_groups(arch) if g.key == key)


@lru_cache(maxsize=4096)
def layer_group_counts(arch: Architecture, start: int, stop: int) -> tuple[tuple[LayerGroup, int], ...]:
    """The kinds of decoder layer among layers [start, stop), with how many of each (in order of
    first appearance). Cached: the solver asks it for every pipeline rank of every layout, and a
    LayerGroup is costly to hash, so the counting is keyed by the layer's kind flags instead."""
    by_key = {g.key: g for g in layer_groups(arch)}
    held: dict[LayerKey, int] = {}
    for index in range(start, stop):
        key = _layer_key(arch, index)
        held[key] = held.get(key, 0) + 1
    return tuple((by_key[key], count) for key, count in held.items())


@lru_cache(maxsize=256)
def layer_linear_modules(arch: Architecture) -> tuple[LinearModule, ...]:
    """The linear (matmul) modules of the last decoder layer (a MoE layer in a MoE model), in forward order."""
    return layer_group(arch, arch.num_layers - 1).modules


def norm_params(arch: Architecture, width: int | None = None) -> int:
    """Parameters of one norm: LayerNorm has weight and bias, RMSNorm (and Cohere's LayerNorm) a weight,
    OLMo 1's LayerNorm none."""
    width = arch.hidden_size if width is None else width
    return {"layernorm": 2 * width, "layernorm_noparams": 0, "rmsnorm_noparams": 0}.get(arch.norm_kind, width)


XIELU_PARAMS = 2  # transformers activations.py XIELUActivation: alpha_p and alpha_n, one value each


def indexer_params(arch: Architecture) -> int:
    """One layer's DeepSeek Sparse Attention indexer (0 without one): wq_b, wk, the LayerNorm k_norm
    (weight and bias, whatever the model's norm kind: nn.LayerNorm(index_head_dim)) and weights_proj."""
    if not arch.has_indexer:
        return 0
    heads, width = arch.index_heads, arch.index_head_dim
    return arch.q_lora_rank * heads * width + arch.hidden_size * width + 2 * width + arch.hidden_size * heads


def layer_norm_params(arch: Architecture, group: LayerGroup) -> int:
    """Parameters of one layer outside its linears: its block norms, MLA's two latent norms, QK
    norms, attention sinks (one per head), an xIELU activation's two scalars and a DeepSeek Sparse Attention indexer (indexer_params:
    matrices too, but outside the linears LoRA adapts and FLOPs count twice for the backward); a
    Gated DeltaNet layer's depthwise convolution over q, k and v (conv_dim x kernel, no bias), dt_bias
    and A_log (one per value head) and the gated RMSNorm's weight (one value head wide, shared by the
    heads: Qwen3NextRMSNormGated(head_v_dim))."""
    if group.linear:
        key, value = linear_attention_widths(arch)
        return (arch.norms_per_layer * norm_params(arch) + (2 * key + value) * arch.linear_conv_kernel
                + 2 * arch.linear_value_heads + arch.linear_value_head_dim)
    shape = layer_architecture(arch, group.local)  # the layer kind's heads and sinks (MiMo-V2-Flash: sinks on sliding only)
    total = (arch.norms_per_layer * norm_params(arch) + shape.attention_sinks * shape.num_attention_heads
             + indexer_params(arch) * group.indexed + XIELU_PARAMS * (arch.mlp_kind == "xielu")
             + norm_params(arch) * (group.moe and arch.moe_output_norm)
             # Gemma 4: the dense MLP's post-norm, the experts' pre- and post-norm, router.scale (one per channel) and
             # router.per_expert_scale (Gemma4TextDecoderLayer, Gemma4TextRouter)
             + (3 * norm_params(arch) + arch.hidden_size + arch.num_experts) * (group.moe and arch.moe_beside_mlp)
             + arch.num_experts * (group.moe and arch.router_correction_parameter))  # Laguna's e_score_correction_bias
    if arch.is_mla:
        total += norm_params(arch, arch.kv_lora_rank) + (norm_params(arch, arch.q_lora_rank) if arch.q_lora_rank else 0)
    if group.qk_norm and arch.qk_norm != "l2":  # one head_dim weight for q and one for k, or one per head and channel
        kv = 0 if group.kv_shared else 1  # a KV-shared layer has no k_norm (Gemma4TextAttention)
        weights = ((1 + kv) * shape.head_dim if arch.qk_norm == "head"
                   else (shape.num_attention_heads + kv * shape.num_kv_heads) * shape.head_dim)
        total += weights * (1 + arch.qk_norm_bias)  # Phi's nn.LayerNorm(head_dim): a bias beside the weight
    total += norm_params(arch) * bool(arch.per_layer_input_width)  # Gemma 4's post_per_layer_input_norm
    return total


def _inactive_expert_params(arch: Architecture, group: LayerGroup) -> int:
    per_expert = sum(m.num_params // m.copies_per_layer for m in group.modules if m.copies_per_layer > 1)
    return (arch.num_experts - arch.experts_per_token) * per_expert if group.moe else 0


@dataclass(frozen=True)
class ParamCounts:
    """Exact parameter counts of one architecture."""

    embedding: int  # token embedding (+ learned position embedding)
    per_layer: int  # decoder layer 0
    per_layer_linear: int  # of which matmul weights and their biases
    num_layers: int
    final_norm: int
    lm_head: int  # 0 when tied to the token embedding
    inactive_per_layer: int  # MoE: expert parameters a token does not use, in layer 0
    layers: int  # all decoder layers (= num_layers * per_layer when every layer is alike)
    layers_linear: int  # their matmul weights and biases
    inactive: int  # expert parameters a token does not use, all layers
    vision: int = 0  # a multimodal checkpoint's vision tower and projector (Architecture.vision_params)

    @property
    def total(self) -> int:
        return self.embedding + self.vision + self.layers + self.final_norm + self.lm_head

    @property
    def active(self) -> int:
        """Parameters a token passes through (MoE: only experts_per_token experts; text tokens never
        pass through a vision tower)."""
        return self.total - self.inactive - self.vision

    @property
    def blocks_linear(self) -> int:
        """All matmul weights and biases of the decoder layers (what LoRA targets and QLoRA quantises)."""
        return self.layers_linear


@lru_cache(maxsize=256)
def count_params(arch: Architecture) -> ParamCounts:
    h = arch.hidden_size
    groups = layer_groups(arch)
    linear = {g: sum(m.num_params for m in g.modules) for g in groups}
    size = {g: linear[g] + layer_norm_params(arch, g) for g in groups}
    first = layer_group(arch, 0)
    # BLOOM's word_embeddings_layernorm (nanochat's embedding norm is its final norm's module, without parameters)
    embedding = (arch.vocab_size * h + arch.position_embedding_params + per_layer_input_params(arch)
                 + norm_params(arch) * arch.embedding_norm)
    return ParamCounts(
        embedding=embedding,
        per_layer=size[first],
        per_layer_linear=linear[first],
        num_layers=arch.num_layers,
        final_norm=norm_params(arch),
        lm_head=(0 if arch.tie_word_embeddings else arch.logits_width * h) + arch.lm_head_bias * arch.logits_width,
        inactive_per_layer=_inactive_expert_params(arch, first),
        layers=sum(g.count * size[g] for g in groups),
        layers_linear=sum(g.count * linear[g] for g in groups),
        inactive=sum(g.count * _inactive_expert_params(arch, g) for g in groups),
        vision=arch.vision_params,
    )
