"""The Hugging Face stacks' launch configurations: `hf` (Trainer + accelerate + PEFT) and `unsloth`
(FastLanguageModel + TRL's SFTTrainer), one JSON of sections whose keys are the keyword arguments of
the call each section names.

hf (transformers 5.25.0, accelerate v1.14.0, peft v0.20.0):
- `training_args` (TrainingArguments): batch sizes, bf16/fp16, optim, activation checkpointing
  (`activation_checkpointing`; `gradient_checkpointing` is its deprecated alias in 5.25), its
  kwargs `every_n_layers` (a partial recompute) and `offload` (activation offload),
  `use_liger_kernel` for the fused loss/kernels, and the data-parallel engine:
  - ZeRO-2/3 on several GPUs without TP/EP: `fsdp: true` + `fsdp_config` (FSDP2;
    reshard_after_forward false for ZeRO-2, cpu_offload for offload optimizer+params, FSDP's own
    activation_checkpointing, which 5.25 prefers under FSDP);
  - TP/EP: the model is sharded at load (`distributed_config`, DistributedConfig: tp_size, ep_size,
    fsdp_size = dp under ZeRO-3, fsdp_cpu_offload) where that expresses the plan (ZeRO-3, or ZeRO-0
    on one replica, no CP); the Trainer then builds the matching ParallelismConfig itself;
  - otherwise `deepspeed`, the deepspeed writer's dict inline (ZeRO-1, offload "optimizer", ZeRO-0
    with TP over replicas, one GPU with ZeRO, CP without FSDP as Ulysses);
- `parallelism_config` (accelerate ParallelismConfig kwargs) when TP or CP > 1: dp_shard_size,
  tp_size, cp_size (torch CP needs FSDP2), or sp_size/sp_backend "deepspeed" on the DeepSpeed path;
- `from_pretrained`: dtype (fp32 weights when an fp32 master copy is planned: 5.x loads the
  checkpoint's own dtype by default);
- `lora_config` (LoraConfig: r, target_modules, "all-linear" for every linear of the blocks);
- `bnb_config` (BitsAndBytesConfig) and `prepare_model_for_kbit_training` for QLoRA;
- `accelerate_launch` (`accelerate launch` options: num_processes, mixed_precision; fp8 is only
  reachable there).

unsloth (main 015bdef; TRL <= 0.24.0, transformers <= 5.5.0): `from_pretrained`
(FastLanguageModel.from_pretrained: max_seq_length, dtype, load_in_4bit/8bit/16bit,
full_finetuning, use_gradient_checkpointing), `get_peft_model` (r, target_modules,
use_gradient_checkpointing: "unsloth" offloads the checkpointed inputs), `training_args` (SFTConfig:
TrainingArguments names plus max_length and gradient_checkpointing, which TRL turns on by default),
and `accelerate_launch` for DDP.
"""

from __future__ import annotations

import json

from vramplan.launch.common import HF_OPTIM, TORCH_DTYPE, Checkpointing, LaunchModel, checkpointing, every_nth
from vramplan.launch.deepspeed import deepspeed_dict
from vramplan.models.catalogue.stack_contract import UNSLOTH_OFFLOAD_MIN_SEQ, distributed_offload_refusal
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.hf_engine import hf_engine
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.accumulation_note import syncs_each_batch

ALL_LINEAR = "all-linear"  # peft INCLUDE_LINEAR_LAYERS_SHORTHAND: every linear module but the output layer


def _precision_flags(plan: Plan) -> dict[str, bool]:
    # fp8 runs under `accelerate launch --mixed_precision fp8`; bf16=True would override it (training_args.py)
    return {"bf16": plan.precision == "bf16", "fp16": plan.precision == "fp16"}


