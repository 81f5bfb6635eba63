"""The parallel layout of a plan: which layers each pipeline rank holds, and which layouts are valid.

Megatron-Core's rank layout (megatron/core/parallel_state.py): num_gpus = tp * pp * cp * dp, tensor
parallel ranks innermost (one NVLink domain), expert parallelism carved from the dp * cp ranks
(expert_tp = tp, expert_dp = dp * cp / ep). Sequence parallelism only exists with TP: Megatron's
arguments.py turns `--sequence-parallel` off when tp == 1, and so does `sequence_parallel_active`.

Pipeline stages (megatron/core/transformer/transformer_block.py get_num_layers_to_build): rank 0
holds the embedding, rank pp-1 the final norm, the output layer and the loss. When pp does not
divide the layers, the remainder goes one each to the ranks just before the last (never the last,
which also holds lm_head and the loss; rank 0 only once every middle rank has one), the split a
Megatron user writes with --decoder-first/last-pipeline-num-layers. Interleaved 1F1B (vpp > 1)
needs at least vpp layers per rank, and under Megatron-LM vpp equal chunks (EVEN_VIRTUAL_STAGES);
elsewhere the rank's chunks may differ by one layer and a chunk counts layers / vpp on average.
"""

from __future__ import annotations

import itertools
from functools import lru_cache

from vramplan.models.architecture.params import LayerKey, has_local_attention_shape, layer_group_counts
from vramplan.models.core.catalogue_schema import Architecture, GpuSpec
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.layout import split_label
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.stack_behaviour import (
    DEEPEP_DEEPSEEK_ONLY_STACKS,
    EVEN_VIRTUAL_STAGES,
    PP_GROUPED_INTERLEAVING_STACKS,
    TORCH_PIPELINING_STACKS,
)


def sequence_parallel_active(plan: Plan) -> bool:
    return plan.sequence_parallel and plan.tp > 1


Split = tuple[int, ...]  # decoder layers of each pipeline rank, summed over its virtual chunks


@lru_cache(maxsize=4096)
def stage_layers(num_layers: int, pp: int) -> Split:
    """The default split: decoder layers held by each pipeline rank (summed over its virtual chunks)."""
    if pp > num_layers:
        raise VramplanError("pp", pp, f"more pipeline stages than the {num_layers} layers")
    base, extra = divmod(num_layers, pp)
    counts = [base] * pp
    for rank in range(pp - 1 - extra, pp - 1):  # the ranks just before the last
        counts[rank] += 1
    return tuple(counts)


# How far a searched split moves a rank's layers from the middle ranks' count (balanced_splits).
SPLIT_REACH = (2, 1)  # up to 3 fewer, 2 more


