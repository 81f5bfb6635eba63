"""torchtune v0.6.1 (a6290a5): the recipe for the plan and the `key=value` overrides it reads.

The recipe: full_finetune_single_device / full_finetune_distributed / lora_finetune_single_device /
lora_finetune_distributed by method and GPU count (QLoRA runs the LoRA recipes with
model.quantize_base=True, the qlora_* builders' own switch). The overrides are the keys the recipe
reads (`cfg.<key>`, `cfg.get("<key>")` in recipes/*.py) or the keyword arguments of the components it
instantiates (tokenizer.max_seq_len, model.lora_*, loss.num_output_chunks, optimizer._component_).

What torchtune cannot run is refused with the reason: fp16 and fp8 (the recipes raise on
float16), an fp32 master copy (the model trains in `dtype`, no mixed precision), per-op selective
checkpointing (v0.6.1's checkpoint_wrapper reads ac_option as an int), a partial recompute outside
full_finetune_distributed, activation offload without activation checkpointing (the recipes
raise), optimizer offload on several GPUs (CPUOffloadOptimizer is single-device; distributed
recipes offload parameters too, fsdp_cpu_offload), parameter offload on one GPU, 8-bit QLoRA (NF4
only), a fused loss, TP for LoRA, optimizer-in-backward with gradient accumulation or for LoRA.
Several GPUs are always FSDP2-sharded by these recipes: a ZeRO-0/1 plan over replicas runs as
fsdp_reshard_after_forward=False (ZeRO-2), which holds less than planned (a comment says so).
"""

from __future__ import annotations

from vramplan.launch.common import OPTIMIZER_CLASS, checkpointing, every_nth, quote, shell_array
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan

CHUNKED_LOSS = "torchtune.modules.loss.CEWithChunkedOutputLoss"
EAGER_LOSS = "torch.nn.CrossEntropyLoss"
CPU_OFFLOAD_OPTIMIZER = "torchao.prototype.low_bit_optim.CPUOffloadOptimizer"  # docs/source/tutorials/memory_optimizations.rst
TORCHAO_ADAMW_8BIT = "torchao.optim.AdamW8bit"  # torchao's low-bit optimizers, FSDP2-ready (pytorch/ao#484)
# PEFT (HF) module names as torchtune's LoRA builders name them (torchtune/modules/peft/_utils.py LORA_ATTN_MODULES)
ATTENTION = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "o_proj": "output_proj"}
MLP = frozenset({"gate_proj", "up_proj", "down_proj"})  # apply_lora_to_mlp: w1, w2, w3 together


def recipe(job: Job, plan: Plan) -> str:
    kind = "full_finetune" if job.method == "full" else "lora_finetune"
    return f"{kind}_{'single_device' if plan.num_gpus == 1 else 'distributed'}"


def overrides(job: Job, plan: Plan, num_layers: int) -> tuple[list[tuple[str, object]], list[str]]:
    """(key, value) overrides in order, and comment lines for what the overrides alone do not say."""
    for field in ("pp", "cp", "ep"):
        if getattr(plan, field) > 1:
            raise VramplanError(field, getattr(plan, field), "torchtune v0.6.1's recipes run FSDP2 and TP only")
    name = recipe(job, plan)
    distributed, full = plan.num_gpus > 1, job.method == "full"
    notes: list[str] = []
    if plan.precision not in ("bf16", "fp32"):
        raise VramplanError("precision", plan.precision, "torchtune's recipes train in bf16 or fp32 (fp16 is refused)")
    if job.master_weights == "fp32" and plan.precision != "fp32":
        raise VramplanError("master_weights", "fp32", "torchtune trains the model in its dtype, without an fp32 master "
                                                      "copy: --master-weights none")
    keys: list[tuple[str, object]] = [("batch_size", plan.micro_batch), ("gradient_accumulation_steps", plan.grad_accum),
                                      ("dtype", plan.precision), ("tokenizer.max_seq_len", job.seq_len)]
    keys += _recompute(job, plan, num_layers, name)
    keys += _states(job, plan, distributed, notes)
    if plan.tp > 1:
        if not full:
            raise VramplanError("tp", plan.tp, "torchtune's LoRA recipes have no tensor parallelism")
        keys.append(("tensor_parallel_dim", plan.tp))
        notes.append("tensor_parallel_dim needs the config's tensor_parallel_plan (the 70B configs name one) and an "
                     "unfused optimizer")
    keys += _optimizer(job, plan, full, notes)
    keys += _loss(job)
    if job.compile == "model":  # recipes/*.py: `compile` runs training.compile_model and training.compile_loss
        raise VramplanError("compile", "model", "torchtune's `compile` compiles the model and the loss together")
    keys.append(("compile", job.compile == "model+loss"))
    if not full:
        keys += _lora(job)
    return keys, notes


