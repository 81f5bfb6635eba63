"""`vramplan solve` through click's CliRunner: formats, exit codes, one-line errors."""

from __future__ import annotations

import csv
import io
import json

import pytest
from helpers.cli import invoke

from vramplan.solver.query import SolveResult

HEADLINE = ["solve", "--model", "llama-3.1-70b", "--method", "full", "--seq-len", "8192", "--global-batch", "64",
            "--tokens", "2e9", "--objective", "cost"]
INFEASIBLE = HEADLINE + ["--gpu", "a100-sxm-80gb", "--num-gpus", "2", "--offload", "none"]


def headline_with(args: list[str]) -> list[str]:
    """HEADLINE with args in place of its own values of the same options (an option is given once)."""
    given = {arg for arg in args if arg.startswith("--")}
    pairs = zip(HEADLINE[1::2], HEADLINE[2::2])
    return [HEADLINE[0], *(part for option, value in pairs if option not in given for part in (option, value)), *args]



def test_solve_help() -> None:
    result = invoke("solve", "--help")
    assert result.exit_code == 0 and "--objective" in result.output and "--pareto" in result.output


def test_headline_table_reads_like_an_answer() -> None:
    result = invoke(*HEADLINE)
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert "status OPTIMAL" in text and "Best plan:" in text and "FITS" in text
    assert "USD/hour" in text and "days" in text and "MFU" in text and "vs best" in text


def test_json_round_trips_and_has_the_fields() -> None:
    result = invoke(*HEADLINE, "--format", "json", "--top", "2")
    assert result.exit_code == 0
    parsed = SolveResult.model_validate_json(result.stdout)
    data = json.loads(result.stdout)
    assert parsed.model_dump(mode="json") == data
    assert data["status"] == "optimal" and data["objective"]["name"] == "cost" and data["objective"]["value"] > 0
    plan = data["plans"][0]
    for field in ("gpu", "offering", "num_gpus", "dp", "zero", "recompute", "precision", "micro_batch", "grad_accum",
                  "optimizer", "attention", "offload", "method", "seq_len"):
        assert field in plan["plan"]
    assert {"usd_per_hour", "hours", "usd_total"} <= set(plan["cost"])
    assert {"weights_bytes", "total_bytes", "fits"} <= set(plan["memory"])
    assert {"tokens_per_s", "mfu_fraction", "step_time_s"} <= set(plan["performance"])
    assert len(data["plans"]) == 2


def test_estimate_with_the_plan_reproduces_its_memory() -> None:
    data = json.loads(invoke(*HEADLINE, "--format", "json", "--top", "1").stdout)
    p = data["plans"][0]["plan"]
    again = invoke("estimate", "--model", "llama-3.1-70b", "--method", p["method"], "--seq-len", str(p["seq_len"]),
                   "--gpu", p["gpu"], "--offering", p["offering"], "--num-gpus", str(p["num_gpus"]), "--zero", str(p["zero"]),
                   "--recompute", p["recompute"], "--precision", p["precision"], "--micro-batch", str(p["micro_batch"]),
                   "--grad-accum", str(p["grad_accum"]), "--optimizer", p["optimizer"], "--attention", p["attention"],
                   "--offload", p["offload"], "--tp", str(p["tp"]), "--pp", str(p["pp"]), "--cp", str(p["cp"]),
                   "--ep", str(p["ep"]), "--vpp", str(p["vpp"]),
                   "--sequence-parallel" if p["sequence_parallel"] else "--no-sequence-parallel",
                   "--tokens", "2e9", "--format", "json")
    assert again.exit_code == 0
    assert json.loads(again.stdout)["memory"] == data["plans"][0]["memory"]


def test_infeasible_exits_3_with_an_explanation() -> None:
    result = invoke(*INFEASIBLE)
    assert result.exit_code == 3
    assert "INFEASIBLE" in result.stdout and "525.7 GiB per GPU" in result.stdout and "QLoRA" in result.stdout
    data = json.loads(invoke(*INFEASIBLE, "--format", "json").stdout)
    assert data["status"] == "infeasible" and data["explanation"]["summary"] and data["plans"] == []


