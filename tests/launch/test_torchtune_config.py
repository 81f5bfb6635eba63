"""The torchtune stack's launch configuration (launch/torchtune.py): the recipe for the plan and
`key=value` overrides that recipe reads, each value in its domain, the values the plan's. The file is
run by bash here, so its quoting and node arithmetic are what a shell makes of them.

Published names and domains, copied from torchtune v0.6.1 (a6290a5):
- recipes/full_finetune_single_device.py, full_finetune_distributed.py, lora_finetune_single_device.py,
  lora_finetune_distributed.py: the keys each reads (cfg.batch_size, cfg.gradient_accumulation_steps,
  cfg.dtype, cfg.get("enable_activation_checkpointing"), cfg.get("enable_activation_offloading"),
  cfg.optimizer / cfg.loss / cfg.tokenizer / cfg.model instantiated; full recipes: optimizer_in_bwd,
  clip_grad_norm; distributed recipes: fsdp_cpu_offload, fsdp_reshard_after_forward;
  full_finetune_distributed only: tensor_parallel_dim, ac_mode, ac_option); every recipe refuses
  dtype fp16; offloading needs checkpointing; optimizer_in_bwd refuses accumulation and clipping.
- torchtune/training/precision.py PRECISION_STR_TO_DTYPE (fp16, bf16, fp32, fp64);
  torchtune/training/activations.py apply_selective_activation_checkpointing (ac_mode none, full,
  selective) and checkpoint_wrapper (selective: int(ac_option), every ac_option-th layer, counted
  from 1); torchtune/modules/loss/ce_chunked_output_loss.py CEWithChunkedOutputLoss(num_output_chunks);
  torchtune/models/llama3_1/_model_builders.py lora_llama3_1_8b (lora_attn_modules, apply_lora_to_mlp,
  apply_lora_to_output, lora_rank, quantize_base) and torchtune/modules/peft/_utils.py
  LORA_ATTN_MODULES (q_proj, k_proj, v_proj, output_proj); torchtune/_cli/run.py (`tune run` takes
  torchrun's --nnodes and --nproc_per_node); torchtune/config/_utils.py _merge_yaml_and_cli_args
  (`key=value`, values parsed as YAML); docs/source/tutorials/memory_optimizations.rst
  (torchao.prototype.low_bit_optim.CPUOffloadOptimizer, single-device recipes only).
"""

from __future__ import annotations

import subprocess

import pytest
from helpers.cli import invoke
from published import BOOL, INT, STR, assert_refused, check_keys, job

from vramplan.launch.configs import LaunchModel, launch_config
from vramplan.models.core.setup import Plan

RECIPES = ("full_finetune_single_device", "full_finetune_distributed", "lora_finetune_single_device",
           "lora_finetune_distributed")
EVERY_RECIPE = {"batch_size": INT, "gradient_accumulation_steps": INT, "dtype": ("fp16", "bf16", "fp32", "fp64"),
                "enable_activation_checkpointing": BOOL, "enable_activation_offloading": BOOL,
                "optimizer._component_": STR, "loss._component_": STR, "loss.num_output_chunks": INT,
                "tokenizer.max_seq_len": INT, "compile": BOOL}  # recipes/configs/*.yaml `compile: False`
FULL = {"optimizer_in_bwd": BOOL, "clip_grad_norm": lambda v: v is None}
DISTRIBUTED = {"fsdp_cpu_offload": BOOL, "fsdp_reshard_after_forward": BOOL}
LORA = {"model.lora_attn_modules": lambda v: isinstance(v, list) and set(v) <= {"q_proj", "k_proj", "v_proj", "output_proj"},
        "model.apply_lora_to_mlp": BOOL, "model.apply_lora_to_output": BOOL, "model.lora_rank": INT, "model.quantize_base": BOOL}
TORCHTUNE = {
    "full_finetune_single_device": {**EVERY_RECIPE, **FULL},
    "full_finetune_distributed": {**EVERY_RECIPE, **FULL, **DISTRIBUTED, "tensor_parallel_dim": INT,
                                  "ac_mode": ("none", "full", "selective"), "ac_option": INT},
    "lora_finetune_single_device": {**EVERY_RECIPE, **LORA},
    "lora_finetune_distributed": {**EVERY_RECIPE, **DISTRIBUTED, **LORA},
}
H100 = "h100-sxm-80gb"