def _recompute(job: Job, plan: Plan, num_layers: int, name: str) -> list[tuple[str, object]]:
    mode, layers = checkpointing(job, plan, num_layers, "torchtune")
    if mode == "op":
        raise VramplanError("recompute", plan.recompute, "torchtune v0.6.1 has no per-op selective checkpointing "
                                                         "(checkpoint_wrapper reads ac_option as a layer stride)")
    if job.activation_offload and (mode != "full" or layers is not None):
        raise VramplanError("activation_offload", True, "torchtune offloads activations only with "
                                                        "enable_activation_checkpointing (every layer): --recompute full")
    if layers is None:
        return [("enable_activation_checkpointing", mode == "full"), ("enable_activation_offloading", job.activation_offload)]
    stride = every_nth(num_layers, layers, first=False)
    if name != "full_finetune_distributed" or stride is None:
        raise VramplanError("recompute_layers", layers, "torchtune checkpoints a share of the layers only in "
                                                        f"full_finetune_distributed, every n-th of the {num_layers} (ac_option n: "
                                                        "floor(layers/n))")
    return [("enable_activation_checkpointing", False), ("ac_mode", "selective"), ("ac_option", stride),
            ("enable_activation_offloading", False)]


def _states(job: Job, plan: Plan, distributed: bool, notes: list[str]) -> list[tuple[str, object]]:
    if not distributed:
        if plan.offload == "optimizer+params":
            raise VramplanError("offload", plan.offload, "torchtune offloads parameters only through FSDP "
                                                         "(fsdp_cpu_offload), in the distributed recipes on several GPUs")
        return []
    if plan.offload == "optimizer":
        raise VramplanError("offload", "optimizer", "torchtune's distributed recipes offload parameters with the "
                                                    "optimizer (fsdp_cpu_offload); CPUOffloadOptimizer is single-device")
    if plan.dp == 1:
        return []
    if plan.zero < 2:
        notes.append(f"the plan is ZeRO-{plan.zero} over replicas; torchtune's distributed recipes always shard (FSDP2), "
                     "so this run holds less than planned")
    return [("fsdp_reshard_after_forward", plan.zero == 3), ("fsdp_cpu_offload", plan.offload == "optimizer+params")]


def _optimizer(job: Job, plan: Plan, full: bool, notes: list[str]) -> list[tuple[str, object]]:
    keys: list[tuple[str, object]] = []
    if plan.offload == "optimizer":  # one GPU (_states refuses it on several)
        if job.optimizer != "adamw":
            raise VramplanError("optimizer", job.optimizer, "torchtune's CPUOffloadOptimizer recipe wraps torch AdamW")
        keys.append(("optimizer._component_", CPU_OFFLOAD_OPTIMIZER))
    elif plan.num_gpus > 1 and job.optimizer.startswith("adamw-8bit"):
        # torchtune's memory_optimizations.rst (v0.6.1): "All of our recipes support ... torchao. For single
        # device recipes, we also support bitsandbytes"; bitsandbytes' 8-bit step on FSDP2's DTensor
        # parameters fails (bitsandbytes#1633). torchao's AdamW8bit (blocks of 256, fp32 scales: the
        # bytes vramplan counts) shards with FSDP2; it has no paged variant.
        if job.optimizer == "adamw-8bit-paged":
            raise VramplanError("optimizer", job.optimizer, "torchtune's distributed recipes run torchao's 8-bit AdamW, "
                                                            "which has no paged variant: --optimizer adamw-8bit")
        keys.append(("optimizer._component_", TORCHAO_ADAMW_8BIT))
    else:
        keys.append(("optimizer._component_", OPTIMIZER_CLASS[job.optimizer]))
    notes.append("the config's other optimizer keys must suit that class (bitsandbytes' optimizers take no `fused`)")
    if full:
        keys.append(("optimizer_in_bwd", job.optimizer_in_backward))
        if job.optimizer_in_backward:
            if plan.grad_accum > 1:
                raise VramplanError("optimizer_in_backward", True, "torchtune refuses gradient accumulation with "
                                                                   "optimizer_in_bwd")
            keys.append(("clip_grad_norm", None))  # the recipes refuse clipping with optimizer_in_bwd
    elif job.optimizer_in_backward:
        raise VramplanError("optimizer_in_backward", True, "torchtune's LoRA recipes have no optimizer_in_bwd")
    return keys


