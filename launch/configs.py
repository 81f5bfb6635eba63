"""A plan as the named stack's own launch configuration: every stack of
catalogues/stack_capabilities.csv but `custom` (not a stack) has a writer.

- hf (transformers 5.25 Trainer + accelerate 1.14 + peft 0.20, launch/hf.py): one JSON of sections
  named after the calls they feed: training_args (TrainingArguments, with FSDP2 fsdp_config or an
  inline DeepSpeed dict), distributed_config (from_pretrained's DistributedConfig for TP/EP),
  parallelism_config (accelerate ParallelismConfig), from_pretrained, lora_config, bnb_config,
  prepare_model_for_kbit_training, accelerate_launch.
- deepspeed (the HF Trainer with a DeepSpeed config, launch/deepspeed.py): the DeepSpeed JSON (batch
  sizes, bf16/fp16, zero_optimization with its offloads, tensor_parallel.autotp_size,
  sequence_parallel_size, expert_parallel); activation checkpointing is the Trainer's
  `activation_checkpointing` (`gradient_checkpointing`, its deprecated alias in transformers 5.25),
  so the JSON carries none.
- megatron: Megatron-LM's `pretrain_gpt.py` arguments (parallel sizes, sequence parallelism and
  its TP communication overlap, the MoE token dispatcher with EP, virtual stages, batch sizes,
  precision, distributed optimizer, recompute, optimizer offload).
- torchtitan (v0.2.2's JobConfig): the TOML sections [parallelism] (async TP with --tp-overlap,
  DeepEP with --moe-dispatcher deepep),
  [training], [activation_checkpoint], and [compile] when the job compiles.
- torchtune (v0.6.1, launch/torchtune.py): a shell file naming the recipe and its `key=value`
  config overrides (TORCHTUNE_ARGS).
- litgpt (v0.5.13, launch/litgpt.py): a shell file with the `litgpt finetune_full|finetune_lora`
  arguments (LITGPT_ARGS).
- unsloth (main 015bdef, launch/hf.py): one JSON: from_pretrained, get_peft_model, training_args
  (TRL SFTConfig), accelerate_launch for DDP.

The names and value domains are checked against each stack's published ones in tests/launch/
(copied there with their sources). A plan holding what the stack's configuration cannot express is
a one-line VramplanError naming the field; `custom` has no writer, asking for one is one line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from vramplan.launch.common import LaunchConfig, LaunchModel
from vramplan.launch.deepspeed import deepspeed_dict
from vramplan.launch.hf import hf_sections, json_text, unsloth_sections
from vramplan.launch.litgpt import litgpt_text
from vramplan.launch.pipeline import megatron_sets_vpp, megatron_split_args, torchtitan_model_parts
from vramplan.launch.torchtune import torchtune_text
from vramplan.models.architecture.parallel import largest_chunk, split_of
from vramplan.models.catalogue.catalogue import Catalogue
from vramplan.models.catalogue.stack_contract import zero_layout_refusal
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.recompute import recompute_block

__all__ = ["WRITERS", "LaunchConfig", "LaunchModel", "check_writer", "launch_config", "launch_model"]


def _hf_config(job: Job, plan: Plan, model: LaunchModel) -> LaunchConfig:
    return LaunchConfig("hf", json_text(hf_sections(job, plan, model.num_layers)), ".json")


def _deepspeed_config(job: Job, plan: Plan, model: LaunchModel) -> LaunchConfig:
    if job.compile != "none":  # the Trainer's TrainingArguments(torch_compile=True), not a DeepSpeed JSON key
        raise VramplanError("compile", job.compile, "the DeepSpeed JSON has no place for the hf Trainer's torch_compile; "
                                                    "write --stack hf's configuration")
    if plan.precision == "fp8":  # the JSON's bf16 section would run the plan in bf16: fp8 goes through accelerate
        raise VramplanError("precision", "fp8", "the DeepSpeed JSON has no fp8 (accelerate's mixed_precision fp8 runs "
                                                "it); write --stack hf's configuration")
    if plan.cp > 1:  # accelerate sets up Ulysses from ParallelismConfig(sp_backend="deepspeed") alone
        # (accelerator.py L2386-2421); the JSON's sequence_parallel_size alone splits no sequence
        raise VramplanError("cp", plan.cp, "DeepSpeed's Ulysses is set up by accelerate's parallelism_config, which "
                                           "the DeepSpeed JSON cannot carry; write --stack hf's configuration")
    return LaunchConfig("deepspeed", json.dumps(deepspeed_dict(plan), indent=2) + "\n", ".json")


def _megatron_config(job: Job, plan: Plan, model: LaunchModel) -> LaunchConfig:
    return LaunchConfig("megatron", _shell(_megatron(job, plan, model.num_layers, model.num_experts)), ".sh")


def _torchtitan_config(job: Job, plan: Plan, model: LaunchModel) -> LaunchConfig:
    return LaunchConfig("torchtitan", _toml(_torchtitan(job, plan, model.num_layers)), ".toml")


def _torchtune_config(job: Job, plan: Plan, model: LaunchModel) -> LaunchConfig:
    return LaunchConfig("torchtune", torchtune_text(job, plan, model.num_layers), ".sh")


def _litgpt_config(job: Job, plan: Plan, model: LaunchModel) -> LaunchConfig:
    return LaunchConfig("litgpt", litgpt_text(job, plan, model.num_layers), ".sh")


def _unsloth_config(job: Job, plan: Plan, model: LaunchModel) -> LaunchConfig:
    return LaunchConfig("unsloth", json_text(unsloth_sections(job, plan, model)), ".json")


# Each writer reads the job, the plan and what it needs of the model (LaunchModel).
WRITERS: dict[str, Callable[[Job, Plan, LaunchModel], LaunchConfig]] = {
    "hf": _hf_config, "deepspeed": _deepspeed_config, "megatron": _megatron_config, "torchtitan": _torchtitan_config,
    "torchtune": _torchtune_config, "litgpt": _litgpt_config, "unsloth": _unsloth_config}


def check_writer(stack: str) -> None:
    """Before any work: the stack has a launch-config writer (exit 2 naming it otherwise)."""
    if stack not in WRITERS:
        raise VramplanError("stack", stack, f"has no launch-config writer yet (written: {', '.join(WRITERS)}); "
                                            "drop --launch-config or pass --stack with one of them")


def launch_model(catalogue: Catalogue, model: str) -> LaunchModel:
    """LaunchModel of a --model argument. Its checkpoint: a hub id or a folder as given, a config
    file's folder (from_pretrained loads a folder); a catalogue name names no checkpoint ("")."""
    arch = catalogue.architecture(model)
    if model.lower() in {name.lower() for name in catalogue.architectures}:
        return LaunchModel.of(arch)
    path = Path(model)
    return LaunchModel.of(arch, str(path.parent) if path.is_file() else model)