def test_csv_has_one_row_per_plan() -> None:
    result = invoke(*HEADLINE, "--format", "csv", "--top", "3", "--pareto")
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["kind"] for r in rows].count("plan") == 3 and "pareto" in {r["kind"] for r in rows}
    assert rows[0]["plan.gpu"] and float(rows[0]["cost.usd_total"]) > 0


def test_brute_engine_gives_the_same_answer() -> None:
    small = ["solve", "--model", "llama-3.1-8b", "--seq-len", "4096", "--global-batch", "16", "--gpu", "h100-sxm-80gb",
             "--gpu", "l40s-48gb", "--max-gpus", "16", "--format", "json", "--top", "1", "--time-limit", "600"]
    a, b = json.loads(invoke(*small).stdout), json.loads(invoke(*small, "--engine", "brute").stdout)
    assert a["plans"][0]["plan"] == b["plans"][0]["plan"]


@pytest.mark.parametrize(("args", "fragment"), [
    (["--objective", "fastest"], "--objective"),
    (["--gpu", "h100"], "h100-sxm-80gb"),
    (["--provider", "azurre"], "provider='azurre'"),
    (["--global-batch", "0"], "global_batch=0"),
    (["--tokens", "1e400"], "--tokens"),
    (["--budget-usd", "-5"], "--budget-usd"),
    (["--zero", "4"], "--zero"),
    (["--num-gpus", "1024", "--max-gpus", "8"], "num_gpus=1024"),
    (["--time-limit", "0"], "--time-limit"),
])
def test_bad_input_is_one_line_exit_2(args: list[str], fragment: str) -> None:
    result = invoke(*headline_with(args))
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_list_prices_are_reference_only_unless_asked_for():
    """catalogues/offerings.csv `list/` rows are published reference prices nobody rents
    (Offering.rentable): plans never use them unless --provider list names them."""
    query = ["solve", "--model", "llama-3.1-8b", "--seq-len", "4096", "--global-batch", "64", "--gpu",
             "h100-sxm-80gb", "--top", "5", "--format", "json"]
    result = invoke(*query)
    assert result.exit_code == 0, result.output
    offerings = {p["plan"]["offering"] for p in json.loads(result.stdout)["plans"]}
    assert offerings and not any(name.startswith("list/") for name in offerings)
    listed = invoke(*query, "--provider", "list")
    assert listed.exit_code == 0, listed.output
    assert {p["plan"]["offering"].split("/")[0] for p in json.loads(listed.stdout)["plans"]} == {"list"}


def test_a_gpu_with_only_reference_prices_says_so():
    """mi325x-256gb has only a list/ row (catalogues/offerings.csv): the answer names that, not a
    count or divisibility problem, and --provider list plans with it."""
    result = invoke("solve", "--model", "llama-3.1-8b", "--seq-len", "2048", "--gpu", "mi325x-256gb")
    assert result.exit_code == 3, result.output
    assert "only has reference prices (list/mi325x-256gb-x8)" in result.stdout
    assert "--provider list" in result.stdout
    listed = invoke("solve", "--model", "llama-3.1-8b", "--seq-len", "2048", "--gpu", "mi325x-256gb",
                    "--provider", "list", "--format", "json")
    assert listed.exit_code == 0 and json.loads(listed.stdout)["status"] == "optimal", listed.output


@pytest.mark.parametrize("args", [
    ["--model", "llama-3.1-8b", "--seq-len", "5", "--gpu", "h100-sxm-80gb"],
    ["--model", "gpt2-124m", "--gpu", "h100-sxm-80gb,a10g-24gb", "--budget-usd", "1e-06", "--max-nodes", "847",
     "--seq-len", "1", "--time-limit", "1"],
], ids=["seq-len-5", "seq-len-1-budget"])
def test_a_tiny_sequence_length_keeps_the_default_global_batch_in_its_domain(args):
    """Before: the default global batch (2^20 tokens / seq_len) was past MAX_GLOBAL_BATCH, and the
    plans built from it failed Plan's own validation: `internal error: ValidationError`."""
    from vramplan.models.core.choices import MAX_GLOBAL_BATCH
    from vramplan.solver.query import default_global_batch

    assert default_global_batch(1) == MAX_GLOBAL_BATCH
    result = invoke("solve", *args, "--format", "json")
    assert result.exit_code in (0, 3), result.stderr
    assert "internal error" not in result.stderr
