"""The unsloth stack's launch configuration (launch/hf.py): the keyword arguments of
FastLanguageModel.from_pretrained and get_peft_model, TRL's SFTConfig and `accelerate launch`, each a
published name with a value in its domain, the values the plan's.

Published names and domains, copied from:
- unsloth main 015bdef (unsloth/_version.py 2026.8.19): unsloth/models/loader.py
  FastLanguageModel.from_pretrained (max_seq_length, dtype: None or "float16"/"bfloat16" strings,
  converted with getattr(torch, ...), then asserted float16|bfloat16|float32; load_in_4bit default
  True, load_in_8bit, load_in_16bit, full_finetuning, use_gradient_checkpointing default "unsloth"),
  unsloth/models/llama.py FastLlamaModel.get_peft_model (r, target_modules, default q/k/v/o and
  gate/up/down_proj, use_gradient_checkpointing: "unsloth", True, False), unsloth/models/_utils.py
  apply_unsloth_gradient_checkpointing ("unsloth" below max_seq_length 512 is plain checkpointing),
  loader_utils.py prepare_device_map (DDP: one model per LOCAL_RANK); pyproject.toml pins
  transformers <= 5.5.0 and trl <= 0.24.0. from_pretrained's model_name and float32_mixed_precision
  (vision.py _resolve_full_finetune_dtype: bf16 full fine-tuning stays bf16 unless True; fp16
  always upcasts), get_peft_model's lora_dropout (default 0.0), unsloth-cli.py's DDP
  ddp_find_unused_parameters=False (unslothai/unsloth#3713: "marked ready twice" otherwise).
- trl 0.24.0 (PyPI wheel): trl/trainer/sft_config.py SFTConfig(TrainingArguments): max_length
  (default 1024), gradient_checkpointing (default True), bf16 (default: not fp16).
- transformers (TrainingArguments, as in test_hf_config.py): per_device_train_batch_size,
  gradient_accumulation_steps, bf16, fp16, optim (adamw_torch, adamw_bnb_8bit, paged_adamw_8bit, sgd).
- accelerate v1.14.0 (beb0672): commands/launch.py --num_processes.
"""

from __future__ import annotations

import json

import pytest
from helpers.cli import invoke
from published import BOOL, INT, assert_refused, check_keys, job, list_of_str

from vramplan.launch.configs import LaunchModel, launch_config, launch_model
from vramplan.models.catalogue.catalogue import load_catalogue
from vramplan.models.core.setup import Plan

CHECKPOINTING = (True, False, "unsloth")
UNSLOTH = {
    "from_pretrained": {"model_name": lambda v: isinstance(v, str) and v != "", "max_seq_length": INT,
                        "dtype": ("float16", "bfloat16"), "load_in_4bit": BOOL, "load_in_8bit": BOOL,
                        "load_in_16bit": BOOL, "full_finetuning": BOOL, "use_gradient_checkpointing": CHECKPOINTING,
                        "float32_mixed_precision": BOOL},
    "get_peft_model": {"r": INT, "target_modules": list_of_str, "lora_dropout": lambda v: isinstance(v, float) and 0 <= v < 1,
                       "use_gradient_checkpointing": CHECKPOINTING},
    "training_args": {"per_device_train_batch_size": INT, "gradient_accumulation_steps": INT, "bf16": BOOL, "fp16": BOOL,
                      "optim": ("adamw_torch", "adamw_bnb_8bit", "paged_adamw_8bit", "sgd"), "gradient_checkpointing": BOOL,
                      "max_length": INT, "ddp_find_unused_parameters": (False,)},
    "accelerate_launch": {"num_processes": INT},
}
H100 = "h100-sxm-80gb"
LLAMA = LaunchModel.of(load_catalogue().architecture("llama-3.1-8b"))
CASES = [  # unsloth's preset: full recompute with activation offload, adamw-8bit
    ({"method": "lora"}, Plan(gpu=H100, recompute="full", micro_batch=4, grad_accum=8)),
    ({"method": "qlora", "lora_rank": 64}, Plan(gpu=H100, recompute="full")),
    ({"method": "qlora", "qlora_bits": 8, "activation_offload": False}, Plan(gpu=H100, recompute="full", precision="fp16")),
    ({"method": "full", "activation_offload": False, "optimizer": "adamw"}, Plan(gpu=H100, recompute="none")),
    ({"method": "lora", "lora_targets": ("q_proj", "v_proj")}, Plan(gpu=H100, num_gpus=4, recompute="full", grad_accum=2)),
    ({"method": "lora", "lora_dropout": 0.1}, Plan(gpu=H100, recompute="full")),
    ({"method": "full", "activation_offload": False, "master_weights": "none"}, Plan(gpu=H100, num_gpus=2, recompute="full")),
]