def _hf_checkpointing(job: Job, plan: Plan, num_layers: int, engine: str) -> tuple[dict, dict]:
    """(training_args entries, fsdp_config entries) for the plan's recompute and activation offload."""
    mode, layers = checkpointing(job, plan, num_layers, "hf")
    if mode == "op":
        raise VramplanError("recompute", plan.recompute, "hf checkpoints whole decoder layers "
                                                         "(activation_checkpointing); no per-op selective checkpointing")
    if job.activation_offload and mode != "full":
        raise VramplanError("activation_offload", True, "hf offloads only the activations activation checkpointing "
                                                        "saves (activation_checkpointing_kwargs offload): use --recompute full")
    if mode == "none":
        return {"activation_checkpointing": False}, {}
    kwargs: dict[str, object] = {}
    if layers is not None:
        stride = every_nth(num_layers, layers, first=True)
        if stride is None:
            raise VramplanError("recompute_layers", layers, f"hf checkpoints every n-th of the {num_layers} layers "
                                                            "(activation_checkpointing_kwargs every_n_layers): ceil(layers/n)")
        kwargs["every_n_layers"] = stride
    if job.activation_offload:
        kwargs["offload"] = True
    if engine == "fsdp" and not kwargs:  # FSDP's own checkpointing, without the training argument's extra all-gather
        return {"activation_checkpointing": False}, {"activation_checkpointing": True}
    args: dict[str, object] = {"activation_checkpointing": True}
    if kwargs:
        args["activation_checkpointing_kwargs"] = kwargs
    return args, {}


def _hf_kernels(job: Job) -> dict[str, bool]:
    if job.loss == "chunked":
        raise VramplanError("loss", "chunked", "the hf Trainer has no chunked cross-entropy (--loss fused is Liger's "
                                               "fused linear cross-entropy, use_liger_kernel)")
    if job.optimizer_in_backward:
        raise VramplanError("optimizer_in_backward", True, "the hf Trainer steps the optimizer after the backward")
    kernels = {"use_liger_kernel": job.loss == "fused" or job.kernels == "fused"}
    if job.compile == "model":  # accelerate compiles the model the Trainer prepares, whose forward computes the loss
        raise VramplanError("compile", "model", "the hf Trainer's torch_compile compiles the whole model, loss included "
                                                "(--compile model+loss)")
    if job.compile == "model+loss":
        kernels["torch_compile"] = True
    return kernels


def _weights_dtype(job: Job, plan: Plan) -> str:
    """from_pretrained's dtype: fp32 for a full fine-tune with an fp32 master copy, else the training precision's."""
    if job.method == "full" and job.master_weights == "fp32":
        return "float32"
    return TORCH_DTYPE[plan.precision]


def _targets(job: Job) -> list[str] | str:
    return list(job.lora_targets) if job.lora_targets is not None else ALL_LINEAR