def launch_config(job: Job, plan: Plan, model: LaunchModel) -> LaunchConfig:
    """The job's stack's configuration for this plan (`model`: LaunchModel.of the architecture)."""
    check_writer(job.stack)
    return WRITERS[job.stack](job, plan, model)


# pretrain_gpt.py trains every parameter with Adam (arguments.py --optimizer adam | sgd | muon ...) and fp32
# main parameters (--main-params-dtype fp32 | fp16): no adapter, no 8-bit state, no pure 16-bit run.
MEGATRON_OPTIMIZERS = {"adamw": "adam", "sgd": "sgd"}


def _megatron_graph_args(job: Job, num_experts: int) -> list[str]:
    """Job.cuda_graphs as Megatron-LM arguments (transformer_config.py L1075-1106 @ d98e8a64
    cuda_graph_impl / cuda_graph_modules; megatron/core/transformer/moe/README.md "CUDA Graph")."""
    if job.cuda_graphs == "attn":  # Transformer Engine's per-layer graphs, the scope of Megatron-Bridge's MoE recipes
        modules = "attn moe_router moe_preprocess" if num_experts > 1 else "attn"
        return ["--cuda-graph-impl transformer_engine", f"--cuda-graph-modules {modules}"]
    if job.cuda_graphs == "full-iteration":
        if num_experts > 1:
            raise VramplanError("cuda_graphs", "full-iteration", "Megatron-LM captures a dropless MoE layer only with "
                                "token drop and padding (--moe-expert-capacity-factor, --moe-pad-expert-input-to-capacity: "
                                "moe/README.md 'CUDA Graph'), which vramplan does not plan; no config written")
        # arguments.py L1235-1237: the NaN check cannot run inside the graph
        return ["--cuda-graph-impl full_iteration", "--no-check-for-nan-in-loss-and-grad"]
    return []


