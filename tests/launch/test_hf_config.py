"""The hf stack's launch configuration (launch/hf.py): every section's keys are the keyword arguments
transformers, accelerate and peft publish, every value inside its domain, and the values are the plan's.

Published names and domains, copied from:
- transformers 5.25.0 (the PyPI wheel the contract cites): src/transformers/training_args.py
  TrainingArguments fields per_device_train_batch_size, gradient_accumulation_steps, bf16, fp16,
  optim (OptimizerNames: adamw_torch, adamw_bnb_8bit, paged_adamw_8bit, sgd), activation_checkpointing
  (`gradient_checkpointing` is its deprecated alias, "will be removed in v6") and
  activation_checkpointing_kwargs (every_n_layers, offload: trainer.py pops both and passes them to
  modeling_utils.py activation_checkpointing_enable, which checkpoints layers with index % n == 0
  and holds their saved inputs in pinned host memory), use_liger_kernel, fsdp (`fsdp=True`; the
  string form is deprecated) and fsdp_config (its docstring's keys: version 1|2, reshard_after_forward,
  cpu_offload, activation_checkpointing; _process_fsdp_args), deepspeed (a dict), parallelism_config;
  training_args.py __post_init__: ACCELERATE_MIXED_PRECISION is overridden by bf16/fp16, so fp8
  needs both false; modeling_utils.py from_pretrained dtype (default "auto": the checkpoint's own);
  distributed/configuration_utils.py DistributedConfig (tp_size, fsdp_size, ep_size,
  fsdp_cpu_offload; its FSDP reshards after forward, distributed/fsdp.py
  apply_fully_sharded_data_parallelism); trainer.py _build_accelerator_args (a model with tp_size >
  1 gets ParallelismConfig(tp_size, dp_shard_size=model dp_size)); utils/quantization_config.py
  BitsAndBytesConfig (load_in_4bit, load_in_8bit, bnb_4bit_quant_type fp4|nf4,
  bnb_4bit_use_double_quant, bnb_4bit_compute_dtype, bnb_4bit_quant_storage: float16, float32,
  int8, uint8, float64, bfloat16); integrations/deepspeed.py trainer_config_process
  (train_batch_size checked against every process).
- accelerate v1.14.0 (beb0672): src/accelerate/parallelism_config.py ParallelismConfig
  (dp_replicate_size, dp_shard_size, tp_size, cp_size, cp_backend "torch", sp_size, sp_backend
  "deepspeed"; TP/CP refused over pure DDP replicas), state.py (cp_size > 1 needs an FSDP2 plugin),
  commands/launch.py (`--num_processes`, `--mixed_precision` no|fp16|bf16|fp8),
  utils/dataclasses.py DeepSpeedPlugin.set_mixed_precision (fp8 keeps bf16.enabled).
- peft v0.20.0 (a5526d2): src/peft/tuners/lora/config.py LoraConfig (r, target_modules: a list or
  "all-linear", utils/constants.py INCLUDE_LINEAR_LAYERS_SHORTHAND), utils/other.py
  prepare_model_for_kbit_training(use_gradient_checkpointing=True by default),
  docs/source/accelerate/fsdp.md and deepspeed.md (QLoRA sharded: bnb_4bit_quant_storage).
"""

from __future__ import annotations

import json

import pytest
from helpers.cli import invoke
from published import BOOL, INT, assert_refused, check_deepspeed, check_keys, job, list_of_str

from vramplan.launch.configs import LaunchModel, launch_config
from vramplan.models.core.setup import Plan