def _yaml(text: str) -> object:
    """A `key=value` value as OmegaConf's YAML parse reads it (the spellings the writer uses)."""
    if text in ("true", "false"):
        return text == "true"
    if text == "null":
        return None
    if text.startswith("["):
        return [item for item in text[1:-1].split(",") if item]
    return int(text) if text.lstrip("-").isdigit() else text


def run_file(text: str, nodes: int | None = None) -> tuple[str, dict[str, object], int | None]:
    """(recipe, overrides, processes per node) as bash sources the file."""
    script = text + 'printf "%s\\n" "$TORCHTUNE_RECIPE" "${TORCHTUNE_NPROC_PER_NODE:-}" "${TORCHTUNE_ARGS[@]}"\n'
    env = {"PATH": "/usr/bin:/bin"} | ({"TORCHTUNE_NODES": str(nodes)} if nodes else {})
    lines = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True, env=env).stdout.splitlines()
    recipe, per_node, *words = lines
    overrides = {}
    for word in words:
        key, value = word.split("=", 1)
        assert key not in overrides, key
        overrides[key] = _yaml(value)
    return recipe, overrides, int(per_node) if per_node else None


CASES = [  # torchtune's preset: pure bf16 (no master copy), chunked loss
    ({"optimizer": "adamw-8bit-paged", "optimizer_in_backward": True}, Plan(gpu=H100, recompute="full")),
    ({"activation_offload": True}, Plan(gpu=H100, num_gpus=8, zero=3, offload="optimizer+params", recompute="full")),
    ({}, Plan(gpu=H100, num_gpus=16, zero=2, tp=2, grad_accum=4, recompute="full")),
    ({}, Plan(gpu=H100, num_gpus=8, zero=3, recompute="full", recompute_layers=16)),
    ({"method": "lora"}, Plan(gpu=H100, zero=1, offload="optimizer", micro_batch=2)),
    ({"method": "lora", "lora_targets": ("q_proj", "v_proj", "o_proj")}, Plan(gpu=H100, num_gpus=8, zero=0, recompute="none")),
    ({"method": "qlora", "loss": "eager"}, Plan(gpu=H100, recompute="full", micro_batch=4)),
    ({"master_weights": "none"}, Plan(gpu=H100, precision="fp32")),
    ({"method": "lora", "compile": "model+loss"}, Plan(gpu=H100, num_gpus=8, zero=3, recompute="full")),
    # the distributed recipes take torchao's 8-bit AdamW (bitsandbytes': single device only)
    ({"optimizer": "adamw-8bit"}, Plan(gpu=H100, num_gpus=8, zero=3, recompute="full")),
    ({"optimizer": "adamw-8bit"}, Plan(gpu=H100, recompute="full")),
]


