"""Options that cannot mean anything together are refused with one line naming the option (exit 2),
where they used to be accepted without a word: --lora-rank with --method full, --qlora-bits without
QLoRA, --loss-chunks with a loss that has no chunks, --sequence-parallel without tensor parallelism,
--recompute-layers without full recompute or beyond the model's layers, --vpp that does not divide a
pipeline rank's layers under Megatron. An option left at its default never counts as given."""

from __future__ import annotations

import pytest
from helpers.cli import invoke, one_line_error

BASE = ["--model", "llama-3.1-8b", "--seq-len", "2048", "--gpu", "h100-sxm-80gb"]


@pytest.mark.parametrize(("command", "extra", "fragment"), [
    ("estimate", ["--method", "full", "--lora-rank", "8"], "lora-rank=8: applies to --method lora or qlora"),
    ("solve", ["--base-dtype", "fp32"], "base-dtype='fp32': applies to --method lora or qlora"),
    ("solve", ["--lora-targets", "q_proj"], "lora-targets='q_proj': applies to --method lora or qlora"),
    ("estimate", ["--method", "lora", "--qlora-bits", "8"], "qlora-bits='8': applies to --method qlora, not lora"),
    ("solve", ["--loss", "eager", "--loss-chunks", "4"], "loss-chunks=4: applies to --loss chunked"),
    ("estimate", ["--sequence-parallel"], "sequence-parallel=True: shards what tensor parallelism replicates"),
    ("estimate", ["--recompute", "none", "--recompute-layers", "4"], "recompute-layers=4: applies to --recompute full"),
    ("solve", ["--recompute", "selective", "--recompute-layers", "4"], "recompute-layers=4: applies to --recompute full"),
    # Megatron-LM refuses these layouts (arguments.py: 'number of layers per pipeline stage must be
    # divisible ...'); the estimate used to split a rank's 16 layers into chunks of 5 and 6.
    ("estimate", ["--num-gpus", "8", "--pp", "2", "--vpp", "3", "--stack", "megatron"],
     "vpp=3: 32 layers on 2 stages give ranks 16 layers, not divisible into 3 virtual stages (megatron)"),
    ("solve", ["--pp", "2", "--vpp", "3", "--stack", "megatron"], "not divisible into 3 virtual stages"),
    ("estimate", ["--recompute", "full", "--recompute-layers", "33"], "recompute_layers=33: llama-3.1-8b has 32 layers"),
    ("solve", ["--recompute-layers", "99"], "recompute_layers=99: llama-3.1-8b has 32 layers"),
    ("estimate", ["--recompute", "full", "--recompute-layers", "0"], "recompute_layers=0: out of range: must be >= 1"),
])
def test_a_contradiction_is_one_line_naming_the_option(command, extra, fragment):
    assert fragment in one_line_error(invoke(command, *BASE, *extra))


@pytest.mark.parametrize("extra", [["--method", "lora", "--lora-rank", "8"], ["--method", "qlora", "--qlora-bits", "8"],
                                   ["--loss", "chunked", "--loss-chunks", "4"], ["--tp", "2", "--num-gpus", "2", "--stack", "megatron",
                                                                                  "--sequence-parallel"],
                                   # torchtitan spreads 32 layers over 2 x 3 stages unevenly (pipeline_module_split)
                                   # (beside FSDP over two ranks: torchtitan's pipeline needs a shard group)
                                   ["--num-gpus", "4", "--pp", "2", "--vpp", "3", "--zero", "3", "--stack", "torchtitan"]])
def test_the_same_options_where_they_mean_something_still_run(extra):
    assert invoke("estimate", *BASE, *extra).exit_code in (0, 3)


def test_recompute_layers_alone_means_that_many_layers_of_full_recompute():
    """--recompute-layers N names how many layers full recompute covers: with --recompute left free,
    estimate kept the stack's none and solve returned plans that recompute none, the option ignored."""
    import json

    alone = json.loads(invoke("estimate", *BASE, "--recompute-layers", "4", "--format", "json").stdout)
    explicit = json.loads(invoke("estimate", *BASE, "--recompute", "full", "--recompute-layers", "4", "--format", "json").stdout)
    assert alone["plan"]["recompute"] == "full" and alone["memory"] == explicit["memory"]
    solved = json.loads(invoke("solve", *BASE, "--global-batch", "64", "--recompute-layers", "4", "--top", "3",
                               "--format", "json").stdout)
    assert solved["plans"] and all(p["plan"]["recompute"] == "full" for p in solved["plans"])


def test_a_batch_row_is_held_to_the_same_rules(tmp_path):
    """The command line refused these; a batch row (and the Python API's sheet parser) solved them with
    the cell ignored: recompute_layers beside recompute none, lora_rank with method full, loss_chunks
    with the eager loss (solver/query_fields.py refuse_contradictions, one set of rules)."""
    from helpers.cli import invoke_batch
    from helpers.sheets import read_rows, write_csv

    jobs = write_csv(tmp_path / "jobs.csv", [
        {"id": "a", "model": "llama-3.1-8b", "seq_len": "2048", "recompute": "none", "recompute_layers": "2"},
        {"id": "b", "model": "llama-3.1-8b", "seq_len": "2048", "method": "full", "lora_rank": "8"},
        {"id": "c", "model": "llama-3.1-8b", "seq_len": "2048", "loss": "eager", "loss_chunks": "4"},
        {"id": "d", "model": "llama-3.1-8b", "seq_len": "2048", "gpus": "h100-sxm-80gb", "max_gpus": "8"}])
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), "-q")
    assert result.exit_code == 3, result.stderr
    rows = read_rows(tmp_path / "plans.csv")
    assert [row["status"] for row in rows] == ["error", "error", "error", "optimal"]
    assert rows[0]["error"] == "recompute_layers='2': applies to recompute full; the recompute is none"
    assert rows[1]["error"] == "lora_rank='8': applies to method lora or qlora; this job is method full"
    assert rows[2]["error"] == "loss_chunks='4': applies to loss chunked; the loss is eager"