def _megatron(job: Job, plan: Plan, num_layers: int, num_experts: int = 1) -> list[str]:
    if job.method != "full":
        raise VramplanError("method", job.method, "Megatron-LM's pretrain_gpt.py trains no adapters; run LoRA/QLoRA "
                                                  "through Megatron-Bridge's PEFT recipe (no config written)")
    if job.optimizer not in MEGATRON_OPTIMIZERS:
        raise VramplanError("optimizer", job.optimizer, "Megatron-LM has Adam and SGD (--optimizer), no 8-bit states")
    if job.master_weights == "none":
        raise VramplanError("master_weights", "none", "Megatron-LM keeps fp32 or fp16 main parameters "
                                                      "(--main-params-dtype); it has no pure 16-bit training")
    args = [f"--tensor-model-parallel-size {plan.tp}", f"--pipeline-model-parallel-size {plan.pp}",
            f"--context-parallel-size {plan.cp}", f"--expert-model-parallel-size {plan.ep}",
            f"--micro-batch-size {plan.micro_batch}", f"--global-batch-size {plan.global_batch}",
            f"--seq-length {job.seq_len}"]
    if job.optimizer != "adamw":
        args.append(f"--optimizer {MEGATRON_OPTIMIZERS[job.optimizer]}")
    if plan.sequence_parallel and plan.tp > 1:
        args.append("--sequence-parallel")
        if job.tp_overlap:  # arguments.py asserts sequence parallelism with it (and drops SP at tp 1)
            args.append("--tp-comm-overlap")
    if num_experts > 1:  # transformer_config.py moe_grouped_gemm defaults to False (a loop over experts): the
        args.append("--moe-grouped-gemm")  # stack's moe_kernel is grouped (models/time/moe_gemm.py)
    if plan.ep > 1:  # transformer_config.py moe_token_dispatcher_type defaults to allgather; vramplan times these
        args += _megatron_dispatcher_args(job)
        if job.moe_a2a_overlap:  # model_parallel_config.py overlap_moe_expert_parallel_comm (the contract: EP > 1)
            # with the weight gradients deferred past the paired layers, as Megatron-Bridge's recipes run it
            # (overrides.py L139 @ 5776a6d9; model_parallel_config.py L348: models/time/moe_host.py times that)
            args += ["--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"]
    args += _megatron_graph_args(job, num_experts)
    args += megatron_split_args(plan, num_layers)
    if plan.vpp > 1 and not megatron_sets_vpp(plan, num_layers):
        args.append(f"--num-layers-per-virtual-pipeline-stage {num_layers // (plan.pp * plan.vpp)}")
    # fp8: Transformer Engine's current (tensorwise) scaling, the te-megatron recipe models/time/fp8.py times
    # (transformer_config.py fp8_recipe defaults to delayed)
    args += {"bf16": ["--bf16"], "fp16": ["--fp16"], "fp8": ["--bf16", "--fp8-format hybrid", "--fp8-recipe tensorwise"]
             }.get(plan.precision, [])
    args += _megatron_grad_dtype_args(job, plan)
    if plan.zero >= 1:
        args.append("--use-distributed-optimizer")
    if plan.zero <= 1:
        # the time model hides the gradient reduction behind the last micro-batch's backward and ZeRO-1's
        # parameter all-gather behind the first forward (models/time/performance.py dp_windows_s), as
        # Megatron-Bridge's recipes run them; Megatron-LM's arguments.py defaults both to off (store_true)
        args.append("--overlap-grad-reduce")
        if plan.zero == 1:
            args.append("--overlap-param-gather")
    if plan.zero >= 2:  # Megatron-FSDP v1 (models/memory/megatron_fsdp.py), which needs its DTensor checkpoints
        strategy = "optim_grads" if plan.zero == 2 else "optim_grads_params"  # arguments.py L1169-1170 @ d98e8a64
        args += ["--use-megatron-fsdp", f"--data-parallel-sharding-strategy {strategy}", "--ckpt-format fsdp_dtensor"]
    if plan.offload == "optimizer":  # arguments.py validation: CPU offload needs the precision-aware optimizer
        args += ["--optimizer-cpu-offload", "--optimizer-offload-fraction 1.0", "--use-precision-aware-optimizer"]
    if job.activation_offload:
        # Layer-level CPU offloading of all but the last layer's activations (at most num_layers - 1:
        # transformer_config.py L1884-1889 @ d98e8a64; arguments.py L1950-1951 turns cpu_offloading on): the
        # layer in use and the one reloading stay, as models/memory/recompute.py counts. The contract
        # keeps it to pp 1 and no recompute (catalogues/stack_capabilities.csv activation_offload_excludes).
        args.append(f"--cpu-offloading-num-layers {num_layers - 1}")
    if plan.recompute == "selective":
        if job.selective != "attention":  # Megatron's selective granularity recomputes the attention core
            raise VramplanError("selective", job.selective, "Megatron-LM's selective recompute is the attention core "
                                                            "(--recompute-granularity selective): use --selective attention")
        args.append("--recompute-granularity selective")
    elif plan.recompute == "full":
        # block: the first N layers of every model chunk; every layer of the largest chunk is all of them
        layers = recompute_block(job, plan)
        args += ["--recompute-granularity full", "--recompute-method block",
                 f"--recompute-num-layers {layers if layers is not None else _chunk_layers(plan, num_layers)}"]
    return args