def _loss(job: Job) -> list[tuple[str, object]]:
    if job.loss == "fused":
        raise VramplanError("loss", "fused", "torchtune v0.6.1 has no fused linear cross-entropy (--loss chunked)")
    if job.loss == "chunked":
        return [("loss._component_", CHUNKED_LOSS), ("loss.num_output_chunks", job.loss_chunks)]
    return [("loss._component_", EAGER_LOSS)]


def _lora(job: Job) -> list[tuple[str, object]]:
    targets = set(job.lora_targets) if job.lora_targets is not None else set(ATTENTION) | MLP
    unknown = sorted(targets - set(ATTENTION) - MLP - {"lm_head"})
    if unknown:
        raise VramplanError("lora_targets", unknown[0], "torchtune's LoRA builders adapt q/k/v/o_proj, the MLP and the output")
    if targets & MLP and not MLP <= targets:
        raise VramplanError("lora_targets", ",".join(sorted(targets & MLP)), "torchtune adapts the MLP's three "
                                                                              "projections together (apply_lora_to_mlp)")
    attention = [ATTENTION[name] for name in ATTENTION if name in targets]
    keys: list[tuple[str, object]] = [
        ("model.lora_attn_modules", "[" + ",".join(attention) + "]"), ("model.apply_lora_to_mlp", MLP <= targets),
        ("model.apply_lora_to_output", "lm_head" in targets), ("model.lora_rank", job.lora_rank)]
    if job.method == "qlora":
        if job.qlora_bits != 4:
            raise VramplanError("qlora_bits", job.qlora_bits, "torchtune quantises the base to NF4 (4 bits) only")
        keys.append(("model.quantize_base", True))
    return keys


def torchtune_text(job: Job, plan: Plan, num_layers: int) -> str:
    keys, notes = overrides(job, plan, num_layers)
    name = recipe(job, plan)
    comments = [f"torchtune v0.6.1 recipe and config overrides for this plan ({plan.num_gpus} GPU{'s' * (plan.num_gpus > 1)})"]
    prelude: tuple[str, ...] = (f"TORCHTUNE_RECIPE={name}",)
    if plan.num_gpus == 1:
        comments.append('tune run "$TORCHTUNE_RECIPE" --config <config> "${TORCHTUNE_ARGS[@]}"')
    else:
        comments += [f"set TORCHTUNE_NODES to the nodes you launch ({plan.num_gpus} GPUs in all); on each:",
                     'tune run --nnodes "$TORCHTUNE_NODES" --nproc_per_node "$TORCHTUNE_NPROC_PER_NODE" '
                     '"$TORCHTUNE_RECIPE" --config <config> "${TORCHTUNE_ARGS[@]}"']
        prelude += ("TORCHTUNE_NODES=${TORCHTUNE_NODES:-1}",
                    f"TORCHTUNE_NPROC_PER_NODE=$(({plan.num_gpus} / TORCHTUNE_NODES))")
    comments += notes
    return shell_array(comments, "TORCHTUNE_ARGS", [f"{key}={quote(value)}" for key, value in keys], prelude)
