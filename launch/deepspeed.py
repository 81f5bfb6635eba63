"""The DeepSpeed configuration of a plan (DeepSpeed v0.19.5), as the `deepspeed` stack writes it and
the `hf` stack inlines it (TrainingArguments.deepspeed) where FSDP cannot express the plan.

Batch sizes (train_batch_size only without TP/CP: the HF Trainer checks it against every process,
transformers integrations/deepspeed.py trainer_config_process, while DeepSpeed counts its
data-parallel ranks, so with AutoTP or Ulysses DeepSpeed derives it from the micro-batch and
accumulation, runtime/config.py _set_batch_related_parameters); bf16 (also for fp8: accelerate's
DeepSpeedPlugin.set_mixed_precision keeps bf16 autocast under fp8) or fp16; zero_optimization with
its offloads; tensor_parallel.autotp_size for TP (AutoTP); sequence_parallel_size for CP (Ulysses,
runtime/config.py; accelerate's ParallelismConfig sp_size names the same degree); expert_parallel
(AutoEP, docs/_pages/config-json.md) for EP, beside AutoTP only where v0.19.5's folding runs it (ZeRO 0-2,
no offload, no Ulysses: module_inject/auto_ep_folding.py validate_folding_global; the contract's rule,
stack_contract.zero_layout_refusal). Activation checkpointing is the Trainer's, not DeepSpeed's.
"""

from __future__ import annotations

from vramplan.models.catalogue.stack_contract import zero_layout_refusal
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Plan


def deepspeed_dict(plan: Plan) -> dict:
    refusal = zero_layout_refusal("deepspeed", plan.zero, plan.layout, plan.num_gpus, plan.offload)
    if refusal is not None:  # DeepSpeed's AutoEP folding rules (what the contract forbids the search)
        field, value, feature = refusal
        raise VramplanError(field, value, f"DeepSpeed v0.19.5 does not run {feature} "
                                          "(module_inject/auto_ep_folding.py validate_folding_global)")
    zero: dict = {"stage": plan.zero, "overlap_comm": True, "contiguous_gradients": True}
    if plan.offload in ("optimizer", "optimizer+params"):
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if plan.offload == "optimizer+params":
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    config: dict = {
        "train_batch_size": plan.global_batch,
        "train_micro_batch_size_per_gpu": plan.micro_batch,
        "gradient_accumulation_steps": plan.grad_accum,
        "bf16": {"enabled": plan.precision in ("bf16", "fp8")},
        "fp16": {"enabled": plan.precision == "fp16"},
        "zero_optimization": zero,
    }
    if plan.tp > 1 or plan.cp > 1:  # ranks sharing a batch: see the module docstring
        del config["train_batch_size"]
    if plan.tp > 1:
        config["tensor_parallel"] = {"autotp_size": plan.tp}
    if plan.cp > 1:
        config["sequence_parallel_size"] = plan.cp
    if plan.ep > 1:
        config["expert_parallel"] = {"enabled": True, "autoep_size": plan.ep}
    return config