def _megatron_grad_dtype_args(job: Job, plan: Plan) -> list[str]:
    """The gradient buffer's dtype the job's accounting counts (models/memory/precision.py: "hf" 4
    bytes, "zero" 2): Megatron's grad_dtype is fp32 when grad_reduce_in_fp32 =
    accumulate_allreduce_grads_in_fp32, else the parameter's (NVIDIA/Megatron-LM@d98e8a64
    megatron/core/distributed/param_and_grad_buffer.py L924, megatron/training/training.py L2635).
    --fp16 leaves it off unless --accumulate-allreduce-grads-in-fp32 is given (arguments.py L3069);
    --bf16 turns it on unless --grad-reduce-in-bf16 is (arguments.py L1204-1217). A 16-bit buffer
    also makes the optimizer step copy it to fp32 (models/memory/model_states.py step_grad_copy_bytes).
    Megatron-FSDP (ZeRO-2/3) reads neither flag: its main gradients are the parameters' dtype unless
    --megatron-fsdp-main-grads-dtype fp32 (megatron_fsdp/param_and_grad_buffer.py L2313-2322)."""
    if plan.zero >= 2:
        return ["--megatron-fsdp-main-grads-dtype fp32"] if job.accounting == "hf" else []
    if plan.precision == "fp16" and job.accounting == "hf":
        return ["--accumulate-allreduce-grads-in-fp32"]
    if plan.precision in ("bf16", "fp8") and job.accounting == "zero":
        return ["--grad-reduce-in-bf16"]
    return []


def _megatron_dispatcher_args(job: Job) -> list[str]:
    """The job's MoE token dispatcher (models/time/moe_dispatch.py): core_v0.19.0 transformer_config.py
    moe_token_dispatcher_type ('allgather', 'alltoall', 'flex') and, for flex, moe_flex_dispatcher_backend
    ('deepep', 'hybridep', 'ncclep')."""
    if job.moe_dispatcher == "alltoall":
        return ["--moe-token-dispatcher-type alltoall"]
    return ["--moe-token-dispatcher-type flex", f"--moe-flex-dispatcher-backend {job.moe_dispatcher}"]


def _chunk_layers(plan: Plan, num_layers: int) -> int:
    return largest_chunk(num_layers, plan.stage_layers if plan.stage_layers is not None else plan.pp, plan.vpp)


TORCHTITAN_OPTIMIZERS = {"adamw": "AdamW"}  # v0.2.2 components/optimizer.py: Adam and AdamW only