DTYPES = ("float16", "bfloat16", "float32")
HF = {
    "training_args": {
        "per_device_train_batch_size": INT, "gradient_accumulation_steps": INT, "bf16": BOOL, "fp16": BOOL,
        "optim": ("adamw_torch", "adamw_bnb_8bit", "paged_adamw_8bit", "sgd"),
        "activation_checkpointing": BOOL, "activation_checkpointing_kwargs": {"every_n_layers": INT, "offload": BOOL},
        "use_liger_kernel": BOOL, "torch_compile": (True,), "fsdp": (True,),
        "fsdp_config": {"version": (1, 2), "reshard_after_forward": BOOL, "cpu_offload": BOOL, "activation_checkpointing": BOOL},
        # trainer_pt_utils.py AcceleratorConfig.gradient_accumulation_kwargs, passed to accelerate's
        # GradientAccumulationPlugin (utils/dataclasses.py: num_steps, adjust_scheduler, sync_with_dataloader,
        # sync_each_batch)
        "accelerator_config": {"gradient_accumulation_kwargs": {"sync_each_batch": (True,)}},
        "deepspeed": lambda value: isinstance(value, dict),  # checked against DEEPSPEED below
    },
    "distributed_config": {"tp_size": INT, "fsdp_size": INT, "ep_size": INT, "fsdp_cpu_offload": BOOL},
    "parallelism_config": {"dp_replicate_size": INT, "dp_shard_size": INT, "tp_size": INT, "cp_size": INT,
                           "sp_size": INT, "sp_backend": ("deepspeed",)},
    "from_pretrained": {"dtype": DTYPES},
    "lora_config": {"r": INT, "target_modules": lambda v: v == "all-linear" or list_of_str(v)},
    "bnb_config": {"load_in_4bit": BOOL, "load_in_8bit": BOOL, "bnb_4bit_quant_type": ("fp4", "nf4"),
                   "bnb_4bit_use_double_quant": BOOL, "bnb_4bit_compute_dtype": DTYPES,
                   "bnb_4bit_quant_storage": ("float16", "float32", "int8", "uint8", "float64", "bfloat16")},
    "prepare_model_for_kbit_training": {"use_gradient_checkpointing": BOOL},
    "accelerate_launch": {"num_processes": INT, "mixed_precision": ("no", "fp16", "bf16", "fp8")},
}
H100 = "h100-sxm-80gb"
CASES = [  # (job fields, plan, the engine that runs its data parallelism)
    ({}, Plan(gpu=H100), "plain"),
    ({"optimizer": "adamw-8bit"}, Plan(gpu=H100, num_gpus=8, micro_batch=2, grad_accum=4, recompute="full"), "plain"),
    ({}, Plan(gpu=H100, num_gpus=8, zero=2, recompute="full"), "fsdp"),
    ({"loss": "fused"}, Plan(gpu=H100, num_gpus=16, zero=3, offload="optimizer+params", precision="fp8"), "fsdp"),
    ({}, Plan(gpu=H100, num_gpus=8, zero=3, offload="optimizer", recompute="full"), "deepspeed"),
    ({}, Plan(gpu=H100, num_gpus=8, zero=1, tp=2, grad_accum=16), "deepspeed"),
    ({}, Plan(gpu=H100, offload="optimizer", zero=1, precision="fp16"), "deepspeed"),
    ({"compile": "model+loss"}, Plan(gpu=H100, num_gpus=8, zero=3, recompute="full"), "fsdp"),
    ({}, Plan(gpu=H100, num_gpus=16, zero=3, tp=4, recompute="full"), "distributed"),
    ({}, Plan(gpu=H100, num_gpus=8, zero=3, cp=2), "fsdp"),
    ({}, Plan(gpu=H100, num_gpus=8, zero=1, cp=2), "deepspeed"),
    ({"method": "lora", "lora_targets": ("q_proj", "v_proj")}, Plan(gpu=H100, num_gpus=4, zero=3), "fsdp"),
    ({"method": "qlora"}, Plan(gpu=H100, num_gpus=8, zero=3, recompute="full"), "fsdp"),
    ({"method": "qlora", "qlora_bits": 8}, Plan(gpu=H100, recompute="full", micro_batch=4), "plain"),
    ({"recompute_layers": 16}, Plan(gpu=H100, num_gpus=2, zero=2, recompute="full"), "fsdp"),
    ({"activation_offload": True}, Plan(gpu=H100, recompute="full"), "plain"),
]


def _engine(args: dict, sections: dict) -> str:
    if "fsdp" in args:
        return "fsdp"
    if "deepspeed" in args:
        return "deepspeed"
    return "distributed" if "distributed_config" in sections else "plain"


