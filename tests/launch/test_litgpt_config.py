"""The litgpt stack's launch configuration (launch/litgpt.py): `litgpt finetune_full|finetune_lora`
arguments, each a published flag with a value in its domain, the values the plan's. The file is run
by bash here, so its quoting and node arithmetic are what a shell makes of them.

Published names and domains, copied from litgpt v0.5.13 (2685705):
- litgpt/__main__.py (subcommands finetune_full, finetune_lora); litgpt/finetune/full.py and
  lora.py setup() (checkpoint_dir, precision, devices, num_nodes, optimizer: a torch.optim name or
  a dotted class path, utils.py instantiate_torch_optimizer; lora.py also quantize: bnb.nf4,
  bnb.nf4-dq, bnb.fp4, bnb.fp4-dq, bnb.int8-training, lora_r, lora_query, lora_key, lora_value,
  lora_projection, lora_mlp, lora_head; "Quantization and mixed precision is not supported";
  quantize refused on several devices); litgpt/args.py TrainArgs (micro_batch_size,
  global_batch_size: accumulation = global_batch_size // (devices * num_nodes) // micro_batch_size,
  max_seq_length); multi-GPU strategies fixed: full.py FSDPStrategy(activation_checkpointing_policy=
  {Block}, cpu_offload=False), lora.py parallelize_fn(activation_checkpointing=True).
- Lightning Fabric (lightning >= 2.6.1, which litgpt requires; main 7f0c343):
  src/lightning/fabric/plugins/precision/precision.py _PRECISION_INPUT_STR.
"""

from __future__ import annotations

import subprocess

import pytest
from helpers.cli import invoke
from published import BOOL, FLOAT, INT, STR, assert_refused, check_keys, job

from vramplan.launch.configs import LaunchModel, launch_config
from vramplan.models.core.setup import Plan

FULL = {"--devices": INT, "--num_nodes": INT, "--train.micro_batch_size": INT, "--train.global_batch_size": INT,
        "--train.max_seq_length": INT, "--optimizer": STR,
        "--precision": ("transformer-engine", "transformer-engine-float16", "16-true", "16-mixed", "bf16-true",
                        "bf16-mixed", "32-true", "64-true")}
LITGPT = {
    "finetune_full": FULL,
    "finetune_lora": {**FULL, "--quantize": ("bnb.nf4", "bnb.nf4-dq", "bnb.fp4", "bnb.fp4-dq", "bnb.int8-training"),
                      # finetune/lora.py setup(lora_dropout: float = 0.05) (v0.5.13, L58)
                      "--lora_r": INT, "--lora_dropout": FLOAT, "--lora_query": BOOL, "--lora_key": BOOL, "--lora_value": BOOL,
                      "--lora_projection": BOOL, "--lora_mlp": BOOL, "--lora_head": BOOL},
}
H100 = "h100-sxm-80gb"


def _number(value: object) -> object:
    """A decimal fraction as jsonargparse reads a float flag (--lora_dropout 0.05), else the value."""
    if isinstance(value, str) and value.replace(".", "", 1).isdigit() and "." in value:
        return float(value)
    return value


def run_file(text: str, nodes: int | None = None) -> tuple[str, dict[str, object]]:
    """(subcommand, flags) as bash sources the file; jsonargparse's spellings read back."""
    script = text + 'printf "%s\\n" "$LITGPT_COMMAND" "${LITGPT_ARGS[@]}"\n'
    env = {"PATH": "/usr/bin:/bin"} | ({"LITGPT_NODES": str(nodes)} if nodes else {})
    command, *words = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True,
                                     env=env).stdout.splitlines()
    assert len(words) % 2 == 0, words
    flags: dict[str, object] = {}
    for flag, text_value in zip(words[::2], words[1::2], strict=True):
        assert flag.startswith("--") and flag not in flags, flag
        value: object = text_value == "true" if text_value in ("true", "false") else text_value
        flags[flag] = int(text_value) if text_value.isdigit() else _number(value)
    return command, flags


CASES = [  # litgpt's preset: bf16-true (no master copy), chunked loss, no recompute
    ({}, Plan(gpu=H100, micro_batch=2, grad_accum=8)),
    ({"optimizer": "adamw-8bit"}, Plan(gpu=H100, num_gpus=8, zero=3, recompute="full", grad_accum=4)),
    ({"method": "lora"}, Plan(gpu=H100, num_gpus=4, zero=0, recompute="none")),
    ({"method": "lora", "lora_targets": ("q_proj", "v_proj"), "lora_rank": 8}, Plan(gpu=H100, micro_batch=4)),
    ({"method": "qlora"}, Plan(gpu=H100, micro_batch=2)),
    ({"method": "qlora", "qlora_bits": 8}, Plan(gpu=H100, precision="fp16")),
    ({"master_weights": "fp32"}, Plan(gpu=H100, num_gpus=16, zero=3, recompute="full")),
    ({}, Plan(gpu=H100, precision="fp32")),
]