def hf_sections(job: Job, plan: Plan, num_layers: int) -> dict[str, dict]:
    if plan.pp > 1:
        raise VramplanError("pp", plan.pp, "the hf Trainer has no pipeline parallelism")
    engine = hf_engine(plan)
    recompute, fsdp_recompute = _hf_checkpointing(job, plan, num_layers, engine)
    args: dict[str, object] = {
        "per_device_train_batch_size": plan.micro_batch, "gradient_accumulation_steps": plan.grad_accum,
        **_precision_flags(plan), "optim": HF_OPTIM[job.optimizer], **recompute, **_hf_kernels(job)}
    sections: dict[str, dict] = {"training_args": args}
    if engine == "fsdp":
        args["fsdp"] = True
        args["fsdp_config"] = {"version": 2, "reshard_after_forward": plan.zero == 3,
                               "cpu_offload": plan.offload == "optimizer+params", **fsdp_recompute}
        if syncs_each_batch(job, plan):  # the sharded gradients the estimate holds (models/memory/accumulation_note.py)
            args["accelerator_config"] = {"gradient_accumulation_kwargs": {"sync_each_batch": True}}
    elif engine == "deepspeed":
        args["deepspeed"] = deepspeed_dict(plan)
    elif engine == "distributed":
        distributed: dict[str, object] = {"tp_size": plan.tp, "fsdp_size": plan.dp if plan.zero == 3 else 1}
        if plan.ep > 1:
            distributed["ep_size"] = plan.ep
        if plan.offload == "optimizer+params":
            distributed["fsdp_cpu_offload"] = True
        sections["distributed_config"] = distributed
    if plan.cp > 1 and engine == "deepspeed":
        sections["parallelism_config"] = {"sp_size": plan.cp, "sp_backend": "deepspeed"}
    elif (plan.tp > 1 or plan.cp > 1) and engine != "deepspeed":
        sections["parallelism_config"] = {"dp_replicate_size": 1, "dp_shard_size": plan.dp if plan.zero >= 2 else 1,
                                          "tp_size": plan.tp, "cp_size": plan.cp}
    sections["from_pretrained"] = {"dtype": _weights_dtype(job, plan)}
    if job.method != "full":
        sections["lora_config"] = {"r": job.lora_rank, "target_modules": _targets(job)}
    if job.method == "qlora":
        sections["bnb_config"] = _bnb(job, plan)
        if job.qlora_prep == "peft":  # casts the non-quantised parameters to fp32; its checkpointing default is True
            sections["prepare_model_for_kbit_training"] = {"use_gradient_checkpointing": args["activation_checkpointing"]}
    sections["accelerate_launch"] = {"num_processes": plan.num_gpus, "mixed_precision": {
        "bf16": "bf16", "fp16": "fp16", "fp32": "no", "fp8": "fp8"}[plan.precision]}
    return sections


def _bnb(job: Job, plan: Plan) -> dict[str, object]:
    if job.qlora_bits == 8:
        return {"load_in_8bit": True}
    compute = TORCH_DTYPE[plan.precision]
    config: dict[str, object] = {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True,
                                 "bnb_4bit_compute_dtype": compute}
    if plan.zero >= 2 and plan.num_gpus > 1:  # sharded 4-bit weights: peft docs accelerate/fsdp.md, deepspeed.md
        config["bnb_4bit_quant_storage"] = compute
    return config


def unsloth_sections(job: Job, plan: Plan, model: LaunchModel) -> dict[str, dict]:
    for field in ("tp", "pp", "cp", "ep"):
        if getattr(plan, field) > 1:
            raise VramplanError(field, getattr(plan, field), "unsloth runs one GPU or DDP replicas, one whole model each")
    if plan.zero or plan.offload != "none":
        field, value = ("zero", plan.zero) if plan.zero else ("offload", plan.offload)
        raise VramplanError(field, value, "unsloth runs one GPU or DDP replicas: no ZeRO sharding or offload")
    if plan.precision not in ("bf16", "fp16"):
        raise VramplanError("precision", plan.precision, "unsloth trains in bfloat16 or float16 "
                                                          "(FastLanguageModel.from_pretrained dtype)")
    _refuse_unsloth_recipe(job, plan, model)
    checkpoint = _unsloth_checkpointing(job, plan, model.num_layers)
    dtype = TORCH_DTYPE[plan.precision]
    loading: dict[str, object] = {}
    if model.checkpoint:
        loading["model_name"] = model.checkpoint  # without it Unsloth loads its own default model (loader.py)
    loading.update({
        "max_seq_length": job.seq_len, "dtype": dtype,
        "load_in_4bit": job.method == "qlora" and job.qlora_bits == 4,
        "load_in_8bit": job.method == "qlora" and job.qlora_bits == 8,
        "load_in_16bit": job.method == "lora", "full_finetuning": job.method == "full",
        "use_gradient_checkpointing": checkpoint})
    if job.method == "full":
        # an fp32 master copy is Unsloth's float32 mixed precision (vision.py _resolve_full_finetune_dtype:
        # bf16 full fine-tuning stays pure bf16 unless it is True; fp16 always upcasts)
        loading["float32_mixed_precision"] = job.master_weights == "fp32"
    sections: dict[str, dict] = {"from_pretrained": loading}
    if job.method != "full":
        # the modules the plan adapts (Unsloth's own default is Llama's seven: FastLlamaModel.get_peft_model)
        targets = list(job.lora_targets) if job.lora_targets is not None else list(model.lora_modules)
        sections["get_peft_model"] = {"r": job.lora_rank, "target_modules": targets, "lora_dropout": job.lora_dropout,
                                      "use_gradient_checkpointing": checkpoint}
    args: dict[str, object] = {
        "per_device_train_batch_size": plan.micro_batch, "gradient_accumulation_steps": plan.grad_accum,
        **_precision_flags(plan), "optim": HF_OPTIM[job.optimizer], "gradient_checkpointing": checkpoint is not False,
        "max_length": job.seq_len}
    sections["training_args"] = args
    if plan.num_gpus > 1:  # DDP: one whole model per GPU (loader_utils.py prepare_device_map)
        # a PEFT model is no PreTrainedModel, for which transformers' Trainer turns find_unused_parameters
        # on, and Unsloth's re-entrant checkpointing then fails ("marked ready twice"); its own DDP
        # script sets it off (unsloth-cli.py)
        args["ddp_find_unused_parameters"] = False
        sections["accelerate_launch"] = {"num_processes": plan.num_gpus}
    return sections