@pytest.mark.parametrize(("fields", "plan", "engine"), CASES, ids=[f"hf-{i}" for i in range(len(CASES))])
def test_every_key_is_published_and_every_value_is_the_plans(fields, plan, engine):
    the_job = job("hf", **fields)
    config = launch_config(the_job, plan, LaunchModel(32))
    assert (config.stack, config.extension) == ("hf", ".json")
    data = json.loads(config.text)
    check_keys(data, HF)
    args = data["training_args"]
    assert (args["per_device_train_batch_size"], args["gradient_accumulation_steps"]) == (plan.micro_batch, plan.grad_accum)
    assert (args["bf16"], args["fp16"]) == (plan.precision == "bf16", plan.precision == "fp16")
    assert data["accelerate_launch"] == {"num_processes": plan.num_gpus, "mixed_precision": {
        "bf16": "bf16", "fp16": "fp16", "fp32": "no", "fp8": "fp8"}[plan.precision]}
    assert _engine(args, data) == engine
    fsdp = args.get("fsdp_config", {})
    if engine == "fsdp":
        assert fsdp["reshard_after_forward"] == (plan.zero == 3) and fsdp["cpu_offload"] == (plan.offload == "optimizer+params")
    if engine == "deepspeed":
        check_deepspeed(args["deepspeed"], plan)
    if engine == "distributed":
        assert data["distributed_config"]["tp_size"] == plan.tp
        assert data["distributed_config"]["fsdp_size"] == (plan.dp if plan.zero == 3 else 1)
    parallel = data.get("parallelism_config")
    assert (parallel is not None) == (plan.tp > 1 and engine != "deepspeed" or plan.cp > 1)
    if parallel is not None and "sp_size" in parallel:
        assert parallel == {"sp_size": plan.cp, "sp_backend": "deepspeed"}
    elif parallel is not None:  # the ranks accelerate's mesh covers are the plan's
        assert parallel["dp_replicate_size"] * parallel["dp_shard_size"] * parallel["tp_size"] * parallel["cp_size"] \
            == plan.num_gpus
    recompute = args["activation_checkpointing"] or fsdp.get("activation_checkpointing", False)
    assert recompute == (plan.recompute == "full")
    kwargs = args.get("activation_checkpointing_kwargs", {})
    if the_job.recompute_layers is not None:
        assert -(-32 // kwargs["every_n_layers"]) == the_job.recompute_layers
    assert kwargs.get("offload", False) == the_job.activation_offload
    assert args["optim"] == {"adamw": "adamw_torch", "adamw-8bit": "adamw_bnb_8bit"}[the_job.optimizer]
    assert args["use_liger_kernel"] == (the_job.loss == "fused")
    assert args.get("torch_compile", False) == (the_job.compile == "model+loss")
    full_master = the_job.method == "full" and the_job.master_weights == "fp32"
    assert data["from_pretrained"]["dtype"] == ("float32" if full_master or plan.precision == "fp32" else
                                                {"bf16": "bfloat16", "fp16": "float16", "fp8": "bfloat16"}[plan.precision])
    if the_job.method == "full":
        assert "lora_config" not in data and "bnb_config" not in data
    else:
        assert data["lora_config"]["r"] == the_job.lora_rank
        assert data["lora_config"]["target_modules"] == (list(the_job.lora_targets) if the_job.lora_targets else "all-linear")
    if the_job.method == "qlora":
        bnb = data["bnb_config"]
        assert bnb.get("load_in_4bit", False) == (the_job.qlora_bits == 4) and bnb.get("load_in_8bit", False) == (the_job.qlora_bits == 8)
        assert ("bnb_4bit_quant_storage" in bnb) == (the_job.qlora_bits == 4 and plan.zero >= 2 and plan.num_gpus > 1)
        assert data["prepare_model_for_kbit_training"]["use_gradient_checkpointing"] == args["activation_checkpointing"]


@pytest.mark.parametrize(("fields", "plan", "field"), [
    ({}, Plan(gpu=H100, recompute="op"), "recompute"),
    ({"loss": "chunked"}, Plan(gpu=H100), "loss"),
    ({}, Plan(gpu=H100, num_gpus=8, pp=2), "pp"),
    ({"activation_offload": True}, Plan(gpu=H100), "activation_offload"),
    ({"recompute_layers": 9}, Plan(gpu=H100, recompute="full"), "recompute_layers"),  # no n gives ceil(32/n) = 9
    ({"optimizer_in_backward": True}, Plan(gpu=H100), "optimizer_in_backward"),
    ({"attention": "eager"}, Plan(gpu=H100, recompute="selective"), "recompute"),
    ({"compile": "model"}, Plan(gpu=H100), "compile"),  # torch_compile compiles the loss with the model
])
def test_what_hf_cannot_express_is_one_line_naming_the_field(fields, plan, field):
    assert_refused("hf", fields, plan, field)


def test_selective_attention_recompute_under_flash_is_no_checkpointing():
    data = json.loads(launch_config(job("hf"), Plan(gpu=H100, recompute="selective"), LaunchModel(32)).text)
    assert data["training_args"]["activation_checkpointing"] is False


def test_estimate_writes_the_hf_config(tmp_path):
    path = tmp_path / "hf.json"
    result = invoke("estimate", "--model", "llama-3.1-8b", "--seq-len", "4096", "--gpu", H100, "--stack", "hf",
                    "--method", "qlora", "--num-gpus", "4", "--zero", "3", "--recompute", "full", "--micro-batch", "2",
                    "--launch-config", str(path))
    assert result.exit_code == 0, result.output
    data = json.loads(path.read_text(encoding="utf-8"))
    check_keys(data, HF)
    assert data["training_args"]["fsdp_config"]["reshard_after_forward"] is True
    assert data["training_args"]["per_device_train_batch_size"] == 2 and data["lora_config"]["r"] == 16
    assert data["bnb_config"]["bnb_4bit_quant_storage"] == "bfloat16"


def test_fsdp_with_accumulation_syncs_each_micro_batch():
    """Under FSDP the Trainer's default skips the gradient sync on all but a step's last micro-batch
    and holds every gradient whole (models/memory/accumulation_note.py); the configuration sets
    sync_each_batch there, so the run reduce-scatters into the shard the estimate holds, and says nothing
    where there is one micro-batch a step or DeepSpeed runs the plan (which ignores no_sync)."""
    def sections(**plan) -> dict:
        return json.loads(launch_config(job("hf"), Plan(gpu="h100-sxm-80gb", num_gpus=8, **plan), LaunchModel(32)).text)

    accumulating = sections(zero=3, micro_batch=1, grad_accum=4)["training_args"]
    assert accumulating["fsdp"] is True
    assert accumulating["accelerator_config"] == {"gradient_accumulation_kwargs": {"sync_each_batch": True}}
    assert "accelerator_config" not in sections(zero=3, micro_batch=4, grad_accum=1)["training_args"]
    assert "accelerator_config" not in sections(zero=1, micro_batch=1, grad_accum=4)["training_args"]  # DeepSpeed