@pytest.mark.parametrize(("fields", "plan"), CASES, ids=[f"litgpt-{i}" for i in range(len(CASES))])
def test_every_flag_is_published_and_every_value_is_the_plans(fields, plan):
    the_job = job("litgpt", **fields)
    config = launch_config(the_job, plan, LaunchModel(32))
    assert (config.stack, config.extension) == ("litgpt", ".sh")
    command, flags = run_file(config.text)
    assert command == ("finetune_full" if the_job.method == "full" else "finetune_lora")
    check_keys(flags, LITGPT[command])
    assert (flags["--devices"], flags["--num_nodes"]) == (plan.num_gpus, 1)
    if plan.num_gpus > 1:
        two = run_file(config.text, nodes=2)[1]
        assert (two["--devices"] * two["--num_nodes"], two["--num_nodes"]) == (plan.num_gpus, 2)
        assert ("holds less than planned" in config.text) == (plan.zero != 3 or plan.recompute != "full")
    # litgpt's accumulation: global // (devices * num_nodes) // micro
    assert flags["--train.global_batch_size"] // plan.num_gpus // flags["--train.micro_batch_size"] == plan.grad_accum
    assert flags["--train.micro_batch_size"] == plan.micro_batch and flags["--train.max_seq_length"] == the_job.seq_len
    mixed = "mixed" if the_job.master_weights == "fp32" else "true"
    assert flags["--precision"] == {"bf16": f"bf16-{mixed}", "fp16": f"16-{mixed}", "fp32": "32-true"}[plan.precision]
    assert flags["--optimizer"] == {"adamw": "AdamW", "adamw-8bit": "bitsandbytes.optim.AdamW8bit"}[the_job.optimizer]
    if the_job.method != "full":
        targets = set(the_job.lora_targets or ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"))
        assert flags["--lora_r"] == the_job.lora_rank
        assert flags["--lora_dropout"] == the_job.lora_dropout  # litgpt's default is 0.05, not the job's
        assert [flags[f"--lora_{name}"] for name in ("query", "key", "value", "projection", "mlp", "head")] == \
            [t in targets for t in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "lm_head")]
    quantize = {4: "bnb.nf4-dq", 8: "bnb.int8-training"}[the_job.qlora_bits] if the_job.method == "qlora" else None
    assert flags.get("--quantize") == quantize


@pytest.mark.parametrize(("fields", "plan", "field"), [
    ({}, Plan(gpu=H100, recompute="full"), "recompute"),  # one GPU: litgpt has no activation checkpointing
    ({}, Plan(gpu=H100, num_gpus=8, zero=3, tp=2), "tp"),
    ({}, Plan(gpu=H100, num_gpus=8, zero=3, offload="optimizer+params"), "offload"),
    ({"method": "qlora"}, Plan(gpu=H100, num_gpus=2, zero=0), "num_gpus"),
    ({"method": "qlora", "master_weights": "fp32"}, Plan(gpu=H100), "master_weights"),
    ({"loss": "fused"}, Plan(gpu=H100), "loss"),
    ({}, Plan(gpu=H100, precision="fp8"), "precision"),
    ({"method": "lora", "lora_targets": ("q_proj", "gate_proj")}, Plan(gpu=H100), "lora_targets"),
])
def test_what_litgpt_cannot_express_is_one_line_naming_the_field(fields, plan, field):
    assert_refused("litgpt", fields, plan, field)


def test_estimate_writes_the_litgpt_file(tmp_path):
    path = tmp_path / "litgpt.sh"
    result = invoke("estimate", "--model", "llama-3.1-8b", "--seq-len", "4096", "--gpu", H100, "--stack", "litgpt",
                    "--method", "lora", "--micro-batch", "2", "--grad-accum", "4", "--launch-config", str(path))
    assert result.exit_code == 0, result.output
    command, flags = run_file(path.read_text(encoding="utf-8"))
    assert command == "finetune_lora"
    check_keys(flags, LITGPT[command])
    assert (flags["--train.micro_batch_size"], flags["--train.global_batch_size"], flags["--precision"]) == (2, 8, "bf16-true")
