"""Plans nobody would run are flagged in every output format (models/estimate.py plan_warnings):
MFU under 5%, a step waiting longer on communication than it computes, over a year of training,
rented GPUs left idle. Before, such plans came back with no word: 64 H100 as eight 100 Mbps pods
at 2 tokens/s and 7,359 days, one GPU of an 8-GPU instance with seven idle."""

from __future__ import annotations

import csv
import io
import json

import pytest
from helpers.cli import invoke

PODS = ["estimate", "--model", "llama-3.1-70b", "--method", "full", "--seq-len", "8192", "--gpu", "h100-sxm-80gb",
        "--num-gpus", "64", "--zero", "3", "--recompute", "full", "--offering", "runpod/8x_H100-SXM_SECURE"]


def test_a_plan_on_100_mbps_pods_is_flagged_in_json_csv_and_the_table():
    warnings = json.loads(invoke(*PODS, "--format", "json").stdout)["warnings"]
    assert [w.split(" ")[0] for w in warnings] == ["MFU", "network-bound:", "takes"]
    assert "years" in warnings[2]
    row = next(csv.DictReader(io.StringIO(invoke(*PODS, "--format", "csv").stdout)))
    assert json.loads(row["warnings"]) == warnings
    table = invoke(*PODS).stdout
    assert all(f"warning: {w}" in table for w in warnings)


def test_idle_rented_gpus_are_flagged():
    args = ["estimate", "--model", "llama-3.1-8b", "--method", "lora", "--seq-len", "4096", "--gpu", "h100-sxm-80gb",
            "--num-gpus", "1", "--offering", "aws/p5.48xlarge", "--format", "json"]
    assert json.loads(invoke(*args).stdout)["warnings"] == ["7 of the 8 rented GPUs stay idle"]


def test_the_headline_plans_carry_no_warning_but_their_prices_age():
    """The headline's plans run well; what they may carry is the age of the price they use
    (DigitalOcean's MI300X price was read 2026-05-28, 191 days before the suite's pinned today) and, on
    FSDP with accumulation, that it fits only because the launch's sync_each_batch keeps the gradients
    sharded (models/memory/accumulation_note.py): the first plan, ZeRO-3 over 1 x 8 micro-batches, says both."""
    args = ["solve", "--model", "llama-3.1-70b", "--method", "full", "--seq-len", "8192", "--global-batch", "64",
            "--tokens", "2e9", "--top", "3", "--format", "json"]
    plans = json.loads(invoke(*args).stdout)["plans"]
    assert len(plans) == 3
    allowed = ("its price was read ", "fits only with sync_each_batch")
    assert all(w.startswith(allowed) for plan in plans for w in plan["warnings"])
    assert any(w.startswith(allowed[1]) for w in plans[0]["warnings"])


def test_prices_older_than_90_days_and_spot_prices_are_flagged():
    """models/estimate.py MAX_PRICE_AGE_DAYS; today is VRAMPLAN_TODAY (tests/conftest.py pins it)."""
    args = ["estimate", "--model", "llama-3.1-8b", "--seq-len", "4096", "--gpu", "h100-sxm-80gb", "--num-gpus", "8",
            "--offering", "aws/p5.48xlarge", "--format", "json"]
    assert json.loads(invoke(*args).stdout)["warnings"] == []  # priced 2026-11-30, 5 days before
    later = json.loads(invoke(*args, env={"VRAMPLAN_TODAY": "2027-06-01"}).stdout)["warnings"]
    assert later == ["its price was read 2026-11-30, 183 days ago: check it (prices move monthly)"]
    spot = json.loads(invoke(*args, "--pricing", "spot").stdout)["warnings"]
    assert len(spot) == 1 and spot[0].startswith("spot instances may be preempted")
    bad = invoke(*args, env={"VRAMPLAN_TODAY": "soon"})
    assert bad.exit_code == 2 and bad.stderr.startswith("error: VRAMPLAN_TODAY=")  # not blamed on a catalogue line


def test_a_spot_restart_overhead_lengthens_the_run_in_both_commands(catalogue):
    """--restart-overhead 0.1 on spot: 10% of the work done again after preemptions, so 10% more
    hours and cost (the tokens reported stay the user's); on-demand refuses it (it would be ignored:
    a third hostile review, 2026-12-07); solve's integers and its re-verification agree (the
    objective is the verified one)."""
    from vramplan.models.core.setup import Job
    from vramplan.solver.api import solve
    from vramplan.solver.query import SolveQuery

    args = ["estimate", "--model", "llama-3.1-8b", "--seq-len", "4096", "--gpu", "h100-sxm-80gb", "--num-gpus", "8",
            "--zero", "3", "--offering", "aws/p5.48xlarge", "--format", "json"]
    spot = json.loads(invoke(*args, "--pricing", "spot").stdout)["cost"]
    longer = json.loads(invoke(*args, "--pricing", "spot", "--restart-overhead", "0.1").stdout)["cost"]
    assert longer["hours"] == pytest.approx(1.1 * spot["hours"]) and longer["tokens"] == spot["tokens"]
    on_demand = invoke(*args, "--restart-overhead", "0.1")
    assert on_demand.exit_code == 2 and on_demand.stderr == (
        "error: restart_overhead=0.1: applies to --pricing spot, not on-demand\n")
    query = SolveQuery(model="llama-3.1-8b", job=Job(seq_len=4096), pricing="spot", gpus=("h100-sxm-80gb",))
    base, padded = solve(catalogue, query), solve(catalogue, query.model_copy(update={"restart_overhead": 0.1}))
    assert padded.objective.value == pytest.approx(1.1 * base.objective.value, rel=1e-6)
