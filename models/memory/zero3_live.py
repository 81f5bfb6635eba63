"""DeepSpeed ZeRO-3's live parameters and gradient buckets, as its code holds them.

Read in deepspeedai/DeepSpeed at v0.15.4 (a1b0c35a, the release of PEFT's 2024 ZeRO-3 runs), v0.19.5
(the release launch/deepspeed.py writes for) and HEAD edaa72212 (line numbers: v0.15.4 / HEAD):

Configuration. Where the config sets no value DeepSpeed's own defaults run (runtime/zero/config.py
DeepSpeedZeroConfig L106/L113 reduce_bucket_size 5e8, L205/L215 stage3_prefetch_bucket_size 5e7,
L211/L221 stage3_param_persistence_threshold 1e5, L228/L238 stage3_max_live_parameters 1e9,
L234/L244 stage3_max_reuse_distance 1e9, L95/L102 contiguous_gradients True). vramplan's own
DeepSpeed JSON (launch/deepspeed.py) sets none of these, nor does accelerate's DeepSpeedPlugin
without a config file (huggingface/accelerate v0.27.2 utils/dataclasses.py L688-705: only stage,
offloads and stage3_gather_16bit_weights_on_model_save; PEFT's examples/sft
configs/deepspeed_config*.yaml @ 781cac46), and transformers' "auto" sizes (h*h, 0.9*h*h, 10*h)
replace only keys whose value is "auto" (integrations/deepspeed.py HfTrainerDeepSpeedConfig
trainer_config_finalize `hidden_size_auto_keys = [x for x in ... if self.is_auto(x)]`, `is_auto` is
False for an absent key; accelerate v0.27.2 `fill_match` likewise): the defaults are what runs.

What the parameter coordinator holds gathered (runtime/zero/partitioned_param_coordinator.py):
- a module fetches its own parameters only, `iter_params(module, recurse=z3_leaf_module(module))`
  (fetch_sub_module L292 / L364): every nn.Linear, embedding and norm apart, a PEFT adapter's
  lora_A / lora_B apart from its base_layer; transformers 5's MoE experts are one module of fused
  [E, ...] parameters (DeepseekV3NaiveMoe, MixtralExperts: `gate_up_proj`, `down_proj`), and from
  v0.18.0 the Mixtral / Qwen2-MoE / Qwen3-MoE sparse-MoE block is a ZeRO-3 leaf by default
  (runtime/zero/leaf_module_config.py DEFAULT_LEAF_MODULE_CLASSES, 7d9a2f2bf), fetched whole;
- parameters of at most stage3_param_persistence_threshold elements are `ds_persist`
  (parameter_offload.py mark_persistent_parameters L239-249 / L311-321) and stay gathered all step
  (stage3.py _post_step L2030 `persistent_parameters[0].all_gather`; __params_to_release L509 /
  L640 `if not p.ds_persist`): every norm, and LoRA A/B matrices of r x d up to 1e5 elements;
- after a module's forward or backward its parameters are released unless the trace uses them
  again within max_reuse_distance elements (__params_to_release L503-532 / L634-663) or a prefetch
  already passed their next use (`__most_recent_step_id_param_fetched_for[param] > step_id`): under
  activation checkpointing a layer's recompute is followed by its own backward, so its last
  modules stay gathered through it, and small models stay gathered whole;
- after each fetch it prefetches the trace's next not-gathered parameters until at least
  stage3_prefetch_bucket_size elements (one parameter may overshoot), at most
  stage3_max_live_parameters minus those gathered (L369-401 / L452-484).
`peak_gathered_bytes` replays those rules over one training step's module trace (forward, then the
lm_head's backward and each layer's recompute and backward, last layer first) and returns the most
held at once. The trace holds the modules that own parameters; the containers (decoder layer,
attention, MLP, PEFT's lora.Linear and its dropout) fetch nothing but prefetch too, which only
reaches the max_live cap sooner: replaying an empty fetch after every module leaves the peaks of
the measured rows unchanged. Not modelled: from v0.19.3 (a31eb3165) a frozen parameter fetched in a
checkpoint recompute is attributed to the backward module in flight and held until that module's
backward release (`update_recompute_parameters`, HEAD L34-39 / L389-395); held to the end of the
layer's backward at most, it adds 0.06 GB to the 70B LoRA row's peak and nothing to the QLoRA one.

Gradients (runtime/zero/stage3.py): with contiguous_gradients the optimizer allocates one IPG
bucket of reduce_bucket_size elements in the communication dtype (the 16-bit dtype under bf16 /
fp16, engine.py communication_data_type) when it is built, however few parameters train
(_setup_for_real_optimizer L524-527 `torch.empty(self.reduce_bucket_size, ...)`; HEAD L731-735 one
per communication dtype); each gradient is copied into it and its autograd tensor freed
(__add_grad_to_ipg_bucket L1271-1286); a bucket that would overflow is reduce-scattered first
(reduce_independent_p_g_buckets_and_remove_grads L1262), through reduce_scatter_coalesced's
`torch.cat` of the bucket (runtime/comm/coalesced_collectives.py L102-122), a second bucket-sized
copy, while the arriving gradient is still live. With fewer trainable elements than the bucket
(LoRA) the only reduction is after the backward (the epilogue), when the activations are gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from vramplan.models.architecture.lora import adapted_modules
from vramplan.models.architecture.module_names import module_name
from vramplan.models.architecture.params import (
    LayerGroup,
    LinearModule,
    count_params,
    layer_group,
    layer_norm_params,
)
from vramplan.models.architecture.quantization import quantised_layer_bytes
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.units import ceil_div

REDUCE_BUCKET_ELEMENTS = 500_000_000  # reduce_bucket_size default
PREFETCH_BUCKET_ELEMENTS = 50_000_000  # stage3_prefetch_bucket_size default
PERSISTENCE_THRESHOLD_ELEMENTS = 100_000  # stage3_param_persistence_threshold default
MAX_LIVE_ELEMENTS = 1_000_000_000  # stage3_max_live_parameters default
MAX_REUSE_DISTANCE_ELEMENTS = 1_000_000_000  # stage3_max_reuse_distance default
# The sparse-MoE blocks that are ZeRO-3 leaves by default from v0.18.0 (runtime/zero/leaf_module_config.py
# DEFAULT_LEAF_MODULE_CLASSES, 7d9a2f2bf), matched against Architecture.moe_block_class
DEFAULT_LEAF_MODULE_CLASSES = frozenset({"transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock",
                                         "transformers.models.qwen2_moe.modeling_qwen2_moe.Qwen2MoeSparseMoeBlock",
                                         "transformers.models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeSparseMoeBlock"})


@dataclass(frozen=True)
class Param:
    """One parameter as ZeRO-3 partitions it: ds_numel (elements of its storage, on this TP rank)
    and the bytes it takes gathered."""

    numel: int
    nbytes: int
    trainable: bool


Module = tuple[int, ...]  # the indices (ds_ids) of a module's own parameters


@dataclass(frozen=True)
class Zero3Model:
    """The parameters ZeRO-3 partitions and the forward order of the modules that fetch them."""

    params: tuple[Param, ...]
    layers: tuple[tuple[Module, ...], ...]  # per decoder layer, its fetching modules in forward order
    embedding: tuple[Module, ...]
    lm_head: Module | None  # None: no module beside the embedding's (tied and on the embedding)
    persistent_elements: int  # norms and any other parameter at or under the threshold


class _Builder:
    def __init__(self, weight_bytes: int) -> None:
        self.weight_bytes = weight_bytes
        self.params: list[Param] = []
        self.persistent = 0

    def param(self, numel: int, trainable: bool, nbytes: int | None = None) -> int | None:
        """Register a parameter; None when it is persistent (gathered all step, counted apart)."""
        if numel <= PERSISTENCE_THRESHOLD_ELEMENTS:
            self.persistent += numel
            return None
        self.params.append(Param(numel, self.weight_bytes * numel if nbytes is None else nbytes, trainable))
        return len(self.params) - 1

    def module(self, *ids: int | None) -> Module | None:
        kept = tuple(i for i in ids if i is not None)
        return kept or None


def _linear(b: _Builder, arch: Architecture, job: Job, m: LinearModule, tp: int, trainable: bool) -> list[int | None]:
    """A linear's weight (as its sharded parameter stores it: a 4-bit QLoRA base's packed storage in
    its 16-bit quant_storage dtype, quantization.py quantised_layer_bytes) and bias, TP-sharded."""
    bias = m.copies_per_layer * m.out_features if m.has_bias else 0
    stored = quantised_layer_bytes(arch, job, b.weight_bytes, (m,), 0)
    weight_bytes = (stored - bias * b.weight_bytes) if stored is not None else b.weight_bytes * (m.num_params - bias)
    weight_bytes = ceil_div(weight_bytes, tp)
    return [b.param(ceil_div(weight_bytes, b.weight_bytes), trainable, weight_bytes),
            b.param(ceil_div(bias, tp), trainable) if bias else None]


def _layer(b: _Builder, arch: Architecture, job: Job, group: LayerGroup, tp: int) -> tuple[Module, ...]:
    """One decoder layer's fetching modules in forward order: each linear, then its LoRA A and B
    (PEFT lora.Linear.forward: base_layer, lora_A, lora_B); a MoE layer's experts as one module of
    fused parameters, or its whole block (router, experts, shared experts) where that is a ZeRO-3
    leaf. Norms are persistent (none has more than 1e5 elements)."""
    full = job.method == "full"
    adapted = set() if full else {m.name for m in adapted_modules(arch, job.lora_targets, group.modules)}
    b.persistent += layer_norm_params(arch, group)
    router, shared = module_name(arch, "router"), module_name(arch, "shared") + "."
    leaf_block = group.moe and arch.moe_block_class in DEFAULT_LEAF_MODULE_CLASSES
    modules: list[Module | None] = []
    experts: list[int | None] = []  # the fused experts module (transformers 5: [E, ...] parameters)
    experts_at = -1  # its place in the forward
    block: list[int | None] = []  # the sparse-MoE block where it is a leaf
    for m in group.modules:
        base = _linear(b, arch, job, m, tp, full)
        r = job.lora_rank
        lora = [b.param(m.copies_per_layer * r * m.in_features, True),
                b.param(m.copies_per_layer * m.out_features * r, True)] if m.name in adapted else []
        in_block = group.moe and (m.copies_per_layer > 1 or m.name == router or m.name.startswith(shared))
        if leaf_block and in_block:
            block += base + lora
            continue
        if m.copies_per_layer > 1:
            if experts_at < 0:
                experts_at = len(modules)
                modules.append(None)
            experts += base
        else:
            modules.append(b.module(*base))
        modules += [b.module(i) for i in lora]
    if experts_at >= 0:
        modules[experts_at] = b.module(*experts)
    if block:
        modules.append(b.module(*block))
    return tuple(m for m in modules if m)


@lru_cache(maxsize=512)
def zero3_model(arch: Architecture, job: Job, tp: int, weight_bytes: int) -> Zero3Model:
    b = _Builder(weight_bytes)
    full = job.method == "full"
    h = arch.hidden_size
    embedding = [b.param(ceil_div(arch.vocab_size * h, tp), full)]
    if arch.learned_position_embeddings:
        embedding.append(b.param(ceil_div(arch.max_position_embeddings * h, tp), full))
    if arch.per_layer_input_width:
        # Gemma 4's per-layer inputs: embed_tokens_per_layer and per_layer_model_projection, each a module of its own
        # fetched whole before the first layer (Gemma4TextModel.forward), and per_layer_projection_norm's weight
        width = arch.num_layers * arch.per_layer_input_width
        embedding += [b.param(arch.per_layer_input_vocab * width, full), b.param(h * width, full),
                      b.param(arch.per_layer_input_width, full)]
    layers = tuple(_layer(b, arch, job, layer_group(arch, i), tp) for i in range(arch.num_layers))
    lm_head = b.module(b.param(ceil_div(arch.logits_width * h, tp), full)) if count_params(arch).lm_head else b.module(embedding[0])
    b.persistent += count_params(arch).final_norm
    return Zero3Model(tuple(b.params), layers, tuple(m for m in (b.module(i) for i in embedding) if m), lm_head,
                      b.persistent)


def step_trace(model: Zero3Model, recomputed: int) -> list[Module]:
    """The modules in the order they fetch in one step: the forward, the lm_head's backward, then
    each decoder layer from the last: its recompute (the first `recomputed` layers checkpointed,
    recompute.py recompute_block) and its backward (modules in reverse), the embedding last."""
    head = [model.lm_head] if model.lm_head else []
    trace: list[Module] = [*model.embedding, *(m for layer in model.layers for m in layer), *head, *head]
    for i in range(len(model.layers) - 1, -1, -1):
        if i < recomputed:
            trace += model.layers[i]
        trace += reversed(model.layers[i])
    return trace + list(reversed(model.embedding))


def peak_gathered_bytes(model: Zero3Model, trace: list[Module], prefetch: int = PREFETCH_BUCKET_ELEMENTS,
                        max_live: int = MAX_LIVE_ELEMENTS, reuse: int = MAX_REUSE_DISTANCE_ELEMENTS) -> int:
    """The most non-persistent parameter bytes gathered at once over the trace, replaying
    partitioned_param_coordinator.py with a complete trace: fetch_sub_module (fetch, pop the
    module's own queue entries, prefetch), then release_sub_module (__params_to_release)."""
    params = model.params
    numel = [sum(params[p].numel for p in m) for m in trace]
    after = [0] * (len(trace) + 1)  # elements of the modules before each position
    for i, n in enumerate(numel):
        after[i + 1] = after[i] + n
    next_use = [dict.fromkeys(m, len(trace)) for m in trace]
    seen: dict[int, int] = {}
    for i in range(len(trace) - 1, -1, -1):
        for p in trace[i]:
            next_use[i][p] = seen.get(p, len(trace))
            seen[p] = i
    queue = [(p, step) for step, m in enumerate(trace) for p in sorted(m)]
    head = 0
    recent: dict[int, int] = {}
    gathered: set[int] = set()
    live_numel = live_bytes = peak = 0

    def gather(p: int) -> None:
        nonlocal live_numel, live_bytes
        gathered.add(p)
        live_numel += params[p].numel
        live_bytes += params[p].nbytes

    for step, module in enumerate(trace):
        for p in module:
            if p not in gathered:
                gather(p)
        own = {p for p in module if recent.get(p, -1) < step}
        while own and head < len(queue):  # pop this module's own entries off the fetch queue
            p, used_at = queue[head]
            head += 1
            recent[p] = used_at
            own.discard(p)
        budget = min(max_live - live_numel, prefetch)
        fetching = 0
        while head < len(queue) and fetching < budget:
            p, used_at = queue[head]
            head += 1
            if p not in gathered:
                gather(p)
                fetching += params[p].numel
            recent[p] = max(recent.get(p, -1), used_at)
        peak = max(peak, live_bytes)
        for p in module:  # release: unless prefetch passed its next use or it recurs within `reuse`
            nxt = next_use[step][p]
            if recent.get(p, -1) > step + 1 or (nxt < len(trace) and after[nxt] - after[step + 1] < reuse):
                continue
            gathered.discard(p)
            live_numel -= params[p].numel
            live_bytes -= params[p].nbytes
    return peak


@lru_cache(maxsize=512)
def _peak(arch: Architecture, job: Job, tp: int, weight_bytes: int, recomputed: int) -> int:
    model = zero3_model(arch, job, tp, weight_bytes)
    return peak_gathered_bytes(model, step_trace(model, recomputed))


@dataclass(frozen=True)
class Zero3Live:
    gathered_bytes: int  # the peak of the non-persistent parameters gathered (prefetch included)
    persistent_bytes: int  # parameters under the persistence threshold, gathered all step
    gradient_bytes: int  # the autograd gradient of the largest trainable module, before its bucket copy
    ipg_bucket_bytes: int  # the IPG bucket, and the bucket's reduce-scatter copy when it flushes mid-backward

    @property
    def live_params_bytes(self) -> int:
        return self.gathered_bytes + self.persistent_bytes + self.gradient_bytes


def zero3_live(arch: Architecture, job: Job, plan: Plan, weight_bytes: int, num_trainable: int) -> Zero3Live:
    tp = plan.tp
    model = zero3_model(arch, job, tp, weight_bytes)
    trainable_modules = [sum(model.params[p].numel for p in m if model.params[p].trainable)
                         for layer in {*model.layers} for m in layer] + [model.params[p].numel for m in model.embedding
                                                                        for p in m if model.params[p].trainable]
    if model.lm_head:
        trainable_modules += [sum(model.params[p].numel for p in model.lm_head if model.params[p].trainable)]
    largest = max(trainable_modules, default=0)
    # A mid-backward flush concatenates the bucket (at most its size; a lone oversized gradient whose
    # numel the ranks divide is reduce-scattered in place); none where everything fits one bucket.
    flush = REDUCE_BUCKET_ELEMENTS if num_trainable > REDUCE_BUCKET_ELEMENTS else 0
    # The step without recompute and with every layer re-run, the larger: a recomputed layer keeps its
    # last modules through its backward (tens of MB to a layer's experts more), but the working set
    # stays a term of (tp, pp > 1) like every overhead the solver tabulates per (ZeRO x offload,
    # precision, layout), not per recompute (models/memory/memory_terms.py), so a plan of either
    # kind, or of a partial recompute in between, is counted at the larger.
    return Zero3Live(
        gathered_bytes=max(_peak(arch, job, tp, weight_bytes, 0), _peak(arch, job, tp, weight_bytes, arch.num_layers)),
        persistent_bytes=model.persistent_elements * weight_bytes,
        gradient_bytes=largest * weight_bytes,
        ipg_bucket_bytes=(REDUCE_BUCKET_ELEMENTS + flush) * weight_bytes if num_trainable else 0,
    )
