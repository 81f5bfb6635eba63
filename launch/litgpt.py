"""litgpt v0.5.13 (2685705): the `litgpt finetune_full | finetune_lora` command line of the plan.

Names from litgpt/finetune/full.py and lora.py setup() (devices, num_nodes, precision, quantize,
lora_r, lora_query/key/value/projection/mlp/head, optimizer) and litgpt/args.py TrainArgs
(--train.micro_batch_size, --train.global_batch_size, whose ratio litgpt turns into the
accumulation over devices x num_nodes, --train.max_seq_length). Precision is Lightning Fabric's
(bf16-true without an fp32 master copy, bf16-mixed with one; 16-true/16-mixed; 32-true).

What litgpt fixes itself: several GPUs always run FSDP (finetune/full.py FSDPStrategy with
activation_checkpointing_policy={Block}, cpu_offload=False; lora.py fully_shard with
activation_checkpointing=True), so a multi-GPU plan without ZeRO-3 or without full recompute runs
sharded and checkpointed, holding less than planned (a comment says so); one GPU has no activation
checkpointing, so a single-GPU plan that needs it is refused. The loss is always litgpt's
chunked_cross_entropy (lm_head_chunk_size=128): a fused loss is refused. QLoRA is one GPU only
(lora.py raises for quantize with several) and not with mixed precision (bnb.nf4-dq: NF4 with
double quantisation, what vramplan models; 8 bits: bnb.int8-training).
"""

from __future__ import annotations

from vramplan.launch.common import OPTIMIZER_CLASS, checkpointing, quote, shell_array
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan

LORA_FLAGS = {"q_proj": "--lora_query", "k_proj": "--lora_key", "v_proj": "--lora_value", "o_proj": "--lora_projection",
              "lm_head": "--lora_head"}
MLP = frozenset({"gate_proj", "up_proj", "down_proj"})  # --lora_mlp: fc_1, fc_2, proj together
# litgpt's --optimizer: a torch.optim class name, or a dotted path it imports (utils.py instantiate_torch_optimizer)
OPTIMIZER = {**OPTIMIZER_CLASS, "adamw": "AdamW", "sgd": "SGD"}


def _precision(job: Job, plan: Plan) -> str:
    if plan.precision == "fp32":
        return "32-true"
    if plan.precision == "fp8":
        raise VramplanError("precision", "fp8", "litgpt fine-tunes without fp8 (Fabric bf16/16/32 precisions)")
    prefix = "bf16" if plan.precision == "bf16" else "16"
    return f"{prefix}-{'mixed' if job.master_weights == 'fp32' else 'true'}"


def arguments(job: Job, plan: Plan, num_layers: int) -> tuple[list[tuple[str, object]], list[str]]:
    """(flag, value) pairs after the subcommand (--devices is left to the file's node arithmetic), and notes."""
    if plan.tp > 1 or plan.pp > 1 or plan.cp > 1 or plan.ep > 1:
        raise VramplanError("tp", plan.tp, "litgpt fine-tunes with data parallelism only")
    if plan.offload != "none":
        raise VramplanError("offload", plan.offload, "litgpt hard-codes cpu_offload=False")
    if job.loss == "fused":
        raise VramplanError("loss", "fused", "litgpt's loss is chunked_cross_entropy over lm_head chunks")
    if job.optimizer_in_backward or job.activation_offload:
        field = "optimizer_in_backward" if job.optimizer_in_backward else "activation_offload"
        raise VramplanError(field, True, "litgpt has no such option")
    notes: list[str] = []
    mode, layers = checkpointing(job, plan, num_layers, "litgpt")
    if plan.num_gpus == 1 and mode != "none":
        raise VramplanError("recompute", plan.recompute_label, "litgpt checkpoints activations only on several GPUs")
    if plan.num_gpus > 1 and (plan.zero != 3 or mode != "full" or layers is not None):
        notes.append(f"the plan is ZeRO-{plan.zero} with recompute {plan.recompute_label}; litgpt shards (FSDP) and "
                     "checkpoints every block on several GPUs, so this run holds less than planned")
    precision = _precision(job, plan)
    args: list[tuple[str, object]] = [("--precision", precision)]
    if job.method == "qlora":
        if plan.num_gpus > 1:
            raise VramplanError("num_gpus", plan.num_gpus, "litgpt quantizes on one GPU only (--quantize)")
        if precision.endswith("-mixed"):
            raise VramplanError("master_weights", "fp32", "litgpt refuses --quantize with mixed precision")
        args.append(("--quantize", "bnb.nf4-dq" if job.qlora_bits == 4 else "bnb.int8-training"))
    args += [("--train.micro_batch_size", plan.micro_batch), ("--train.global_batch_size", plan.global_batch),
             ("--train.max_seq_length", job.seq_len), ("--optimizer", OPTIMIZER[job.optimizer])]
    if job.method != "full":
        args += _lora(job)
    return args, notes


def _lora(job: Job) -> list[tuple[str, object]]:
    targets = set(job.lora_targets) if job.lora_targets is not None else {"q_proj", "k_proj", "v_proj", "o_proj"} | MLP
    unknown = sorted(targets - set(LORA_FLAGS) - MLP)
    if unknown:
        raise VramplanError("lora_targets", unknown[0], "litgpt adapts query/key/value/projection, the MLP and the head")
    if targets & MLP and not MLP <= targets:
        raise VramplanError("lora_targets", ",".join(sorted(targets & MLP)), "litgpt adapts the MLP's projections "
                                                                              "together (--lora_mlp)")
    flags = [(flag, name in targets) for name, flag in LORA_FLAGS.items() if flag != "--lora_head"]
    # lora.py setup(lora_dropout=0.05): the job's dropout, which the activations count (0 saves no dropped copy)
    return [("--lora_r", job.lora_rank), ("--lora_dropout", job.lora_dropout), *flags, ("--lora_mlp", MLP <= targets),
            ("--lora_head", "lm_head" in targets)]


def litgpt_text(job: Job, plan: Plan, num_layers: int) -> str:
    args, notes = arguments(job, plan, num_layers)
    command = "finetune_full" if job.method == "full" else "finetune_lora"
    comments = [f"litgpt v0.5.13 arguments for this plan ({plan.num_gpus} GPU{'s' * (plan.num_gpus > 1)}):",
                'litgpt "$LITGPT_COMMAND" <checkpoint_dir> "${LITGPT_ARGS[@]}"']
    prelude: tuple[str, ...] = (f"LITGPT_COMMAND={command}",)
    if plan.num_gpus == 1:
        words = ["--devices 1", "--num_nodes 1"]
    else:
        comments.append(f"--devices counts one node's GPUs: set LITGPT_NODES to the nodes you launch "
                        f"({plan.num_gpus} GPUs in all)")
        prelude += ("LITGPT_NODES=${LITGPT_NODES:-1}",)
        words = [f"--devices $(({plan.num_gpus} / LITGPT_NODES))", '--num_nodes "$LITGPT_NODES"']
    words += [f"{flag} {quote(value)}" for flag, value in args]
    return shell_array(comments + notes, "LITGPT_ARGS", words, prelude)
