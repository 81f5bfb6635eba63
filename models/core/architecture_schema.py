"""The architectures catalogue's schema (catalogues/architectures.csv, or a Hugging Face config.json read into
it by models/catalogue/hf_config.py): the parts a transformer decoder is made of and which layers have which.
models/core/catalogue_schema.py holds the GPU and offering schemas and re-exports Architecture."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Literal

from pydantic import Field, model_validator

from vramplan.models.core.architecture_checks import check_architecture
from vramplan.models.core.catalogue_row import CatalogueRow
from vramplan.models.core.numbers import Count, Real

MAX_LAYERS = 1024  # decoder layers an architecture may have


# The parts an architecture is made of (docs/memory-model.md#architectures; models/architecture/params.py
# layer_groups turns them into per-layer kinds). Values name what the implementation computes, not the family:
# - mlp_kind: gelu (one ATen GELU op: nn.GELU, gelu_pytorch_tanh), gelu_new (GPT-2's Python tanh
#   formula), gelu_function (BLOOM's GeLUFunction: the tanh GELU as a Python autograd function keeping its input, its
#   backward built of whole f-wide tensors), relu (not gated: OPT), relu2 (squared ReLU, not gated: Nemotron, Arcee),
#   xielu (Apertus: transformers' Python xIELU, not gated), swiglu / geglu (gated: act(gate) * up).
# - norm_kind: layernorm (weight + bias), layernorm_nobias (Cohere: fp32 mean/var, weight only),
#   layernorm_noparams (OLMo 1: F.layer_norm of an fp32 copy, no weight, no bias), layernorm_weight (MPT: ATen's
#   layer norm with its bias removed),
#   rmsnorm (Llama: fp32 normalise, cast, then * weight), rmsnorm_fp32_weight (OLMo 2: * weight in
#   fp32, then cast), rmsnorm_offset (Gemma: fp32 normalise * (1 + weight), then cast), rmsnorm_noparams
#   (nanochat: x.float() * rsqrt(mean(x^2)), cast, no weight), rmsnorm_pow (Gemma 4: x.float() * pow(mean(x^2) +
#   eps, -0.5) * weight.float(), then cast).
MlpKind = Literal["gelu", "gelu_new", "gelu_function", "relu", "relu2", "xielu", "swiglu", "geglu"]
NormKind = Literal["layernorm", "layernorm_nobias", "layernorm_noparams", "layernorm_weight", "rmsnorm",
                   "rmsnorm_fp32_weight", "rmsnorm_offset", "rmsnorm_noparams", "rmsnorm_pow"]
NormPosition = Literal["pre", "post", "sandwich"]  # before each block, after it (OLMo 2), both (Gemma)
QkNorm = Literal["none", "head", "width", "per_head", "l2"]  # per head_dim with one weight (Qwen3, Gemma 3), whole
# width (OLMo 2), per head_dim with a weight per head (Cohere, StableLM), L2 (Llama 4)
LocalAttention = Literal["none", "sliding", "chunked"]
RopeTables = Literal["shared", "half", "per_layer", "per_layer_fp32", "per_call"]
# Architecture.checkpoint_quantization: the canonical texts models/architecture/quantization.py parses.
_SKIP = r"(:skip(=[A-Za-z0-9_.*|-]+)?)?"  # llm_int8_skip_modules: the entries, or unknown ones
CHECKPOINT_QUANTIZATION = (r"^(|(gptq|awq):[2348]:\d{1,7}|(nf4|fp4)(:dq)?" + _SKIP + "|int8" + _SKIP
                           + r"|mxfp4|fp8(:[1-9]\d{0,6}:[1-9]\d{0,6})?)$")
ModelType = Literal[
    "gpt2", "llama", "mistral", "mixtral", "qwen2", "gemma2", "qwen3", "qwen3_moe", "gemma3", "gemma3_text",
    "phi3", "olmo2", "deepseek_v2", "deepseek_v3", "llama4", "llama4_text", "gpt_neox", "falcon", "cohere",
    "starcoder2", "gpt_oss", "mistral3", "glm4", "granite", "cohere2", "glm4_moe", "smollm3",
    "ministral3", "olmo3", "exaone4", "seed_oss", "ernie4_5", "ernie4_5_moe", "hunyuan_v1_dense", "qwen2_moe", "olmoe",
    "gemma", "glm", "arcee", "nemotron", "granitemoe", "granitemoeshared", "dots1", "minimax_m2", "hunyuan_v1_moe",
    "glm4_moe_lite", "mistral4", "solar_open", "exaone_moe", "jais2", "hy_v3", "phi", "olmo", "afmoe",
    "qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "deepseek_v32", "glm_moe_dsa",
    "ministral", "vaultgemma", "flex_olmo", "youtu", "minicpm3", "apertus", "cwm", "helium", "nanochat", "phimoe", "axk1",
    "mellum", "kolibri1", "stablelm", "mimo_v2_flash", "hyperclovax", "cohere2_moe", "laguna", "opt", "gpt_bigcode", "gptj", "granite_swa",
    "gemma4_text", "gemma4_unified_text", "aria_text", "bloom", "mpt", "gpt_neo",
]


@lru_cache(maxsize=256)
def global_layer_set(text: str) -> frozenset[int]:
    """The layer indices of Architecture.global_layers (space-separated; validated where the row is built)."""
    return frozenset(int(token) for token in text.split())


def local_layer(index: int, has_local: bool, global_every: int, global_first: bool, global_first_layer: bool,
                global_layers: str = "") -> bool:
    """Whether layer `index` attends locally (sliding window / chunk): the rule of Architecture.layer_is_local, for the
    config reader too (it splits per-layer lists by kind before the Architecture exists)."""
    if global_layers:  # an explicit list where no periodic rule gives the pattern
        return has_local and index not in global_layer_set(global_layers)
    position = index if global_first else index + 1
    first = global_first_layer and index == 0
    return has_local and not (global_every and position % global_every == 0) and not first


def local_rule(fields: Mapping[str, Any]) -> tuple[bool, int, bool, bool, str]:
    """local_layer's rule from a dict of Architecture fields (the config reader splits per-layer values by kind before
    the Architecture exists)."""
    return (fields.get("local_attention", "none") != "none", fields.get("global_attention_every", 0),
            fields.get("global_attention_first", False), fields.get("global_first_layer", False),
            fields.get("global_layers", ""))


class Architecture(CatalogueRow):
    """A transformer decoder (one row of catalogues/architectures.csv, or a Hugging Face config.json)."""

    name: str
    model_type: ModelType = Field(description="Hugging Face model_type the row was read as (names its linear modules)")
    num_layers: Count = Field(ge=1, le=MAX_LAYERS)
    hidden_size: Count = Field(ge=1, le=1_000_000)
    num_attention_heads: Count = Field(ge=1, le=65_536)
    num_kv_heads: Count = Field(ge=1, le=65_536)
    head_dim: Count = Field(ge=1, le=65_536, description="query/key head width (MLA: nope + rope part)")
    intermediate_size: Count = Field(ge=1, le=10_000_000, description="MLP width (per expert for MoE)")
    vocab_size: Count = Field(ge=1, le=100_000_000)
    max_position_embeddings: Count = Field(ge=1, le=1_000_000_000)
    tie_word_embeddings: bool
    learned_position_embeddings: bool
    alibi: bool = Field(default=False, description="ALiBi position biases added to the attention scores (BLOOM): no "
                        "RoPE and no learned positions")
    position_embedding_offset: Count = Field(default=0, ge=0, le=1024, description="rows of the learned position table "
                                             "before position 0 (OPT's OPTLearnedPositionalEmbedding: 2); 0 = none")
    qkv_bias: bool
    linear_bias: bool = Field(description="bias on the attention output and MLP linears (GPT-2 style)")
    out_bias: bool | None = Field(default=None, description="bias on the attention output projection where it differs "
                                  "from linear_bias (Seed-OSS's attention_out_bias, Hunyuan's attention_bias); empty = "
                                  "linear_bias")
    mlp_kind: MlpKind
    norm_kind: NormKind
    norms_per_layer: Count = Field(ge=1, le=4)
    dropout_prob: Real = Field(ge=0, lt=1, description="dropout after attention and after the MLP (the residual branches); "
                                                        "also on the embedding and the attention probabilities where "
                                                        "those are not given apart")
    attention_dropout_prob: Real | None = Field(default=None, ge=0, lt=1,
                                                description="dropout on the attention probabilities; empty: dropout_prob")
    embedding_dropout_prob: Real | None = Field(default=None, ge=0, lt=1,
                                                description="dropout on the token embedding; empty: dropout_prob")
    num_experts: Count = Field(ge=1, le=4096, description="routed experts of a MoE layer; 1 for a dense MLP")
    experts_per_token: Count = Field(ge=1, le=4096)
    final_logit_softcapping: Real | None = Field(default=None, gt=0, le=1_000_000)
    norm_position: NormPosition = "pre"
    parallel_attention_mlp: bool = Field(default=False, description="attention and MLP read the same input (GPT-J style)")
    qk_norm: QkNorm = "none"
    qk_norm_on_global_layers: bool = Field(default=True, description="Llama 4 norms q/k only on its RoPE (chunked) layers")
    qk_norm_bias: bool = Field(default=False, description="the QK norms are LayerNorms with a bias beside their weight "
                                                          "(Phi's q_layernorm / k_layernorm)")
    fused_qkv: bool = Field(default=False, description="one q/k/v projection (GPT-2 c_attn, NeoX/Falcon query_key_value, Phi-3 qkv_proj)")
    mask_buffers: bool = Field(default=False, description="every layer registers a causal-mask buffer of "
                               "max_position_embeddings^2 booleans, held on the GPU beside the weights (GPT-Neo's "
                               "GPTNeoSelfAttention.bias)")
    mask_kept: bool = Field(default=False, description="eager attention masks its scores with masked_fill, which keeps "
                            "the boolean causal mask, one [batch, 1, seq, seq] tensor for every layer (MPT)")
    qkv_head_copies: bool = Field(default=False, description="the fused q/k/v projection is reshaped into per-head "
                                  "copies of q, k and v before attention (BLOOM's (batch x heads, seq, head_dim)), which "
                                  "eager attention keeps instead of the projection's output")
    fused_gate_up: bool = Field(default=False, description="one gate/up projection (Phi-3 gate_up_proj)")
    eager_softmax_fp32: bool = Field(default=True, description="eager attention's softmax runs in fp32, then casts")
    eager_scores_fp32: bool = Field(default=False, description="eager attention multiplies fp32 copies of q and k (GPT-J's "
                                                               "eager_attention_forward), which its matmul keeps")
    attn_logit_softcapping: Real | None = Field(default=None, gt=0, le=1_000_000)
    q_lora_rank: Count = Field(default=0, ge=0, le=10_000_000, description="MLA: query down-projection rank; 0 = a full q_proj")
    kv_lora_rank: Count = Field(default=0, ge=0, le=10_000_000, description="MLA: compressed key/value rank; 0 = not MLA")
    qk_rope_head_dim: Count = Field(default=0, ge=0, le=10_000_000, description="MLA: the rotary part of head_dim (shared by all heads)")
    v_head_dim: Count = Field(default=0, ge=0, le=10_000_000, description="value head width when it differs from head_dim; 0 = head_dim")
    value_from_key: bool = Field(default=False, description="the global layers' values are their keys' projection, "
                                 "before the key norm and RoPE: no v_proj (Gemma 4's attention_k_eq_v)")
    value_norm: bool = Field(default=False, description="a weightless RMSNorm over each value head (Gemma 4's v_norm)")
    stored_kv: bool = Field(default=False, description="the last layer of each attention kind hands its keys and values "
                            "to a dict the model holds for the whole step (Gemma 4's shared_kv_states 'store' layers)")
    kv_shared_layers: Count = Field(default=0, ge=0, le=MAX_LAYERS, description="the last N layers reuse the keys and "
                                    "values of the last earlier layer of their attention kind: no k/v projections or "
                                    "norms of their own (Gemma 4 E2B / E4B's num_kv_shared_layers); 0 = none")
    double_wide_shared_mlp: bool = Field(default=False, description="the KV-shared layers' MLP is twice intermediate_size "
                                         "wide (Gemma 4's use_double_wide_mlp)")
    per_layer_input_width: Count = Field(default=0, ge=0, le=65_536, description="per-layer input embeddings (Gemma 4 "
                                         "E2B / E4B's PLE): each layer's slice width of a second embedding table; 0 = none")
    per_layer_input_vocab: Count = Field(default=0, ge=0, le=10_000_000, description="rows of the per-layer input "
                                         "embedding table (vocab_size_per_layer_input); 0 without one")
    local_attention: LocalAttention = "none"
    attention_window: Count = Field(default=0, ge=0, le=10_000_000, description="sliding window / chunk length, tokens; 0 = none")
    global_attention_every: int = Field(
        default=0, ge=0, description="with local attention, layer i attends globally when (i + 1) % this == 0; 0 = never"
    )
    global_attention_first: bool = Field(
        default=False, description="with global_attention_every N: layer i attends globally when i % N == 0 instead, the "
                                   "first of each N (CWM)")
    global_first_layer: bool = Field(
        default=False, description="the first layer attends globally too, beside the last of each global_attention_every "
                                   "(MiMo-V2-Flash)")
    global_layers: str = Field(default="", max_length=1_000_000, description="space-separated indices of the layers that "
                               "attend globally where no periodic rule gives the pattern (a layer_types list); empty = "
                               "the rule of global_attention_every")
    local_kv_heads: Count = Field(default=0, ge=0, le=65_536, description="KV heads of the local (sliding-window) layers "
                                                                          "when they differ from num_kv_heads; 0 = the same")
    local_attention_heads: Count = Field(default=0, ge=0, le=65_536, description="query heads of the local (sliding-window) "
                                         "layers when they differ from num_attention_heads (Laguna); 0 = the same")
    local_head_dim: Count = Field(default=0, ge=0, le=65_536, description="q/k/v head width of the local (sliding-window) "
                                  "layers when it differs from head_dim (Gemma 4: 256 against its global layers' 512); "
                                  "0 = the same")
    partial_rotary_factor: Real = Field(default=1.0, gt=0, le=1, description="share of head_dim that RoPE rotates")
    local_partial_rotary_factor: Real = Field(default=0, ge=0, le=1, description="share of head_dim RoPE rotates on the "
                                              "local layers when it differs from partial_rotary_factor (Laguna); 0 = the same")
    dense_intermediate_size: Count = Field(default=0, ge=0, le=10_000_000,
                                           description="MLP width of the dense layers of a MoE model; 0 = intermediate_size")
    first_dense_layers: Count = Field(default=0, ge=0, le=10_000_000,
                                      description="leading dense layers of a MoE model (DeepSeek first_k_dense_replace)")
    moe_layer_interval: Count = Field(default=1, ge=1, le=10_000_000,
                                      description="layer i is MoE when (i + 1) % this == 0 (Llama 4 interleave step)")
    shared_expert_intermediate_size: Count = Field(default=0, ge=0, le=10_000_000,
                                                   description="width of the always-on shared expert MLP; 0 = none")
    shared_expert_gate: bool = Field(
        default=False, description="the shared expert's output is scaled by sigmoid(a linear h -> 1 of the layer's input) (Qwen2-MoE)")
    router_fp32: bool = Field(default=False, description="the MoE router runs its linear on an fp32 copy of its input (DeepSeek)")
    router_correction_parameter: bool = Field(
        default=False, description="each MoE layer holds a frozen score-correction parameter per expert (Laguna's "
                                   "e_score_correction_bias: an nn.Parameter, counted; elsewhere a buffer)")
    moe_block_class: str | None = Field(
        default=None, description="the Hugging Face class of a MoE layer's sparse block (transformers 5), recorded where a "
                                  "stack reads it: DeepSpeed's ZeRO-3 fetches its default leaf classes whole "
                                  "(models/memory/zero3_live.py); empty: not one of those")
    moe_all_experts: bool = Field(
        default=False, description="eager MoE runs every expert on every token, scaled by its router score (HF Llama 4)"
    )
    moe_output_norm: bool = Field(default=False, description="an RMSNorm on the MoE block's output, in MoE layers only "
                                                           "(A.X-K1's post_mlp_layernorm)")
    moe_beside_mlp: bool = Field(
        default=False, description="a MoE layer runs its dense MLP (dense_intermediate_size) and its routed experts side by "
                                   "side on the residual, each between a pre- and a post-norm of its own, the router "
                                   "reading the residual through a weightless norm, a scale per channel and one per "
                                   "expert (Gemma 4's enable_moe_block)")
    embedding_norm: bool = Field(default=False, description="the token embedding is normed before the first layer "
                                                          "(nanochat: the final norm's module, run twice)")
    attention_sinks: bool = Field(default=False, description="one learned sink logit per head and layer joins the softmax (gpt-oss)")
    local_attention_sinks: bool = Field(default=False, description="attention sinks on the local (sliding-window) layers "
                                                                   "only (MiMo-V2-Flash)")
    sink_scaling: bool = Field(default=False, description="the sinks scale the attention output by sigmoid(logsumexp "
                                                          "- sink) instead of joining the softmax (Granite SWA)")
    moe_bias: bool = Field(default=False, description="the MoE router and every expert linear carry a bias (gpt-oss)")
    clamped_swiglu: bool = Field(
        default=False, description="experts run gpt-oss's clamped GLU on interleaved gate/up: (clamp(up) + 1) * g * sigmoid(1.702 g)"
    )
    router_topk_softmax: bool = Field(default=False, description="the router softmaxes only the top-k logits (gpt-oss)")
    rope_tables: RopeTables = Field(
        default="shared", description="RoPE's cos/sin: one pair for all layers, rotary_dim wide (shared) or rotary_dim / 2 "
                                      "(half: gpt-oss), or copies each layer makes (per_layer: GLM-4; per_layer_fp32: "
                                      "ERNIE 4.5's fp32 interleaved rotation; per_call: GPT-J, a pair for q and one for "
                                      "k, rotated token-major)")
    rope_concatenated: bool = Field(default=False, description="RoPE writes q and k by concatenating their rotated and "
                                    "pass-through parts even where the whole head rotates (GLM-4-MoE's "
                                    "apply_rotary_pos_emb): new tensors in head-major order")
    output_vocab_size: Count = Field(default=0, ge=0, le=100_000_000, description="rows of the output head and width of "
                                     "the logits where the head is pruned below vocab_size (Apertus 1.5's "
                                     "output_vocab_size); 0 = vocab_size")
    lm_head_bias: bool = Field(default=False, description="the output projection carries a bias (Phi-2: PhiForCausalLM)")
    clip_qkv: bool = Field(default=False, description="q, k and v are clamped in place (OLMo, OLMoE clip_qkv): each clamp keeps its input")
    attention_output_gate: bool = Field(
        default=False, description="a gate_proj (h -> heads x head_dim) whose sigmoid scales the attention output before o_proj (AFMoE)")
    attention_gate_per_head: bool = Field(
        default=False, description="the attention_output_gate is softplus(g_proj(x)) in fp32, one value per head "
                                   "(h -> heads: Laguna's gating); else AFMoE's sigmoid per channel")
    full_attention_every: Count = Field(
        default=0, ge=0, le=10_000_000,
        description="with Gated DeltaNet linear attention (Qwen3-Next, Qwen3.5): layer i attends fully when "
                    "(i + 1) % this == 0 and runs linear attention otherwise; 0 = no linear attention")
    linear_key_heads: Count = Field(default=0, ge=0, le=65_536, description="linear attention: query/key heads")
    linear_value_heads: Count = Field(default=0, ge=0, le=65_536,
                                      description="linear attention: value heads (a multiple of the key heads)")
    linear_key_head_dim: Count = Field(default=0, ge=0, le=65_536, description="linear attention: query/key head width")
    linear_value_head_dim: Count = Field(default=0, ge=0, le=65_536, description="linear attention: value head width")
    linear_conv_kernel: Count = Field(default=0, ge=0, le=1024,
                                      description="linear attention: the depthwise causal convolution's width")
    linear_split_projections: bool = Field(
        default=False, description="linear attention projects q/k/v, z, b and a apart (Qwen3.5 in_proj_qkv / _z / _b / "
                                   "_a) rather than as qkvz and ba (Qwen3-Next in_proj_qkvz / in_proj_ba)")
    attention_gate_in_q: bool = Field(
        default=False, description="the attention_output_gate's gate comes out of q_proj (h -> 2 x heads x head_dim: "
                                   "Qwen3-Next, Qwen3.5), not a gate_proj of its own")
    index_heads: Count = Field(
        default=0, ge=0, le=65_536,
        description="DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): the lightning indexer's heads in every layer; "
                    "0 = no indexer")
    index_head_dim: Count = Field(default=0, ge=0, le=65_536, description="DeepSeek Sparse Attention: the indexer's head width")
    index_topk: Count = Field(default=0, ge=0, le=10_000_000,
                              description="DeepSeek Sparse Attention: the keys each query attends to, chosen by the indexer")
    indexer_every: Count = Field(
        default=1, ge=1, le=MAX_LAYERS,
        description="DeepSeek Sparse Attention: layer i runs its own indexer when max(i - indexer_offset + 1, 0) % this "
                    "== 0 (GLM-5 index_topk_freq); the others reuse the previous indexer's top-k")
    indexer_offset: Count = Field(default=0, ge=0, le=MAX_LAYERS,
                                  description="DeepSeek Sparse Attention: GLM-5's index_skip_topk_offset (see indexer_every)")
    vision_params: Count = Field(
        default=0, ge=0, le=10**12,
        description="parameters a multimodal checkpoint loads beside the decoder (its vision tower and projector: "
                    "models/catalogue/hf_vision.py), held with the embedding; no FLOPs (text-only training)")
    checkpoint_quantization: str = Field(
        default="", pattern=CHECKPOINT_QUANTIZATION,
        description="how the checkpoint stores its decoder linears (models/architecture/quantization.py): '' 16-bit, "
                    "gptq:BITS:GROUP, awq:BITS:GROUP, nf4[:dq][:skip[=ENTRY|...]], fp4[:dq][:skip[=ENTRY|...]], "
                    "int8[:skip[=ENTRY|...]], fp8[:ROWS:COLS], mxfp4")
    source: str

    @model_validator(mode="after")
    def _shapes_are_consistent(self) -> Architecture:
        check_architecture(self)  # which combinations of parts are refused: models/core/architecture_checks.py
        return self

    def layer_is_kv_shared(self, index: int) -> bool:
        """A layer reading an earlier layer's keys and values (Architecture.kv_shared_layers)."""
        return index >= self.num_layers - self.kv_shared_layers if self.kv_shared_layers else False

    def __hash__(self) -> int:
        """The name's hash: equal rows have equal names, so this agrees with ==, and rows that share
        a name with other values only compare. The functools caches of models/ are keyed by the
        architecture; pydantic's frozen-model hash hashes all 50 fields
        (docs/performance.md#hashes-of-domain-types)."""
        return hash(self.name)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def attention_dropout(self) -> float:
        return self.dropout_prob if self.attention_dropout_prob is None else self.attention_dropout_prob

    @property
    def embedding_dropout(self) -> float:
        return self.dropout_prob if self.embedding_dropout_prob is None else self.embedding_dropout_prob

    @property
    def attention_out_bias(self) -> bool:
        """Whether the attention's output projection has a bias (linear_bias unless out_bias says otherwise)."""
        return self.linear_bias if self.out_bias is None else self.out_bias

    @property
    def position_embedding_params(self) -> int:
        """The learned position table's parameters (GPT-2, OPT with its offset rows); 0 with RoPE."""
        rows = self.max_position_embeddings + self.position_embedding_offset
        return rows * self.hidden_size if self.learned_position_embeddings else 0

    @property
    def logits_width(self) -> int:
        """Rows of the output head: the logits' and the loss's width (vocab_size unless the head is pruned)."""
        return self.output_vocab_size or self.vocab_size

    @property
    def value_head_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    @property
    def rotary_dim(self) -> int:
        """Channels RoPE rotates per head (MLA: the shared rope part; NeoX: rotary_pct of head_dim)."""
        return self.qk_rope_head_dim if self.is_mla else int(self.head_dim * self.partial_rotary_factor)

    def layer_is_moe(self, index: int) -> bool:
        return self.is_moe and index >= self.first_dense_layers and (index + 1) % self.moe_layer_interval == 0

    @property
    def has_linear_attention(self) -> bool:
        return self.full_attention_every > 0

    def layer_is_linear(self, index: int) -> bool:
        """A Gated DeltaNet layer (not full attention)."""
        return self.has_linear_attention and (index + 1) % self.full_attention_every != 0

    @property
    def has_indexer(self) -> bool:
        """DeepSeek Sparse Attention: a lightning indexer picks the keys each layer's MLA attends to."""
        return self.index_heads > 0

    def layer_has_indexer(self, index: int) -> bool:
        """A DeepSeek Sparse Attention layer that runs its own indexer (GLM-5's "full" layers; the "shared" ones
        reuse the previous full layer's top-k: GlmMoeDsaConfig's indexer_types)."""
        return self.has_indexer and max(index - self.indexer_offset + 1, 0) % self.indexer_every == 0

    def layer_is_local(self, index: int) -> bool:
        return local_layer(index, self.local_attention != "none", self.global_attention_every,
                           self.global_attention_first, self.global_first_layer, self.global_layers)