def balanced_splits(num_layers: int, pp: int) -> list[Split]:
    """The uneven splits the solver searches besides the default, in Megatron-LM's form: the first
    and the last rank hold their own count (--decoder-first-pipeline-num-layers,
    --decoder-last-pipeline-num-layers), the ranks between them an even share of the rest
    (megatron/core/transformer/transformer_block.py get_num_layers_to_build: the middle ranks'
    layers divide evenly). torchtitan takes any split (module_fqns_per_model_part), so it runs
    these too. The middle ranks hold floor or ceil(layers / pp) each; the first and the last up to
    SPLIT_REACH fewer or more: Llama 3 405B took one layer off each (7, 8 x 14, 7); the first
    rank keeps the most micro-batches in flight under 1F1B (fewer layers: less memory), the last
    runs the output layer and the loss (fewer layers: a shorter slowest stage). The default split
    is not among them. Empty without a pipeline."""
    if pp < 2:
        return []
    fewer, more = SPLIT_REACH
    default, splits = stage_layers(num_layers, pp), []
    for middle in sorted({num_layers // pp, -(-num_layers // pp)}):
        ends = num_layers - (pp - 2) * middle  # the first's and the last's layers together
        for first in range(max(1, middle - fewer), middle + more + 1):
            last = ends - first
            if max(1, middle - fewer) <= last <= middle + more:
                split = (first, *(middle,) * (pp - 2), last)
                if split != default and split not in splits:
                    splits.append(split)
    return splits


def split_of(num_layers: int, pipeline: int | Split) -> Split:
    """A pipeline as its split: a split as given, a pipeline depth as its default split."""
    return stage_layers(num_layers, pipeline) if isinstance(pipeline, int) else tuple(pipeline)


def largest_chunk(num_layers: int, pipeline: int | Split, vpp: int) -> int:
    """The most decoder layers one model chunk (a pipeline rank's virtual stage) holds: what a
    partial full recompute's per-chunk count is measured against (models/memory/recompute.py)."""
    return -(-max(split_of(num_layers, pipeline)) // vpp)


def plan_split(arch: Architecture, plan: Plan) -> Split:
    """The plan's split (Plan.stage_layers: Megatron's --decoder-first/last-pipeline-num-layers or
    --pipeline-model-parallel-layout, torchtitan's module_fqns_per_model_part), else the default."""
    return plan.stage_layers if plan.stage_layers is not None else stage_layers(arch.num_layers, plan.pp)


def _ascii_digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


MAX_SPLIT_RANKS = 1024


def parse_split(text: str) -> Split:
    """'7,8*14,7' (or '7,8,8,...'): the inverse of split_label; a bad cell is a one-line error."""
    split: list[int] = []
    for part in text.replace(" ", "").split(","):
        count, _, times = part.partition("*")
        # ASCII digits only (str.isdigit takes full-width and Arabic-Indic ones: models/core/numbers.py's
        # grammar), and at most 9 of them: int() of a 5,000-digit count raised, and a repeat was
        # built before it was counted ('1*1000000000' held 9 GB)
        if (not _ascii_digits(count) or (times and not _ascii_digits(times)) or len(count) > 9 or len(times) > 9
                or int(count) < 1 or (times and int(times) < 1)):
            raise VramplanError("stage_layers", text[:200], "must be layers per pipeline rank, e.g. 7,8*14,7 (each at "
                                                            "least 1, at most 9 digits)")
        repeat = int(times) if times else 1
        if len(split) + repeat > MAX_SPLIT_RANKS:
            raise VramplanError("stage_layers", text[:200], f"more than {MAX_SPLIT_RANKS} pipeline ranks")
        split += [int(count)] * repeat
    return tuple(split)


def candidate_stages(arch: Architecture, pipeline: int | Split, receive_buffers: bool = False) -> tuple[int, ...]:
    """The pipeline ranks that can be the most loaded (in GPU memory, and in host RAM under
    offload): the last (lm_head, loss) and, for each distinct set of layers a rank holds (how
    many of each kind of layer: models/architecture/params.py layer_group_counts), the first rank holding it
    (earlier ranks keep more micro-batches in flight; ranks with the same layers hold the same
    model states). One kind of layer: one candidate per layer count. Mixed stacks (DeepSeek's
    first dense layers, Llama 4's alternating MoE layers, Gemma's local/global attention) can put
    more parameters on a middle rank than on the first of its layer count: Llama 4 Maverick at
    pp 16 holds 6% more on rank 1 than on rank 0, and up to 1.9x the host RAM per GPU under
    ZeRO-Offload. `pipeline`: a depth (its default split) or a split. `receive_buffers`: the stack's
    pipeline keeps receive buffers per micro-batch (models/memory/pipeline_buffers.py), which every
    rank but the first holds twice over, so the first rank after the first holding each set of layers
    is a candidate too (a middle rank of a long accumulation outweighs the first)."""
    split = split_of(arch.num_layers, pipeline)
    first: dict[tuple, int] = {}
    after_first: dict[tuple, int] = {}
    for rank in range(len(split)):
        kinds = stage_layer_kinds(arch, split, rank)
        first.setdefault(kinds, rank)
        if rank > 0:
            after_first.setdefault(kinds, rank)
    ranks = set(first.values()) | (set(after_first.values()) if receive_buffers else set())
    return tuple(sorted(ranks | {len(split) - 1}))


@lru_cache(maxsize=4096)
def stage_layer_kinds(arch: Architecture, pipeline: int | Split, stage: int) -> tuple[tuple[LayerKey, int], ...]:
    """The kinds of decoder layer pipeline rank `stage` holds ((moe, local, qk_norm, linear, indexed) as
    models/params.LayerGroup names them) and how many of each, sorted: what its model states and
    activations depend on besides its position."""
    counts = split_of(arch.num_layers, pipeline)
    start = sum(counts[:stage])
    return tuple(sorted((g.key, n) for g, n in layer_group_counts(arch, start, start + counts[stage])))


def kv_heads_per_rank(num_kv_heads: int, tp: int) -> int:
    """KV heads on one TP rank; when tp > kv heads each rank keeps a replica of one group."""
    return max(1, num_kv_heads // tp)


def microbatches_per_round(pp: int, micro_batches: int) -> int:
    """torch's ScheduleInterleaved1F1B (torch 2.13.0 torch/distributed/pipelining/schedules.py
    __init__): number_of_rounds = max(1, m // pp), microbatches_per_round = m // number_of_rounds,
    the forwards a stage runs before the rank moves to its next stage."""
    return micro_batches // max(1, micro_batches // pp)


def torch_interleaving_refuses(pp: int, micro_batches: int) -> bool:
    """ScheduleInterleaved1F1B.__init__ raises unless m is a multiple of its rounds (max(1, m // pp)):
    m = 9 on 4 ranks (2 rounds) is refused, 8, 10 and 12 are not."""
    return micro_batches % max(1, micro_batches // pp) != 0


def interleaving_refuses(stack: str, pp: int, micro_batches: int) -> bool:
    """Whether the stack's interleaved schedule (vpp > 1) refuses m micro-batches a step on pp
    ranks: torch's Interleaved1F1B (TORCH_PIPELINING_STACKS) runs a multiple of its rounds;
    Megatron's (PP_GROUPED_INTERLEAVING_STACKS) whole groups of pp, so m is a multiple of pp
    (m = 6 on 4 ranks is refused; torch runs it, in one round of 6). The search's filter."""
    if stack in TORCH_PIPELINING_STACKS:
        return torch_interleaving_refuses(pp, micro_batches)
    return stack in PP_GROUPED_INTERLEAVING_STACKS and micro_batches % pp != 0


def interleaving_rule(stack: str) -> str | None:
    """The micro-batch counts the stack's interleaved schedule runs, in words, or None where it
    takes any (interleaving_refuses)."""
    if stack in TORCH_PIPELINING_STACKS:
        return "a multiple of its m // pp rounds of micro-batches"
    if stack in PP_GROUPED_INTERLEAVING_STACKS:
        return "a multiple of pp micro-batches"
    return None


def interleaving_refusal(stack: str, pp: int, micro_batches: int) -> str | None:
    """Why the stack's interleaved schedule refuses m micro-batches on pp ranks, with the nearest
    counts it runs, or None (the error of check_layout)."""
    if not interleaving_refuses(stack, pp, micro_batches):
        return None
    runs = [m for m in (next((m for m in range(micro_batches - 1, 0, -1) if not interleaving_refuses(stack, pp, m)), None),
                        next(m for m in itertools.count(micro_batches + 1) if not interleaving_refuses(stack, pp, m)))
            if m is not None]  # every schedule runs a multiple of pp
    name = "torch's Interleaved1F1B" if stack in TORCH_PIPELINING_STACKS else "Megatron's interleaved schedule"
    return f"{name} on {pp} stages runs {interleaving_rule(stack)} a step: {' or '.join(map(str, runs))}, or vpp 1"


def dense_moe_option_refusal(arch: Architecture, job: Job) -> VramplanError | None:
    """An MoE option on a dense model, which routes no tokens to experts: a flex dispatcher
    (`--moe-dispatcher deepep | hybridep`) changed nothing, not even the launch config, and the
    all-to-all overlap has no all-to-all to hide. Named by the option, not a stack: no stack runs it,
    so a search over several stacks stops on it (it blamed `stack='hf'` and asked for an EP degree)."""
    if arch.is_moe:
        return None
    if job.moe_dispatcher != "alltoall":
        return VramplanError("moe_dispatcher", job.moe_dispatcher, f"{arch.name} is a dense model (no experts to "
                             "dispatch tokens to); drop --moe-dispatcher")
    if job.moe_a2a_overlap:
        return VramplanError("moe_a2a_overlap", True, f"{arch.name} is a dense model (no expert all-to-all to "
                             "overlap); drop --moe-a2a-overlap")
    return None


def dispatcher_refusal(arch: Architecture, job: Job) -> VramplanError | None:
    """The job's DeepEP dispatcher where its stack routes only DeepSeek models through DeepEP
    (DEEPEP_DEEPSEEK_ONLY_STACKS) and this MoE model is not one: it would run the all-to-all, so the
    job is bad input (models.memory.check_job), as a stack that has no DeepEP at all refuses it.
    torchtitan's DeepSeek-V3 model code is the MLA MoE (DeepSeek-V2 and V3; its "16B" flavour is
    DeepSeek-V2-Lite's shape): the architecture's multi-head latent attention says which models it builds."""
    if job.moe_dispatcher == "deepep" and job.stack in DEEPEP_DEEPSEEK_ONLY_STACKS and arch.is_moe and not arch.is_mla:
        # named as a stack's refusal: a search over several stacks leaves this one out (solver/api.py)
        return VramplanError("stack", job.stack, f"does not run DeepEP for {arch.name} (moe_dispatcher=deepep): it "
                             "routes only its DeepSeek (MLA MoE) models through DeepEP, others run the all-to-all; "
                             "use --moe-dispatcher alltoall or another stack")
    return None


def linear_attention_refusal(arch: Architecture, precision: str) -> VramplanError | None:
    """A Gated DeltaNet model in fp32, which flash-linear-attention's kernel refuses (chunk_gated_delta_rule:
    `assert q.dtype != torch.float32`); the stacks that build its layer say so in their contract
    (catalogues/stack_capabilities.csv unbuilt_parts)."""
    if arch.has_linear_attention and precision == "fp32":
        return VramplanError("precision", "fp32", f"{arch.name}'s Gated DeltaNet kernel (flash-linear-attention) "
                                                  "runs bf16 or fp16, not fp32")
    return None


def check_layout(arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec, gpus_per_instance: int) -> None:
    """Layouts no Megatron/torchtitan run can take; each is a one-line error naming the field."""
    tp, pp, cp, ep, vpp = plan.tp, plan.pp, plan.cp, plan.ep, plan.vpp
    if arch.has_linear_attention and (tp > 1 or cp > 1):
        # transformers' tp_plan leaves Qwen3-Next's linear_attn replicated and gathers Qwen3.5's projections
        # (configuration_qwen3_next.py / configuration_qwen3_5.py base_model_tp_plan); neither, nor a context
        # split of the recurrence, is modelled
        field_name, value = ("tp", tp) if tp > 1 else ("cp", cp)
        raise VramplanError(field_name, value, f"{arch.name}'s Gated DeltaNet layers are modelled without tensor or "
                                               "context parallelism (tp = cp = 1)")
    if has_local_attention_shape(arch) and cp > 1:
        # the ring's KV chunks are sized by one attention shape (models/time/ring_attention.py); a model whose sliding
        # layers have their own is not modelled under a context split
        raise VramplanError("cp", cp, f"{arch.name}'s sliding layers have an attention shape of their own; it is "
                                      "modelled without context parallelism (cp = 1)")
    if arch.has_indexer and cp > 1:
        # transformers' DeepSeek-V3.2 / GLM-5 indexer scores each query against the whole sequence it holds;
        # no stack that builds its layer splits that sequence (Megatron-Core's DSA is not the one modelled)
        raise VramplanError("cp", cp, f"{arch.name}'s DeepSeek Sparse Attention is modelled without context "
                                      "parallelism (cp = 1)")
    if tp > 1:
        if tp > gpus_per_instance:
            raise VramplanError("tp", tp, f"TP stays inside one instance's NVLink domain ({gpus_per_instance} GPUs of {gpu.name})")
        for heads in sorted({arch.num_attention_heads, arch.local_attention_heads or arch.num_attention_heads}):  # Laguna
            if heads % tp:
                raise VramplanError("tp", tp, f"must divide the {heads} attention heads of {arch.name}")
        for kv_heads in sorted({arch.num_kv_heads, arch.local_kv_heads or arch.num_kv_heads}):  # MiMo: its sliding layers'
            if kv_heads % tp and tp % kv_heads:
                raise VramplanError(
                    "tp", tp, f"must divide the {kv_heads} KV heads of {arch.name} or be a multiple of them (replicated KV)"
                )
        if arch.intermediate_size % tp:
            raise VramplanError("tp", tp, f"must divide the MLP width {arch.intermediate_size} of {arch.name}")
    if ep > 1 and not arch.is_moe:
        raise VramplanError("ep", ep, f"{arch.name} has no experts")
    if arch.num_experts % ep:
        raise VramplanError("ep", ep, f"must divide the {arch.num_experts} experts of {arch.name}")
    if cp > 1:
        if job.seq_len % (2 * cp):
            raise VramplanError("cp", cp, f"seq_len {job.seq_len} must be divisible by 2*cp (load-balanced CP chunks)")
        if job.attention != "flash":
            raise VramplanError("cp", cp, "context parallelism runs on fused/flash attention (TE), not eager")
    layers = plan_split(arch, plan)
    if plan.stage_layers is not None and sum(layers) != arch.num_layers:
        raise VramplanError("stage_layers", split_label(layers),
                            f"holds {sum(layers)} layers; {arch.name} has {arch.num_layers}")
    if vpp > 1 and min(layers) < vpp:
        raise VramplanError("vpp", vpp, f"{arch.num_layers} layers on {pp} stages leave a rank fewer than vpp layers")
    if vpp > 1 and job.stack in EVEN_VIRTUAL_STAGES and any(count % vpp for count in layers):
        shown = ", ".join(str(count) for count in dict.fromkeys(layers))
        raise VramplanError("vpp", vpp, f"{arch.num_layers} layers on {pp} stages give ranks {shown} layers, "
                                        f"not divisible into {vpp} virtual stages ({job.stack})")
    refusal = interleaving_refusal(job.stack, pp, plan.grad_accum) if vpp > 1 else None
    if refusal is not None:
        raise VramplanError("grad_accum", plan.grad_accum, f"{refusal} ({job.stack})")
    if job.method != "full" and ep > 1:
        raise VramplanError("ep", ep, f"{job.method} is modelled without expert parallelism (ep = 1)")