def _torchtitan(job: Job, plan: Plan, num_layers: int) -> dict[str, dict]:
    if plan.precision == "fp16":
        raise VramplanError("precision", "fp16", "torchtitan trains in bfloat16 or float32 (mixed_precision_param)")
    if job.method != "full":  # LoRA is in torchtitan main (b5bcd76), not in the v0.2.2 JobConfig written here
        raise VramplanError("method", job.method, "torchtitan v0.2.2 has no LoRA (its main branch does, unreleased); "
                                                  "no config written")
    if job.optimizer not in TORCHTITAN_OPTIMIZERS:
        raise VramplanError("optimizer", job.optimizer, "torchtitan v0.2.2 builds Adam or AdamW ([optimizer] name)")
    if job.recompute_layers is None and plan.recompute == "selective" and job.selective != "op":
        raise VramplanError("selective", job.selective, "torchtitan's selective checkpointing is per op "
                                                        "(selective_ac_option op): use --selective op")
    # model parallelism only beside FSDP over more than one rank (the contract's rule, which the search keeps)
    if zero_layout_refusal(job.stack, plan.zero, plan.layout, plan.num_gpus, plan.offload) is not None:
        raise VramplanError("zero", plan.zero, "torchtitan runs TP, PP and EP only beside FSDP (ZeRO-2/3): without it "
                                               "it refuses DDP and trains in float32; no config written")
    shard = plan.dp if plan.zero >= 2 else 1  # FSDP2 over the data-parallel ranks; ZeRO-0 replicates
    parallelism: dict[str, object] = {
        "data_parallel_replicate_degree": plan.dp // shard, "data_parallel_shard_degree": shard,
        "tensor_parallel_degree": plan.tp, "pipeline_parallel_degree": plan.pp,
        "context_parallel_degree": plan.cp, "expert_parallel_degree": plan.ep,
    }
    if plan.ep > 1 and plan.tp > 1:  # experts split over the TP ranks, as modelled (job_config.py: etp = tp or 1, default 1)
        parallelism["expert_tensor_parallel_degree"] = plan.tp
    if shard > 1:  # ZeRO-3 reshards after forward, ZeRO-2 keeps the gathered parameters
        parallelism["fsdp_reshard_after_forward"] = "always" if plan.zero == 3 else "never"
    if job.tp_overlap and plan.tp > 1:  # v0.2.2 distributed/tensor_parallel.py maybe_enable_async_tp
        if job.compile == "none":
            raise VramplanError("tp_overlap", True, "torchtitan's async TP needs torch.compile of the blocks "
                                                    "(maybe_enable_async_tp raises without it): add --compile")
        parallelism["enable_async_tensor_parallel"] = True
    if job.moe_dispatcher != "alltoall" and plan.ep > 1:  # v0.2.2 job_config.py Parallelism.expert_parallel_comm_backend
        if job.moe_dispatcher != "deepep":
            raise VramplanError("moe_dispatcher", job.moe_dispatcher, "torchtitan's expert_parallel_comm_backend is "
                                                                      "standard or deepep: use --moe-dispatcher deepep")
        parallelism["expert_parallel_comm_backend"] = "deepep"
    # accumulation: global / (local x dp) micro-steps (train.py gradient_accumulation_steps)
    training: dict[str, object] = {
        "local_batch_size": plan.micro_batch, "global_batch_size": plan.global_batch,
        "seq_len": job.seq_len, "mixed_precision_param": "bfloat16"}
    if plan.pp > 1:
        parallelism["pipeline_parallel_schedule"] = "Interleaved1F1B" if plan.vpp > 1 else "1F1B"
        parallelism["module_fqns_per_model_part"] = torchtitan_model_parts(plan, num_layers)
        # the schedule's micro-batches are local_batch_size / pipeline_parallel_microbatch_size
        # (pipeline_parallel.py build_pipeline_schedule): every micro-batch of the step in one schedule, as
        # planned (with local_batch_size = micro_batch each ran as a pipeline flush of its own)
        training["local_batch_size"] = plan.micro_batch * plan.grad_accum
        parallelism["pipeline_parallel_microbatch_size"] = plan.micro_batch
    if plan.offload == "optimizer+params":  # FSDP CPU offload of parameters, gradients and optimizer states
        training["enable_cpu_offload"] = True
    block = recompute_block(job, plan)
    if plan.recompute == "full" and block is not None and block < _chunk_layers(plan, num_layers):
        # every n-th block, counted by one counter per process across the rank's model parts
        # (activation_checkpoint.py L37-40): a chunk of L layers checkpoints at least L // n of them, so n
        # is the smallest chunk // N and every chunk checkpoints at least the N the memory counts
        # (round(largest / N) left the first rank of a 19,20,20,21 split 4 of its planned 5)
        smallest = min(split_of(num_layers, plan.stage_layers or plan.pp)) // plan.vpp
        checkpoint = {"mode": "selective", "selective_ac_option": str(max(1, smallest // block))}
    else:
        checkpoint = {"mode": {"none": "none", "full": "full"}.get(plan.recompute, "selective")}
        if plan.recompute in ("selective", "op"):
            checkpoint["selective_ac_option"] = "op"
    sections: dict[str, dict] = {"parallelism": parallelism, "training": training, "activation_checkpoint": checkpoint}
    if plan.precision == "fp8":  # torchao Float8Linear, tensorwise by default (components/quantization/float8.py)
        sections["model"] = {"converters": ["quantize.linear.float8"]}
    if job.compile != "none":  # v0.2.2 job_config.py Compile: enable, components (default ["model", "loss"])
        sections["compile"] = {"enable": True, "components": ["model"] if job.compile == "model" else ["model", "loss"]}
    return sections


def _toml(sections: dict[str, dict]) -> str:
    def value(v: object) -> str:
        return ("true" if v else "false") if isinstance(v, bool) else json.dumps(v)

    return "\n".join(f"[{name}]\n" + "".join(f"{key} = {value(v)}\n" for key, v in body.items())
                     for name, body in sections.items())


def _shell(args: list[str]) -> str:
    return "# Megatron-LM arguments for this plan (pretrain_gpt.py)\nMEGATRON_ARGS=(\n" + \
        "".join(f"  {arg}\n" for arg in args) + ")\n"
