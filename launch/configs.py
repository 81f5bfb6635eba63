"""A plan as the named stack's own launch configuration.

- deepspeed (the HF Trainer with a DeepSpeed config): the DeepSpeed JSON (batch sizes, bf16/fp16,
  zero_optimization with its offloads, tensor_parallel.autotp_size for TP); activation
  checkpointing is the Trainer's `gradient_checkpointing`, so the JSON carries none.
- megatron: Megatron-LM's `pretrain_gpt.py` arguments (parallel sizes, sequence parallelism,
  virtual stages, batch sizes, precision, distributed optimizer, recompute, optimizer offload).
- torchtitan (v0.2.2's JobConfig): the TOML sections [parallelism], [training],
  [activation_checkpoint].

The names and value domains are checked against each stack's published ones in
tests/launch/test_configs.py (copied there with their sources). Other stacks have no writer yet:
asking for one is one line naming the stack.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan


@dataclass(frozen=True)
class LaunchConfig:
    stack: str
    text: str
    extension: str  # the file type the text is: .json, .toml, .sh


def _deepspeed_config(job: Job, plan: Plan, num_layers: int) -> LaunchConfig:
    return LaunchConfig("deepspeed", json.dumps(_deepspeed(job, plan), indent=2) + "\n", ".json")


def _megatron_config(job: Job, plan: Plan, num_layers: int) -> LaunchConfig:
    return LaunchConfig("megatron", _shell(_megatron(job, plan, num_layers)), ".sh")


def _torchtitan_config(job: Job, plan: Plan, num_layers: int) -> LaunchConfig:
    return LaunchConfig("torchtitan", _toml(_torchtitan(job, plan, num_layers)), ".toml")


WRITERS: dict[str, Callable[[Job, Plan, int], LaunchConfig]] = {
    "deepspeed": _deepspeed_config, "megatron": _megatron_config, "torchtitan": _torchtitan_config}


def check_writer(stack: str) -> None:
    """Before any work: the stack has a launch-config writer (exit 2 naming it otherwise)."""
    if stack not in WRITERS:
        raise VramplanError("stack", stack, f"has no launch-config writer yet (written: {', '.join(WRITERS)}); "
                                            "drop --launch-config or pass --stack with one of them")


def launch_config(job: Job, plan: Plan, num_layers: int) -> LaunchConfig:
    """The job's stack's configuration for this plan (num_layers: the model's, for recompute
    counts and virtual stages)."""
    check_writer(job.stack)
    return WRITERS[job.stack](job, plan, num_layers)


def _deepspeed(job: Job, plan: Plan) -> dict:
    zero: dict = {"stage": plan.zero, "overlap_comm": True, "contiguous_gradients": True}
    if plan.offload in ("optimizer", "optimizer+params"):
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if plan.offload == "optimizer+params":
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    config: dict = {
        "train_batch_size": plan.global_batch,
        "train_micro_batch_size_per_gpu": plan.micro_batch,
        "gradient_accumulation_steps": plan.grad_accum,
        "bf16": {"enabled": plan.precision == "bf16"},
        "fp16": {"enabled": plan.precision == "fp16"},
        "zero_optimization": zero,
    }
    if plan.tp > 1:
        config["tensor_parallel"] = {"autotp_size": plan.tp}
    return config


def _megatron(job: Job, plan: Plan, num_layers: int) -> list[str]:
    args = [f"--tensor-model-parallel-size {plan.tp}", f"--pipeline-model-parallel-size {plan.pp}",
            f"--context-parallel-size {plan.cp}", f"--expert-model-parallel-size {plan.ep}",
            f"--micro-batch-size {plan.micro_batch}", f"--global-batch-size {plan.global_batch}",
            f"--seq-length {job.seq_len}"]
    if plan.sequence_parallel and plan.tp > 1:
        args.append("--sequence-parallel")
    if plan.vpp > 1:
        args.append(f"--num-layers-per-virtual-pipeline-stage {num_layers // (plan.pp * plan.vpp)}")
    args += {"bf16": ["--bf16"], "fp16": ["--fp16"], "fp8": ["--bf16", "--fp8-format hybrid"]}.get(plan.precision, [])
    if plan.zero >= 1:
        args.append("--use-distributed-optimizer")
    if plan.offload == "optimizer":  # arguments.py validation: CPU offload needs the precision-aware optimizer
        args += ["--optimizer-cpu-offload", "--optimizer-offload-fraction 1.0", "--use-precision-aware-optimizer"]
    if plan.recompute == "selective":
        args.append("--recompute-granularity selective")
    elif plan.recompute == "full":
        layers = plan.recompute_layers if plan.recompute_layers is not None else num_layers // plan.pp
        args += ["--recompute-granularity full", "--recompute-method block", f"--recompute-num-layers {layers}"]
    return args


def _torchtitan(job: Job, plan: Plan, num_layers: int) -> dict[str, dict]:
    if plan.precision == "fp16":
        raise VramplanError("precision", "fp16", "torchtitan trains in bfloat16 or float32 (mixed_precision_param)")
    shard = plan.dp if plan.zero >= 2 else 1  # FSDP2 over the data-parallel ranks; ZeRO-0 replicates
    parallelism: dict[str, object] = {
        "data_parallel_replicate_degree": plan.dp // shard, "data_parallel_shard_degree": shard,
        "tensor_parallel_degree": plan.tp, "pipeline_parallel_degree": plan.pp,
        "context_parallel_degree": plan.cp, "expert_parallel_degree": plan.ep,
    }
    if shard > 1:  # ZeRO-3 reshards after forward, ZeRO-2 keeps the gathered parameters
        parallelism["fsdp_reshard_after_forward"] = "always" if plan.zero == 3 else "never"
    if plan.pp > 1:
        parallelism["pipeline_parallel_schedule"] = "Interleaved1F1B" if plan.vpp > 1 else "1F1B"
    training: dict[str, object] = {
        "local_batch_size": plan.micro_batch, "global_batch_size": plan.global_batch,  # accumulation: their ratio
        "seq_len": job.seq_len, "mixed_precision_param": "bfloat16"}
    if plan.offload == "optimizer+params":  # FSDP CPU offload of parameters, gradients and optimizer states
        training["enable_cpu_offload"] = True
    if plan.recompute == "full" and plan.recompute_layers is not None:
        stride = max(1, round(num_layers / plan.pp / max(1, plan.recompute_layers)))
        checkpoint = {"mode": "selective", "selective_ac_option": str(stride)}
    else:
        checkpoint = {"mode": {"none": "none", "full": "full"}.get(plan.recompute, "selective")}
        if plan.recompute in ("selective", "op"):
            checkpoint["selective_ac_option"] = "op"
    return {"parallelism": parallelism, "training": training, "activation_checkpoint": checkpoint}


def _toml(sections: dict[str, dict]) -> str:
    def value(v: object) -> str:
        return ("true" if v else "false") if isinstance(v, bool) else json.dumps(v)

    return "\n".join(f"[{name}]\n" + "".join(f"{key} = {value(v)}\n" for key, v in body.items())
                     for name, body in sections.items())


def _shell(args: list[str]) -> str:
    return "# Megatron-LM arguments for this plan (pretrain_gpt.py)\nMEGATRON_ARGS=(\n" + \
        "".join(f"  {arg}\n" for arg in args) + ")\n"