def _refuse_unsloth_recipe(job: Job, plan: Plan, model: LaunchModel) -> None:
    """What the plan counts that Unsloth does not run: one line naming the field."""
    if job.optimizer_in_backward:
        raise VramplanError("optimizer_in_backward", True, "unsloth (TRL SFTTrainer) steps the optimizer after the backward")
    if job.loss != "fused":
        raise VramplanError("loss", job.loss, "unsloth computes its own loss without materialising the logits "
                                              "(--loss fused, the unsloth preset)")
    if job.kernels != "fused" or job.attention != "flash":
        field, value = ("kernels", job.kernels) if job.kernels != "fused" else ("attention", job.attention)
        raise VramplanError(field, value, "unsloth runs its own Triton kernels and fused attention "
                                          "(--kernels fused --attention flash, the unsloth preset)")
    if job.method == "lora" and job.base_dtype == "fp32":
        raise VramplanError("base_dtype", "fp32", "unsloth loads the frozen base in the training dtype (16-bit)")
    if job.method == "qlora" and job.qlora_prep == "peft":
        raise VramplanError("qlora_prep", "peft", "unsloth keeps the non-quantised parameters in 16 bits and never "
                                                  "calls peft's prepare_model_for_kbit_training (--qlora-prep 16bit)")
    if job.method == "full" and job.master_weights == "none" and plan.precision == "fp16":
        raise VramplanError("master_weights", "none", "unsloth upcasts an fp16 full fine-tune to float32 mixed precision")
    if (refusal := distributed_offload_refusal(job, model.model_type, plan.num_gpus)) is not None:
        raise VramplanError(refusal[0], refusal[1], f"unsloth does not run {refusal[2]}")


def _unsloth_checkpointing(job: Job, plan: Plan, num_layers: int) -> bool | str:
    mode: Checkpointing
    mode, layers = checkpointing(job, plan, num_layers, "unsloth")
    if mode == "op" or layers is not None:
        raise VramplanError("recompute", plan.recompute_label, "unsloth checkpoints every decoder layer or none "
                                                               "(use_gradient_checkpointing)")
    if not job.activation_offload:
        return mode == "full"
    if mode != "full":
        raise VramplanError("activation_offload", True, "unsloth offloads the checkpointed layer inputs: "
                                                        "use --recompute full")
    if job.seq_len < UNSLOTH_OFFLOAD_MIN_SEQ:
        raise VramplanError("activation_offload", True, f"unsloth offloads only at max_seq_length >= "
                                                        f"{UNSLOTH_OFFLOAD_MIN_SEQ} (below, 'unsloth' checkpointing keeps "
                                                        "the inputs on the GPU)")
    return "unsloth"


def json_text(sections: dict[str, dict]) -> str:
    return json.dumps(sections, indent=2) + "\n"