@pytest.mark.parametrize(("fields", "plan"), CASES, ids=[f"torchtune-{i}" for i in range(len(CASES))])
def test_every_key_is_one_the_recipe_reads_and_every_value_is_the_plans(fields, plan):
    the_job = job("torchtune", **fields)
    config = launch_config(the_job, plan, LaunchModel(32))
    assert (config.stack, config.extension) == ("torchtune", ".sh")
    recipe, keys, per_node = run_file(config.text)
    assert recipe == f"{'full' if the_job.method == 'full' else 'lora'}_finetune_" \
                     f"{'single_device' if plan.num_gpus == 1 else 'distributed'}"
    check_keys(keys, TORCHTUNE[recipe])
    assert per_node == (plan.num_gpus if plan.num_gpus > 1 else None)
    if plan.num_gpus > 1:
        assert run_file(config.text, nodes=2)[2] * 2 == plan.num_gpus
    assert (keys["batch_size"], keys["gradient_accumulation_steps"]) == (plan.micro_batch, plan.grad_accum)
    assert keys["dtype"] == plan.precision and keys["tokenizer.max_seq_len"] == the_job.seq_len
    if plan.dp > 1:
        assert keys["fsdp_reshard_after_forward"] == (plan.zero == 3)
        assert keys["fsdp_cpu_offload"] == (plan.offload == "optimizer+params")
        assert ("holds less than planned" in config.text) == (plan.zero < 2)
    assert keys.get("tensor_parallel_dim", 1) == plan.tp
    if plan.recompute_layers is not None:
        assert keys["enable_activation_checkpointing"] is False and keys["ac_mode"] == "selective"
        assert 32 // keys["ac_option"] == plan.recompute_layers
    else:
        assert keys["enable_activation_checkpointing"] == (plan.recompute == "full")
    assert keys["enable_activation_offloading"] == the_job.activation_offload
    assert keys["compile"] == (the_job.compile == "model+loss")
    if plan.offload == "optimizer":
        assert keys["optimizer._component_"] == "torchao.prototype.low_bit_optim.CPUOffloadOptimizer"
    else:
        assert keys["optimizer._component_"] == {
            "adamw": "torch.optim.AdamW", "adamw-8bit-paged": "bitsandbytes.optim.PagedAdamW8bit",
            "adamw-8bit": "torchao.optim.AdamW8bit" if plan.num_gpus > 1 else "bitsandbytes.optim.AdamW8bit"}[the_job.optimizer]
    if the_job.loss == "chunked":
        assert keys["loss._component_"] == "torchtune.modules.loss.CEWithChunkedOutputLoss"
        assert keys["loss.num_output_chunks"] == the_job.loss_chunks
    else:
        assert keys["loss._component_"] == "torch.nn.CrossEntropyLoss"
    if the_job.method == "full":
        assert keys["optimizer_in_bwd"] == the_job.optimizer_in_backward
    else:
        assert keys["model.lora_rank"] == the_job.lora_rank
        assert keys.get("model.quantize_base", False) == (the_job.method == "qlora")
        targets = the_job.lora_targets or ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
        assert keys["model.lora_attn_modules"] == [{"o_proj": "output_proj"}.get(t, t) for t in targets if "_proj" in t
                                                   and t not in ("gate_proj", "up_proj", "down_proj")]
        assert keys["model.apply_lora_to_mlp"] == ("gate_proj" in targets)


@pytest.mark.parametrize(("fields", "plan", "field"), [
    ({}, Plan(gpu=H100, precision="fp16"), "precision"),
    ({"master_weights": "fp32"}, Plan(gpu=H100), "master_weights"),
    ({}, Plan(gpu=H100, recompute="op"), "recompute"),
    ({}, Plan(gpu=H100, num_gpus=8, zero=3, offload="optimizer"), "offload"),
    ({}, Plan(gpu=H100, zero=3, offload="optimizer+params"), "offload"),
    ({"method": "qlora", "qlora_bits": 8}, Plan(gpu=H100), "qlora_bits"),
    ({"loss": "fused"}, Plan(gpu=H100), "loss"),
    ({"method": "lora"}, Plan(gpu=H100, num_gpus=4, zero=3, tp=2), "tp"),
    ({"activation_offload": True}, Plan(gpu=H100, recompute="none"), "activation_offload"),
    ({"optimizer_in_backward": True}, Plan(gpu=H100, grad_accum=4), "optimizer_in_backward"),
    ({}, Plan(gpu=H100, recompute="full", recompute_layers=16), "recompute_layers"),  # single-device recipe
    ({"method": "lora", "lora_targets": ("q_proj", "up_proj")}, Plan(gpu=H100), "lora_targets"),
    ({"compile": "model"}, Plan(gpu=H100), "compile"),  # `compile` compiles the loss too
    ({"optimizer": "adamw-8bit-paged"}, Plan(gpu=H100, num_gpus=8, zero=3), "optimizer"),  # torchao has no paged one
])
def test_what_torchtune_cannot_express_is_one_line_naming_the_field(fields, plan, field):
    assert_refused("torchtune", fields, plan, field)


def test_estimate_writes_the_torchtune_file(tmp_path):
    path = tmp_path / "torchtune.sh"
    result = invoke("estimate", "--model", "llama-3.1-8b", "--seq-len", "4096", "--gpu", H100, "--stack", "torchtune",
                    "--method", "lora", "--num-gpus", "2", "--zero", "3", "--micro-batch", "2", "--launch-config", str(path))
    assert result.exit_code == 0, result.output
    recipe, keys, per_node = run_file(path.read_text(encoding="utf-8"))
    assert (recipe, per_node) == ("lora_finetune_distributed", 2)
    check_keys(keys, TORCHTUNE[recipe])
    assert keys["batch_size"] == 2 and keys["fsdp_reshard_after_forward"] is True
    assert keys["enable_activation_checkpointing"] is True  # the torchtune preset's recompute
