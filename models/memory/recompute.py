"""What each recompute mode keeps of one decoder layer, and what the backward rebuilds.

- "none": every term of models/activation_terms.layer_terms.
- "selective" with `selective = "attention"`: Korthikanti et al. (arXiv:2205.05198 sec. 5), what
  Megatron-LM's `--recompute-granularity selective` does (recompute `core_attention`): the
  attention core (s x s scores, softmax, dropout) is recomputed. Under FlashAttention there is no
  attention core to drop (only the fp32 logsumexp): this mode then recomputes almost nothing.
- "op" (and "selective" with `selective = "op"`): torchtitan's per-op selective activation
  checkpointing (torchtitan/distributed/activation_checkpoint.py `_apply_op_sac`, `_op_sac_save_list`):
  a whole block is checkpointed (its input is saved) and, inside, only the outputs of ops in the save
  list are kept: every other `aten.mm` ("Saves output of all compute ops, except every second mm":
  the 1st, 3rd, ... mm of the block, i.e. wq, wv, w1, w2 of a Llama block) and the SDPA outputs
  (attention output and its fp32 logsumexp). Norms, activations and element-wise ops are recomputed.
  MoE experts run grouped GEMMs, which are not in the save list: they are recomputed.
- "full": the layer input only (Korthikanti: 2sbh). `recompute_layers = N` is Megatron-LM's
  `--recompute-num-layers N` with `--recompute-method block`: the first N layers of each model
  chunk (a pipeline rank's stage, or each of its virtual stages) are checkpointed, the others keep
  everything (recompute_block); torchtune and HF checkpoint every layer.

Activation offloading (`activation_offload`): torchtune's `OffloadActivations`
(torchtune/training/_activation_offloading.py) moves every saved tensor to pinned host memory on a
side stream during forward and brings it back, one step ahead, during backward; HF/Unsloth's
"unsloth" gradient checkpointing does the same for the checkpointed layer inputs. The GPU then
holds the layer in use and the one being prefetched: 2 layers' worth instead of L.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from vramplan.models.architecture.parallel import plan_split, sequence_parallel_active
from vramplan.models.architecture.params import LayerGroup, LinearModule, layer_linear_modules
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job, Plan, Recompute
from vramplan.models.core.units import ceil_div
from vramplan.models.memory.saved_tensors import FP32, Shape, Term

OFFLOAD_RESIDENT_LAYERS = 2  # the layer in use and the one being prefetched


@dataclass(frozen=True)
class LayerKeep:
    per_layer_bytes: int  # one layer's kept bytes under the mode (the recomputed layers' value)
    layers_bytes: int  # all decoder layers of this kind on the GPU
    rebuilt_bytes: int  # what the backward rebuilds of one layer at its peak
    largest_bytes: int  # the most one layer of this kind keeps (what offloading leaves resident)


def recompute_block(job: Job, plan: Plan) -> int | None:
    """The decoder layers each model chunk checkpoints under full recompute: the plan's
    `recompute_layers` (the solver's partial recompute), else the job's; None: every layer (and 0
    layers when the mode is not full: the caller checks the mode). Every stack counts them per
    pipeline rank, because a rank runs only its own layers: Megatron-LM's `--recompute-method block
    --recompute-num-layers N` checkpoints the first N layers of each model chunk
    (megatron/core/recompute.py @ HEAD of NVIDIA/Megatron-LM: `for layer_idx in
    range(self.num_layers_per_pipeline_rank)` ... `layer_idx < self.config.recompute_num_layers`,
    one TransformerBlock per virtual stage); torchtitan's every-n-th block counts the blocks of its
    model part; without a pipeline the model is one chunk."""
    return plan.recompute_layers if plan.recompute_layers is not None else job.recompute_layers


def rank_recomputed(layers: int, vpp: int, block: int | None) -> int:
    """Of a rank's `layers` decoder layers in `vpp` model chunks, those full recompute checkpoints
    when each chunk checkpoints its first `block` (None: all)."""
    return layers if block is None else min(block * vpp, layers)


def stage_recomputed(arch: Architecture, job: Job, plan: Plan) -> tuple[int, ...]:
    """The decoder layers full recompute checkpoints on each pipeline rank (0s unless the mode is full)."""
    split = plan_split(arch, plan)
    if plan.recompute != "full":
        return (0,) * len(split)
    return _split_recomputed(split, plan.vpp, recompute_block(job, plan))


@lru_cache(maxsize=4096)
def _split_recomputed(split: tuple[int, ...], vpp: int, block: int | None) -> tuple[int, ...]:
    return tuple(rank_recomputed(layers, vpp, block) for layers in split)


def recomputed_layers(arch: Architecture, job: Job, plan: Plan) -> int:
    """Decoder layers of the whole model that full recompute checkpoints: each rank's
    (stage_recomputed) summed; 0 unless the mode is full."""
    return sum(stage_recomputed(arch, job, plan))


def recomputed_fraction(arch: Architecture, job: Job, plan: Plan) -> float:
    """The share of the decoder layers that full recompute re-runs in the backward."""
    return recomputed_layers(arch, job, plan) / arch.num_layers


def effective_mode(job: Job, plan: Plan) -> Recompute:
    """The recompute mode that runs: `selective` is torchtitan's op-level SAC when `selective = "op"`."""
    if plan.recompute == "selective" and job.selective == "op":
        return "op"
    return plan.recompute


def op_sac_saved_bytes(arch: Architecture, x: Shape, modules: tuple[LinearModule, ...] | None = None,
                       tp: int = 1, sp: bool = False, compiled: bool = False) -> int:
    """torchtitan op-level SAC on one rank: the block input, every other mm output, the SDPA output
    and logsumexp, and under sequence parallelism every reduce-scatter output (`_get_default_save_ops`
    saves `_c10d_functional.reduce_scatter_tensor` so the backward does not communicate again)
    (`modules`: the layer's linear modules, default the last layer's kind).

    Under TP a rank's mm ops are its shards: a column-parallel projection (q, k, v, gate, up) outputs
    out / tp, a row-parallel one (o, down: the hidden width) the full-width partial sum before its
    all-reduce or reduce-scatter; attention runs on heads / tp. The block input is / tp under SP.

    `compiled` (the block under torch.compile): the policy's MUST_SAVE tags reach inductor's
    partitioner, which saves only what the backward reads. A row-parallel projection's output (the
    down projection among the saved mms) and a reduce-scatter's only feed the residual add, whose
    backward reads neither: they are not kept, where eager SAC caches every MUST_SAVE output until
    its recompute (torch/utils/checkpoint.py _CachingTorchDispatchMode). Measured with torch 2.13 on
    CPU (tests/models/memory/test_compile.py): the compiled torchtitan block keeps its input, the wq,
    wv and w1 outputs, the SDPA output and logsumexp, not w2's."""
    modules = layer_linear_modules(arch) if modules is None else modules
    mms = [m for m in modules if m.copies_per_layer == 1]
    saved_mm = sum(m.out_features if m.row_parallel else ceil_div(m.out_features, tp) for m in mms[0::2]
                   if not (compiled and m.row_parallel))  # 1st, 3rd, ...
    row_parallel = 0 if compiled else sum(m.row_parallel for m in mms)
    q_dim = ceil_div(arch.num_attention_heads * arch.head_dim, tp)
    sdpa = x.e * x.t * q_dim + FP32 * x.t * ceil_div(arch.num_attention_heads, tp)
    block_input = ceil_div(x.e * x.t * arch.hidden_size, tp) if sp else x.e * x.t * arch.hidden_size
    scattered = row_parallel * ceil_div(x.e * x.t * arch.hidden_size, tp) if sp and tp > 1 else 0
    return block_input + x.e * x.t * saved_mm + sdpa + scattered


def layer_keep(arch: Architecture, job: Job, plan: Plan, terms: list[Term], x: Shape,
               group: LayerGroup | None = None, layer_input: int | None = None) -> LayerKeep:
    """What the `group`'s layers keep (default: every layer, all of the last layer's kind);
    `layer_input`: one rank's share of a layer's input (default e*T*h; / tp under sequence parallelism)."""
    full_layer = sum(t.num_bytes for t in terms)
    layer_input = x.e * x.t * arch.hidden_size if layer_input is None else layer_input
    mode = effective_mode(job, plan)
    layers = arch.num_layers if group is None else group.count
    if mode == "full":
        per_layer, rebuilt = layer_input, full_layer
        # Megatron checkpoints the first N layers of the stage; of several kinds of layer, this kind's
        # share of N, rounded down (fewer recomputed layers keep more: never an underestimate).
        recomputed = min(recomputed_layers(arch, job, plan) * layers // arch.num_layers, layers)
        total = recomputed * layer_input + (layers - recomputed) * full_layer
        largest = layer_input if recomputed == layers else full_layer
    elif mode == "op":
        saved = op_sac_saved_bytes(arch, x, None if group is None else group.modules, plan.tp, sequence_parallel_active(plan),
                                   compiled=job.compile != "none" and job.kernels == "eager")
        per_layer = min(full_layer, saved)
        rebuilt, total, largest = full_layer - per_layer, layers * per_layer, per_layer
    elif mode == "selective":
        per_layer = sum(t.num_bytes for t in terms if not t.attention_core)
        rebuilt, total, largest = full_layer - per_layer, layers * per_layer, per_layer
    else:
        per_layer, rebuilt, total, largest = full_layer, 0, layers * full_layer, full_layer
    return LayerKeep(per_layer, total, rebuilt, largest)


def offloaded_bytes(job: Job, num_layers: int, layers_bytes: int, largest_bytes: int) -> int:
    """Of `layers_bytes` kept by `num_layers` layers, what activation offloading moves to host memory:
    all but the layer in use and the one being prefetched."""
    if not job.activation_offload:
        return 0
    return max(0, layers_bytes - min(num_layers, OFFLOAD_RESIDENT_LAYERS) * largest_bytes)