@pytest.mark.parametrize(("fields", "plan"), CASES, ids=[f"unsloth-{i}" for i in range(len(CASES))])
def test_every_key_is_published_and_every_value_is_the_plans(fields, plan):
    the_job = job("unsloth", **fields)
    config = launch_config(the_job, plan, LLAMA)
    assert (config.stack, config.extension) == ("unsloth", ".json")
    data = json.loads(config.text)
    check_keys(data, UNSLOTH)
    loading, args = data["from_pretrained"], data["training_args"]
    assert loading["max_seq_length"] == args["max_length"] == the_job.seq_len
    assert loading["dtype"] == {"bf16": "bfloat16", "fp16": "float16"}[plan.precision]
    assert (args["bf16"], args["fp16"]) == (plan.precision == "bf16", plan.precision == "fp16")
    assert (args["per_device_train_batch_size"], args["gradient_accumulation_steps"]) == (plan.micro_batch, plan.grad_accum)
    four, eight = the_job.method == "qlora" and the_job.qlora_bits == 4, the_job.method == "qlora" and the_job.qlora_bits == 8
    assert (loading["load_in_4bit"], loading["load_in_8bit"]) == (four, eight)
    assert loading["full_finetuning"] == (the_job.method == "full")
    expected = ("unsloth" if the_job.activation_offload else True) if plan.recompute == "full" else False
    assert loading["use_gradient_checkpointing"] == expected and args["gradient_checkpointing"] == (expected is not False)
    assert "model_name" not in loading  # a catalogue name names no checkpoint
    if the_job.method == "full":
        assert "get_peft_model" not in data
        assert loading["float32_mixed_precision"] == (the_job.master_weights == "fp32")
    else:
        peft = data["get_peft_model"]
        assert peft["r"] == the_job.lora_rank and peft["use_gradient_checkpointing"] == expected
        assert peft["lora_dropout"] == the_job.lora_dropout
        assert peft["target_modules"] == list(the_job.lora_targets or
                                              ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"))
    assert data.get("accelerate_launch", {"num_processes": 1})["num_processes"] == plan.num_gpus
    assert ("ddp_find_unused_parameters" in args) == (plan.num_gpus > 1)
    assert args["optim"] == {"adamw-8bit": "adamw_bnb_8bit", "adamw": "adamw_torch"}[the_job.optimizer]


@pytest.mark.parametrize(("fields", "plan", "field"), [
    ({"method": "lora", "seq_len": 256, "activation_offload": True}, Plan(gpu=H100, recompute="full"), "activation_offload"),
    ({"method": "lora"}, Plan(gpu=H100, recompute="none"), "activation_offload"),
    ({"method": "lora"}, Plan(gpu=H100, num_gpus=4, zero=2, recompute="full"), "zero"),
    ({"method": "lora"}, Plan(gpu=H100, num_gpus=4, tp=2, recompute="full"), "tp"),
    ({"method": "lora"}, Plan(gpu=H100, recompute="full", precision="fp32"), "precision"),
    ({"method": "lora", "activation_offload": False}, Plan(gpu=H100, recompute="op"), "recompute"),
    ({"method": "lora", "activation_offload": False, "recompute_layers": 8}, Plan(gpu=H100, recompute="full"), "recompute"),
    # what the plan counts and Unsloth does not run (the review of 2026-12-06)
    ({"method": "lora", "loss": "eager"}, Plan(gpu=H100, recompute="full"), "loss"),
    ({"method": "lora", "kernels": "eager"}, Plan(gpu=H100, recompute="full"), "kernels"),
    ({"method": "lora", "attention": "eager"}, Plan(gpu=H100, recompute="full"), "attention"),
    ({"method": "lora", "base_dtype": "fp32"}, Plan(gpu=H100, recompute="full"), "base_dtype"),
    ({"method": "qlora", "qlora_prep": "peft"}, Plan(gpu=H100, recompute="full"), "qlora_prep"),
    ({"method": "full", "master_weights": "none", "activation_offload": False}, Plan(gpu=H100, recompute="full",
                                                                                    precision="fp16"), "master_weights"),
    ({"method": "full"}, Plan(gpu=H100, num_gpus=2, recompute="full"), "activation_offload"),  # FastModel under DDP
])
def test_what_unsloth_cannot_express_is_one_line_naming_the_field(fields, plan, field):
    assert_refused("unsloth", fields, plan, field)


def test_estimate_writes_the_unsloth_config(tmp_path):
    path = tmp_path / "unsloth.json"
    result = invoke("estimate", "--model", "llama-3.1-8b", "--seq-len", "4096", "--gpu", H100, "--stack", "unsloth",
                    "--method", "qlora", "--micro-batch", "4", "--launch-config", str(path))
    assert result.exit_code == 0, result.output
    data = json.loads(path.read_text(encoding="utf-8"))
    check_keys(data, UNSLOTH)
    assert data["from_pretrained"]["load_in_4bit"] is True and data["get_peft_model"]["use_gradient_checkpointing"] == "unsloth"
    assert data["training_args"]["per_device_train_batch_size"] == 4 and data["training_args"]["optim"] == "adamw_bnb_8bit"


def test_the_adapted_modules_and_the_checkpoint_are_the_models():
    """Unsloth's own default targets are Llama's seven (FastLlamaModel.get_peft_model); the writer
    names the modules the plan adapts (models/architecture/lora.py), so a GPT-NeoX or Phi-3 LoRA
    adapts what its plan counts, and a hub id or a config path is the checkpoint to load."""
    catalogue = load_catalogue()
    plan = Plan(gpu=H100, recompute="full")
    for name, targets in (("pythia-6.9b", ["query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"]),
                          ("phi-4", ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"])):
        data = json.loads(launch_config(job("unsloth", method="lora"), plan, launch_model(catalogue, name)).text)
        assert data["get_peft_model"]["target_modules"] == targets
        assert "model_name" not in data["from_pretrained"]


def test_a_config_files_folder_is_the_checkpoint(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    from helpers.paths import HF_CONFIGS

    for name in ("config.json", "renamed.json"):
        (folder / name).write_text((HF_CONFIGS / "qwen3-8b.json").read_text(encoding="utf-8"), encoding="utf-8")
    catalogue = load_catalogue()
    for given in (str(folder), str(folder / "config.json"), str(folder / "renamed.json")):
        data = json.loads(launch_config(job("unsloth", method="qlora"), Plan(gpu=H100, recompute="full"),
                                        launch_model(catalogue, given)).text)
        assert data["from_pretrained"]["model_name"] == str(folder)
