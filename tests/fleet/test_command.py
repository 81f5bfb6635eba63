"""`vramplan fleet` on the command line: output shape and safety, dates, bad input (one line,
exit 2, or an explained row; never a traceback, never a lost row), the shipped example."""

from __future__ import annotations

import csv
import io
import math
from datetime import datetime
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.paths import EXAMPLES, HF_CONFIGS
from helpers.sheets import write_csv

JOB_HEADER = ["id", "model", "seq_len", "tokens", "max_gpus", "earliest_start", "deadline", "priority", "required"]
INVENTORY_HEADER = ["pool", "offering", "num_gpus", "instances", "available_from", "available_to", "committed"]
GOOD_JOB = {"model": "llama-3.1-8b", "seq_len": "4096", "tokens": "1e9", "max_gpus": "16"}
POOLS = [{"pool": "h100", "offering": "aws/p5.48xlarge", "num_gpus": "16", "committed": "true"}]


def run(tmp_path: Path, jobs: list[dict[str, str]], pools: list[dict[str, str]] = POOLS, *extra: str,
        job_header: list[str] = JOB_HEADER):
    jobs_csv = write_csv(tmp_path / "jobs.csv", jobs, job_header)
    inventory = write_csv(tmp_path / "inventory.csv", pools, INVENTORY_HEADER)
    out = tmp_path / "schedule.csv"
    limit = () if "--time-limit" in extra else ("--time-limit", "10")  # an option is given once
    result = invoke("fleet", str(jobs_csv), "--inventory", str(inventory), "-o", str(out), *limit, *extra)
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8-sig")))) if out.exists() else []
    return result, rows


def one_line_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_every_row_comes_back_in_order_with_its_cells_and_a_safe_id(tmp_path: Path) -> None:
    jobs = [{"id": "=HYPERLINK(\"x\")", **GOOD_JOB}, {"id": "b", **GOOD_JOB, "deadline": "3"},
            {"id": "c", **GOOD_JOB, "model": "llama-9000"}]
    result, rows = run(tmp_path, jobs)
    assert result.exit_code == 3, result.output  # one error row
    assert [r["id"] for r in rows] == ["'=HYPERLINK(\"x\")", "b", "c"]
    assert [r["status"] for r in rows] == ["scheduled", "scheduled", "error"]
    assert "model='llama-9000'" in rows[2]["error"]
    assert rows[1]["deadline"] == "3" and float(rows[1]["end_hours"]) <= 3
    assert all(r["pool"] == "h100" and r["gpu"] == "h100-sxm-80gb" for r in rows[:2])
    # Both run at once only if their GPUs fit in the pool's 16 together.
    (a, b) = rows[:2]
    overlap = float(a["start_hours"]) < float(b["end_hours"]) and float(b["start_hours"]) < float(a["end_hours"])
    assert not overlap or int(a["num_gpus"]) + int(b["num_gpus"]) <= 16
    assert float(a["usd_marginal"]) == 0.0  # committed
    assert "pool h100: 2 jobs" in result.output


def test_dates_give_timestamps_and_hours_from_the_earliest_date(tmp_path: Path) -> None:
    jobs = [{"id": "a", **GOOD_JOB, "earliest_start": "2027-01-05", "deadline": "2027-01-06"}]
    pools = [{**POOLS[0], "available_from": "2027-01-04T12:00"}]
    result, rows = run(tmp_path, jobs, pools)
    assert result.exit_code == 0, result.output
    (row,) = rows
    assert float(row["start_hours"]) == 12.0 and row["start"] == "2027-01-05T00:00"
    end = datetime.fromisoformat(row["end"])
    assert end <= datetime(2027, 1, 6)


def test_a_deadline_before_the_earliest_start_is_an_error_row(tmp_path: Path) -> None:
    jobs = [{"id": "bad", **GOOD_JOB, "earliest_start": "10", "deadline": "5"}, {"id": "ok", **GOOD_JOB}]
    result, rows = run(tmp_path, jobs)
    assert result.exit_code == 3
    assert [r["status"] for r in rows] == ["error", "scheduled"]
    assert "deadline=5.0" in rows[0]["error"] and "earliest_start" in rows[0]["error"]


def test_a_required_job_that_fits_nowhere_is_an_explained_row(tmp_path: Path) -> None:
    jobs = [{"id": "huge", **GOOD_JOB, "model": "llama-3.1-405b", "required": "true"}, {"id": "ok", **GOOD_JOB}]
    result, rows = run(tmp_path, jobs)
    assert result.exit_code == 3
    assert [r["status"] for r in rows] == ["unserved", "scheduled"]
    assert rows[0]["explanation"].startswith("required, but cannot be served: no plan fits any pool")


def test_a_window_too_short_is_explained_with_the_deadline_that_fits(tmp_path: Path) -> None:
    jobs = [{"id": "tight", **GOOD_JOB, "deadline": "0.5"}]
    _, rows = run(tmp_path, jobs)
    assert rows[0]["status"] == "unserved"
    assert "shorter than the fastest plan" in rows[0]["explanation"] and "a deadline of" in rows[0]["explanation"]


@pytest.mark.parametrize(("pools", "fragments"), [
    ([{"pool": "p", "offering": "aws/p9.48xlarge", "num_gpus": "8"}], ("offering='aws/p9.48xlarge'", "row 2")),
    ([{**POOLS[0], "available_from": "0", "available_to": "100"},
      {**POOLS[0], "available_from": "50", "available_to": "200"}],
     # the later window's row and cell as written (it named the pool's first row and the later's hours)
     ("row 3: available_from='50': overlaps the window of row 2 (pool 'h100')",)),
    ([{**POOLS[0], "available_from": "50", "available_to": "200"},
      {**POOLS[0], "available_from": "0", "available_to": "100"}], ("row 2: available_from='50': overlaps the window of row 3",)),
    ([{**POOLS[0], "num_gpus": "-8"}], ("num_gpus",)),
    # 64 GPUs beside 2 instances of 8 was taken as 64 silently
    ([{**POOLS[0], "num_gpus": "64", "instances": "2"}], ("row 2: instances='2': is 2 x 8 GPUs of aws/p5.48xlarge, "
                                                         "not the row's num_gpus 64",)),
    ([{**POOLS[0], "available_from": "soon"}], ("available_from='soon'",)),
    ([{**POOLS[0], "available_from": "10", "available_to": "5"}], ("available_to",)),
    ([{"pool": "p", "num_gpus": "8"}], ("offering",)),
    # a job's pools cell splits at ';' and ',': no job could name these pools
    ([{**POOLS[0], "pool": "gpu;a"}], ("row 2: pool='gpu;a': holds ';' or ','",)),
    ([{**POOLS[0], "pool": "a,b"}], ("row 2: pool='a,b': holds ';' or ','",)),
])
def test_bad_inventory_is_one_line_and_exit_2(tmp_path: Path, pools, fragments) -> None:
    result, rows = run(tmp_path, [{"id": "a", **GOOD_JOB}], pools)
    one_line_error(result, *fragments)
    assert rows == []


def test_an_unknown_pool_in_a_job_is_an_error_row(tmp_path: Path) -> None:
    jobs = [{"id": "a", **GOOD_JOB, "pools": "h10"}, {"id": "b", **GOOD_JOB, "pools": "h100"}]
    _, rows = run(tmp_path, jobs, POOLS, job_header=JOB_HEADER + ["pools"])
    assert [r["status"] for r in rows] == ["error", "scheduled"]
    assert "pools='h10'" in rows[0]["error"] and "did you mean 'h100'" in rows[0]["error"]


def test_a_pools_cell_that_names_nothing_is_an_error_row(tmp_path: Path) -> None:
    """`;` named no pool and the job ran on any (solve's `--gpu ','` is refused the same way)."""
    jobs = [{"id": "a", **GOOD_JOB, "pools": ";"}, {"id": "b", **GOOD_JOB, "pools": " , "}, {"id": "c", **GOOD_JOB}]
    _, rows = run(tmp_path, jobs, POOLS, job_header=JOB_HEADER + ["pools"])
    assert [r["status"] for r in rows] == ["error", "error", "scheduled"]
    assert rows[0]["error"] == "pools=';': names nothing; leave it out to allow every one"


def test_a_job_its_stack_refuses_is_an_error_row_as_in_batch(tmp_path: Path) -> None:
    """Megatron refuses torch.compile and Megatron-FSDP's ZeRO-3 with an offload, torchtitan DeepEP outside its DeepSeek models: each
    is a bad job (batch's `error`), not a job no pool runs (it came back `unserved`, the refusal in
    its explanation)."""
    jobs = [{"id": "a", **GOOD_JOB, "stack": "megatron", "compile": "true"},
            {"id": "b", **GOOD_JOB, "stack": "megatron", "zero": "3", "offload": "optimizer"},
            {"id": "c", **GOOD_JOB, "model": "qwen3-30b-a3b", "stack": "torchtitan", "moe_dispatcher": "deepep"},
            {"id": "d", **GOOD_JOB, "stack": "megatron"}]
    result, rows = run(tmp_path, jobs, POOLS, job_header=JOB_HEADER + ["stack", "compile", "zero", "offload", "moe_dispatcher"])
    assert result.exit_code == 3, result.output
    assert [r["status"] for r in rows] == ["error", "error", "error", "scheduled"]
    assert rows[0]["error"].startswith("stack='megatron': does not run torch.compile")
    assert rows[1]["error"].startswith("stack='megatron': does not run offload optimizer with Megatron-FSDP (ZeRO-3)")
    assert rows[2]["error"].startswith("stack='torchtitan': does not run DeepEP for qwen3-30b-a3b")


def test_a_batch_sheets_own_columns_are_copied_through(tmp_path: Path) -> None:
    """fleet.md: a batch sheet is a fleet sheet, every input column kept; a `team` column stopped the run
    ("unknown column; did you mean 'stack'?") where batch copies it."""
    result, rows = run(tmp_path, [{"id": "a", "team": "red", **GOOD_JOB}], job_header=JOB_HEADER + ["team"])
    assert result.exit_code == 0, result.output
    assert rows[0]["team"] == "red" and rows[0]["status"] == "scheduled"


def test_a_pools_rows_agree_on_commitment_and_price_and_a_quota_is_given_once(tmp_path: Path) -> None:
    """Only a pool's first row was read for `committed` and the price: 'maybe' and -5 on a later row
    passed, and two prices became the first; a repeated --quota kept its last value silently."""
    header = INVENTORY_HEADER + ["price_usd_per_gpu_hour"]
    first = {"pool": "p1", "offering": "aws/p5.48xlarge", "num_gpus": "16", "available_from": "0", "available_to": "100",
             "committed": "false", "price_usd_per_gpu_hour": "1"}
    for later, fragment in (({"committed": "maybe"}, "row 3: committed='maybe': must be true or false"),
                            ({"price_usd_per_gpu_hour": "2"}, "row 3: price_usd_per_gpu_hour='2': differs from the first "
                                                              "row of pool 'p1'")):
        jobs_csv = write_csv(tmp_path / "jobs.csv", [{"id": "a", **GOOD_JOB}], JOB_HEADER)
        rows = [first, {**first, "available_from": "100", "available_to": "", **later}]
        inventory = write_csv(tmp_path / "inventory.csv", rows, header)
        one_line_error(invoke("fleet", str(jobs_csv), "--inventory", str(inventory), "-o", str(tmp_path / "s.csv")),
                       fragment)
    result, _ = run(tmp_path, [{"id": "a", **GOOD_JOB}], POOLS, "--market", "on", "--quota", "aws=8", "--quota", "aws=16")
    one_line_error(result, "quota='aws=16'", "names aws again")


def test_a_job_naming_providers_is_planned_on_the_pools(tmp_path: Path) -> None:
    """The job check (solver check_job_runs, over no offering) read a providers cell against no
    offering and made the row an error ("provider='aws': no offering"); the pools choose offerings."""
    result, rows = run(tmp_path, [{"id": "a", **GOOD_JOB, "providers": "aws"}], job_header=JOB_HEADER + ["providers"])
    assert result.exit_code == 0, result.output
    assert rows[0]["status"] == "scheduled" and rows[0]["pool"] == "h100"


def test_unknown_columns_quota_without_market_and_unknown_provider_stop_with_exit_2(tmp_path: Path) -> None:
    result, _ = run(tmp_path, [{"id": "a", **GOOD_JOB, "dedline": "5"}], job_header=JOB_HEADER + ["dedline"])
    one_line_error(result, "column='dedline'")
    result, _ = run(tmp_path, [{"id": "a", **GOOD_JOB}], POOLS, "--quota", "aws=8")
    one_line_error(result, "--market on")
    result, _ = run(tmp_path, [{"id": "a", **GOOD_JOB}], POOLS, "--market", "on", "--quota", "awz=8")
    one_line_error(result, "quota='awz'")


def test_the_market_takes_what_the_inventory_cannot(tmp_path: Path) -> None:
    jobs = [{"id": "a", **GOOD_JOB, "deadline": "5"}, {"id": "b", **GOOD_JOB, "deadline": "5"}]
    small = [{**POOLS[0], "num_gpus": "8"}]
    result, rows = run(tmp_path, jobs, small, "--market", "on", "--quota", "runpod=8", "--pools-out",
                       str(tmp_path / "pools.csv"))
    assert result.exit_code == 0, result.output
    assert min(r["pool"] for r in rows) == "h100" and any(r["pool"].startswith("market:") for r in rows)
    market = next(r for r in rows if r["pool"].startswith("market:"))
    assert float(market["usd_marginal"]) == pytest.approx(float(market["usd_total"]), abs=0.01)
    assert float(market["usd_marginal"]) > 0
    pools = list(csv.DictReader(io.StringIO((tmp_path / "pools.csv").read_text(encoding="utf-8-sig"))))
    assert pools[0]["pool"] == "h100" and float(pools[0]["gpu_hours_used"]) > 0


@pytest.mark.slow
def test_the_shipped_example_schedules_and_plots(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out, plot = tmp_path / "schedule.csv", tmp_path / "gantt.png"
    # The shipped files were written with the default 60 s limit, which the run ends well inside on a quiet machine
    # (29 s here); on a slow CI run (2026-12-06, 697 s for the suite) the limit cut a stage short and one job came
    # out scheduled where the example says unserved. Every stage finishing is what the files show: 240 s lets them.
    result = invoke("fleet", str(EXAMPLES / "jobs.csv"), "--inventory", str(EXAMPLES / "inventory.csv"), "-o", str(out),
                    "--market", "on", "--quota", "runpod=64", "--plot", str(plot), "--time-limit", "240")
    assert result.exit_code in (0, 3), result.output
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8-sig"))))
    expected = list(csv.DictReader(io.StringIO((EXAMPLES / "schedule.csv").read_text(encoding="utf-8-sig"))))
    assert [r["id"] for r in rows] == [r["id"] for r in expected]
    assert [r["status"] for r in rows] == [r["status"] for r in expected]
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_ctrl_c_during_the_search_writes_the_best_schedule_so_far(tmp_path: Path, monkeypatch) -> None:
    """KeyboardInterrupt inside the CP-SAT stages: the schedule found so far (here the greedy first
    schedule) is written, every row present, and the exit code is 130."""
    from vramplan.fleet import model as fleet_model
    def interrupted(self, name, limit_s):
        raise KeyboardInterrupt

    monkeypatch.setattr(fleet_model.FleetSession, "_stage", interrupted)
    jobs = [{"id": "a", **GOOD_JOB}, {"id": "b", **GOOD_JOB, "model": "llama-9000"}]
    result, rows = run(tmp_path, jobs)
    assert result.exit_code == 130, result.output
    assert [r["status"] for r in rows] == ["scheduled", "error"]
    assert "interrupted: wrote the best schedule so far" in result.output


def test_ctrl_c_while_asking_the_planner_still_writes_every_row(tmp_path: Path, monkeypatch) -> None:
    from vramplan.fleet import planner as solver_fleet
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(solver_fleet, "prepare", interrupted)
    result, rows = run(tmp_path, [{"id": "a", **GOOD_JOB}, {"id": "b", **GOOD_JOB}])
    assert result.exit_code == 130, result.output
    assert [r["status"] for r in rows] == ["error", "error"]
    assert all("interrupted before the first schedule" in r["error"] for r in rows)


@pytest.mark.parametrize("which", ["jobs.csv", "inventory.csv"])
def test_the_schedule_never_overwrites_an_input(tmp_path: Path, which: str) -> None:
    """The batch sheet's rule (sheets/output_file.py) holds for fleet too: -o naming an input is
    refused before any work and the input is left byte for byte."""
    jobs_csv = write_csv(tmp_path / "jobs.csv", [{"id": "a", **GOOD_JOB}], JOB_HEADER)
    inventory = write_csv(tmp_path / "inventory.csv", POOLS, INVENTORY_HEADER)
    before = (tmp_path / which).read_bytes()
    result = invoke("fleet", str(jobs_csv), "--inventory", str(inventory), "-o", str(tmp_path / which))
    one_line_error(result)
    assert (tmp_path / which).read_bytes() == before


# --- hostile input: every fleet number has a domain, and a value outside it is one line or a row error ---


@pytest.mark.parametrize(("option", "value"), [
    ("--seed", "2147483648"),  # CP-SAT's random_seed is an int32: this was a TypeError from SatParameters
    ("--seed", "-1"),
    ("--time-limit", "86401"),  # was a ValidationError of FleetQuery after the whole candidate phase
    ("--horizon-days", "1e308"),  # was a ValidationError (horizon_hours inf)
    ("--start", "2027-13-01"),
])
def test_an_option_outside_its_domain_is_one_line_naming_it(tmp_path: Path, option: str, value: str) -> None:
    result, rows = run(tmp_path, [{"id": "a", **GOOD_JOB}], POOLS, option, value)
    one_line_error(result, option, value)
    assert rows == []


@pytest.mark.parametrize("gpus", ["99999999999999999999", "1000001", "-1", "1_000", "inf"])
def test_a_quota_outside_its_domain_is_one_line_naming_it(tmp_path: Path, gpus: str) -> None:
    """A quota of 10^20 GPUs was a ValidationError of PoolWindow (internal error)."""
    result, _ = run(tmp_path, [{"id": "a", **GOOD_JOB}], POOLS, "--market", "on", "--quota", f"aws={gpus}")
    one_line_error(result, f"quota='aws={gpus}'", "1,000,000")


def test_the_largest_seed_and_time_limit_in_their_domains_run(tmp_path: Path) -> None:
    jobs_csv = write_csv(tmp_path / "jobs.csv", [{"id": "a", **GOOD_JOB}], JOB_HEADER)
    inventory = write_csv(tmp_path / "inventory.csv", POOLS, INVENTORY_HEADER)
    result = invoke("fleet", str(jobs_csv), "--inventory", str(inventory), "-o", str(tmp_path / "s.csv"),
                    "--seed", "2147483647", "--time-limit", "86400", "--horizon-days", "3660")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(("column", "value"), [
    ("deadline", "1e308"),  # was OverflowError: cannot convert float infinity to integer
    ("earliest_start", "1e308"),
    ("deadline", "1000001"),
    ("earliest_start", "9e18"),
    ("deadline", "nan"),
    ("deadline", "inf"),
    ("priority", "1e308"),
    ("priority", "nan"),
    ("priority", "1_000"),  # float() took it; the number grammar does not
    ("tokens", "1e308"),
])
def test_a_job_cell_outside_its_domain_is_that_rows_error(tmp_path: Path, column: str, value: str) -> None:
    jobs = [{"id": "bad", **GOOD_JOB, column: value}, {"id": "ok", **GOOD_JOB}]
    result, rows = run(tmp_path, jobs)
    assert result.exit_code == 3, result.output
    assert "internal error" not in result.output and "Traceback" not in result.output
    assert [r["status"] for r in rows] == ["error", "scheduled"]
    assert rows[0]["error"].startswith(f"{column}='{value}'"), rows[0]["error"]


@pytest.mark.parametrize(("column", "value"), [
    ("price_usd_per_gpu_hour", "1e308"),  # was OverflowError: cannot convert float infinity to integer
    ("price_usd_per_gpu_hour", "0"),
    ("price_usd_per_gpu_hour", "1_000"),
    ("available_to", "1e308"),
    ("available_from", "9e18"),
    ("available_to", "0"),
    ("num_gpus", "99999999999999999999"),
])
def test_an_inventory_cell_outside_its_domain_is_one_line_naming_it(tmp_path: Path, column: str, value: str) -> None:
    header = INVENTORY_HEADER + ["price_usd_per_gpu_hour"]
    jobs_csv = write_csv(tmp_path / "jobs.csv", [{"id": "a", **GOOD_JOB}], JOB_HEADER)
    inventory = write_csv(tmp_path / "inventory.csv", [{**POOLS[0], column: value}], header)
    result = invoke("fleet", str(jobs_csv), "--inventory", str(inventory), "-o", str(tmp_path / "s.csv"))
    one_line_error(result, "row 2", f"{column}='{value}'")


def test_a_plan_above_the_cost_limit_is_that_rows_answer_not_the_runs_error(tmp_path: Path) -> None:
    """1e14 tokens at 10,000 USD a GPU-hour: the plan costs more than one job may (domain.py); the
    run stopped with `job=1: costs ...` (exit 2) instead of answering the other rows."""
    jobs = [{"id": "huge", **GOOD_JOB, "tokens": "1e14"}, {"id": "ok", **GOOD_JOB}]
    pools = [{**POOLS[0], "committed": "false", "price_usd_per_gpu_hour": "10000"}]
    jobs_csv = write_csv(tmp_path / "jobs.csv", jobs, JOB_HEADER)
    inventory = write_csv(tmp_path / "inventory.csv", pools, INVENTORY_HEADER + ["price_usd_per_gpu_hour"])
    out = tmp_path / "s.csv"
    result = invoke("fleet", str(jobs_csv), "--inventory", str(inventory), "-o", str(out), "--horizon-days", "3660")
    assert result.exit_code == 3, result.output
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8-sig"))))
    assert [r["status"] for r in rows] == ["unserved", "scheduled"]
    assert "costs more than the fleet's limit" in rows[0]["explanation"]


# --- time zones: every timestamp is UTC (fleet/times.py) ---


def test_timestamps_with_an_offset_are_converted_to_utc(tmp_path: Path) -> None:
    """09:00+09:00 is 00:00 UTC, the pool's start (hour 0); 09:00 without an offset is 09:00 UTC.
    The offset was dropped, so both read as 09:00 and both jobs started at hour 9."""
    jobs = [{"id": "tokyo", **GOOD_JOB, "earliest_start": "2027-01-04T09:00+09:00"},
            {"id": "utc", **GOOD_JOB, "earliest_start": "2027-01-04T09:00"},
            {"id": "zulu", **GOOD_JOB, "earliest_start": "2027-01-04T03:00Z"}]
    pools = [{**POOLS[0], "num_gpus": "64", "available_from": "2027-01-03T19:00-05:00"}]
    result, rows = run(tmp_path, jobs, pools)
    assert result.exit_code == 0, result.output
    assert [float(r["start_hours"]) for r in rows] == [0.0, 9.0, 3.0]
    assert [r["start"] for r in rows] == ["2027-01-04T00:00", "2027-01-04T09:00", "2027-01-04T03:00"]


def test_start_with_an_offset_is_the_same_instant_in_utc(tmp_path: Path) -> None:
    jobs = [{"id": "a", **GOOD_JOB, "earliest_start": "2027-01-04T12:00", "deadline": "2027-01-05T12:00"}]
    result, rows = run(tmp_path, jobs, POOLS, "--start", "2027-01-04T09:00+09:00")
    assert result.exit_code == 0, result.output
    assert float(rows[0]["start_hours"]) == 12.0  # --start is 00:00 UTC


def test_datetime_cells_with_a_time_zone_are_converted_to_utc() -> None:
    """XLSX/Parquet datetime cells arrive as datetimes; one with tzinfo lost its offset."""
    from datetime import date, timedelta, timezone

    from vramplan.fleet.sheet import parse_time

    tokyo = timezone(timedelta(hours=9))
    assert parse_time("earliest_start", datetime(2027, 1, 4, 9, 0, tzinfo=tokyo)) == datetime(2027, 1, 4, 0, 0)
    assert parse_time("earliest_start", datetime(2027, 1, 4, 9, 0)) == datetime(2027, 1, 4, 9, 0)
    assert parse_time("deadline", date(2027, 1, 4)) == datetime(2027, 1, 4)
    assert parse_time("deadline", "2027-01-04T00:00+01:00") == datetime(2027, 1, 3, 23, 0)


def test_an_unserved_jobs_advice_holds_where_the_pools_windows_end(tmp_path: Path) -> None:
    """A pool of 8 GPUs until 100 h, a job needing 187 h of them: the advice was "a deadline of 187.067 h
    would fit it" (with that deadline it stayed unserved, then "pool p1 is full ... over 0-200 h" while
    it sat idle), and "+N GPUs" added GPUs after the pool's last window. Both now say the windows end."""
    pools = [{"pool": "p1", "offering": "aws/p5.48xlarge", "num_gpus": "8", "available_from": "0",
              "available_to": "100", "committed": "true"}]
    for deadline in ("50", "200"):
        job = {"id": "big", "model": "llama-3.1-8b", "seq_len": "4096", "tokens": "5e10", "deadline": deadline}
        _, rows = run(tmp_path, [job], pools)
        why = rows[0]["explanation"]
        assert rows[0]["status"] == "unserved" and "for 100 h at most" in why and "available_to" in why, why
        assert "a deadline of" not in why and "GPUs of pool p1 would serve it" not in why


def test_a_model_path_is_read_only_inside_the_sheets_folder_and_never_overwritten(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    """docs/input-rules.md#paths-in-a-batch-sheet holds for fleet sheets too: a `model` cell that is
    a path is read inside --models-dir (default: the jobs file's folder), relative to it, once; a
    path outside it is the row's error, named as a missing file. fleet read it from the current
    folder, anywhere, and the planner read it again there."""
    sheet_dir, elsewhere = tmp_path / "sheet", tmp_path / "elsewhere"
    sheet_dir.mkdir()
    elsewhere.mkdir()
    config = (HF_CONFIGS / "qwen2.5-7b.json").read_text(encoding="utf-8")
    (sheet_dir / "mine.json").write_text(config, encoding="utf-8")
    (elsewhere / "secret.json").write_text(config, encoding="utf-8")
    monkeypatch.chdir(elsewhere)  # a relative cell is the sheet folder's, not the current folder's
    jobs = [{"id": "a", **GOOD_JOB, "model": "mine.json"}, {"id": "b", **GOOD_JOB, "model": "secret.json"},
            {"id": "c", **GOOD_JOB, "model": "../elsewhere/secret.json"}]
    result, rows = run(sheet_dir, jobs)
    assert [r["status"] for r in rows] == ["scheduled", "error", "error"], result.output
    assert "no such config file inside the models folder" in rows[1]["error"]
    assert "no such config file inside the models folder" in rows[2]["error"]
    # --models-dir widens it; the schedule may not replace a config a row read
    jobs_csv, inventory = sheet_dir / "jobs.csv", sheet_dir / "inventory.csv"
    out = tmp_path / "out.csv"
    invoke("fleet", str(jobs_csv), "--inventory", str(inventory), "-o", str(out), "--time-limit", "10",
           "--models-dir", str(elsewhere))
    statuses = [r["status"] for r in csv.DictReader(io.StringIO(out.read_text(encoding="utf-8-sig")))]
    assert statuses == ["error", "scheduled", "scheduled"]
    before = (sheet_dir / "mine.json").read_bytes()
    one_line_error(invoke("fleet", str(jobs_csv), "--inventory", str(inventory), "-o", str(sheet_dir / "mine.json"),
                          "--time-limit", "10"), "model config")
    assert (sheet_dir / "mine.json").read_bytes() == before


def test_the_summary_says_the_cost_objective_is_whole_cents_per_job(tmp_path: Path) -> None:
    """The cost objective is the integer model's (each job's marginal USD rounded up to whole cents),
    so it can read a cent or more above the marginal sum printed beside it; the line says which is which."""
    market = [{"pool": "m", "offering": "aws/p5.48xlarge", "num_gpus": "16", "committed": "false"}]
    result, rows = run(tmp_path, [{"id": "a", **GOOD_JOB}], market)
    summary = next(line for line in result.output.splitlines() if line.startswith("fleet: optimal"))
    cents = float(summary.split("cost = ")[1].split(" USD")[0].replace(",", ""))
    marginal = float(summary.split("marginal cost ")[1].split(" USD")[0].replace(",", ""))
    assert "(each job rounded up to whole cents)" in summary
    assert 0 <= cents - marginal < 0.01 + 1e-9 and cents == math.ceil(float(rows[0]["usd_marginal"]) * 100) / 100


GAP_HEADER = ["id", "model", "method", "seq_len", "tokens", "earliest_start", "deadline", "num_gpus"]
GAP_POOLS_HEADER = ["pool", "offering", "num_gpus", "available_from", "available_to", "committed", "price_usd_per_gpu_hour"]


def _run_gap(tmp_path: Path, deadline: str):
    """Pool h has no GPUs from 100 to 200 h; pool a (A100s, slower) has them 5-250 h."""
    jobs_csv = write_csv(tmp_path / "jobs.csv", [{"id": "j", "model": "llama-3.1-8b", "method": "qlora", "seq_len": "2048",
                                                  "tokens": "3e9", "earliest_start": "150", "deadline": deadline,
                                                  "num_gpus": "4"}], GAP_HEADER)
    pools = [{"pool": "h", "offering": "aws/p5.48xlarge", "num_gpus": "8", "available_from": "0", "available_to": "10",
              "committed": "true"},
             {"pool": "h", "offering": "aws/p5.48xlarge", "num_gpus": "16", "available_from": "10", "available_to": "100",
              "committed": "true"},
             {"pool": "h", "offering": "aws/p5.48xlarge", "num_gpus": "8", "available_from": "200", "available_to": "300",
              "committed": "true"},
             {"pool": "a", "offering": "lambda/gpu_8x_a100_80gb_sxm4", "num_gpus": "16", "available_from": "5",
              "available_to": "250", "committed": "false", "price_usd_per_gpu_hour": "1.10"}]
    inventory = write_csv(tmp_path / "inventory.csv", pools, GAP_POOLS_HEADER)
    out = tmp_path / "schedule.csv"
    invoke("fleet", str(jobs_csv), "--inventory", str(inventory), "-o", str(out), "--time-limit", "10")
    return list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8-sig"))))[0]


def test_an_unserved_jobs_deadline_advice_holds_across_the_pools_gaps(tmp_path: Path) -> None:
    """A second hostile review (2026-12-07): the advice was the fastest plan's release + duration
    (165.03 h on pool h), which falls in pool h's gap; with it the job stayed unserved. It is now the
    earliest end of any plan alone where its pool has the GPUs throughout: 184.48 h on pool a."""
    row = _run_gap(tmp_path, "160")
    assert row["status"] == "unserved"
    assert "a deadline of 184.483 h would fit it (on pool a, 8 GPUs, alone)" in row["explanation"], row["explanation"]
    taken = _run_gap(tmp_path, "184.5")
    assert taken["status"] == "scheduled" and taken["pool"] == "a"


def test_a_window_the_horizon_cuts_says_raise_the_horizon(tmp_path: Path) -> None:
    """A pool with no available_to runs to the horizon: a job starting an hour before it is told to
    raise --horizon-days, not to add time to the pool's windows (available_to)."""
    job = {"id": "late", **GOOD_JOB, "earliest_start": "2183"}
    _, rows = run(tmp_path, [job])
    why = rows[0]["explanation"]
    assert rows[0]["status"] == "unserved" and "raise --horizon-days" in why and "available_to" not in why, why


def test_a_jobs_pricing_applies_to_the_market_not_to_inventory_pools(tmp_path: Path) -> None:
    """A second hostile review (2026-12-07): a 1yr job on a committed pool went unserved (no 1-year
    price), and a spot job was priced at spot with its restart overhead on a pool nothing preempts."""
    header = ["id", "model", "method", "seq_len", "tokens", "pricing", "restart_overhead"]
    jobs = [{"id": "a", "model": "llama-3.1-8b", "method": "lora", "seq_len": "4096", "tokens": "1e9", "pricing": "1yr"},
            {"id": "b", "model": "llama-3.1-8b", "method": "lora", "seq_len": "4096", "tokens": "1e9", "pricing": "spot",
             "restart_overhead": "0.5"},
            {"id": "c", "model": "llama-3.1-8b", "method": "lora", "seq_len": "4096", "tokens": "1e9"}]
    _, rows = run(tmp_path, jobs, job_header=header)
    assert [r["status"] for r in rows] == ["scheduled"] * 3
    assert len({(r["hours"], r["usd_per_hour"], r["warnings"]) for r in rows}) == 1  # as the on-demand job


@pytest.mark.parametrize("which, header, row", [
    ("jobs", ["id", "model", "seq_len", "tokens", "deadline", "deadline"], ["a", "llama-3.1-8b", "4096", "1e9", "1", "100"]),
    ("inventory", ["pool", "offering", "num_gpus", "num_gpus"], ["h", "aws/p5.48xlarge", "16", "8"]),
])
def test_a_column_named_twice_in_a_fleet_sheet_is_refused(tmp_path: Path, which: str, header, row) -> None:
    """A second hostile review (2026-12-07): the last of the two cells won silently."""
    jobs = [dict(zip(header, row))] if which == "jobs" else [{"id": "a", **GOOD_JOB}]
    pools = [dict(zip(header, row))] if which == "inventory" else POOLS
    jobs_csv = tmp_path / "jobs.csv"
    jobs_csv.write_text(",".join(header) + "\n" + ",".join(row) + "\n" if which == "jobs" else "", encoding="utf-8")
    if which == "jobs":
        inventory = write_csv(tmp_path / "inventory.csv", pools, INVENTORY_HEADER)
    else:
        write_csv(jobs_csv, jobs, JOB_HEADER)
        inventory = tmp_path / "inventory.csv"
        inventory.write_text(",".join(header) + "\n" + ",".join(row) + "\n", encoding="utf-8")
    result = invoke("fleet", str(jobs_csv), "--inventory", str(inventory), "-o", str(tmp_path / "s.csv"))
    one_line_error(result, f"column='{header[-1]}': appears twice in the header")


def test_an_inventory_row_whose_gpu_is_not_its_offerings_is_refused(tmp_path: Path) -> None:
    """The offering won silently over a gpu (and provider) beside it naming another."""
    header = ["pool", "gpu", "provider", "offering", "num_gpus"]
    inventory = write_csv(tmp_path / "inventory.csv", [dict(zip(header, ["h", "a100-sxm-80gb", "lambda",
                                                                         "aws/p5.48xlarge", "16"]))], header)
    jobs = write_csv(tmp_path / "jobs.csv", [{"id": "a", **GOOD_JOB}], JOB_HEADER)
    result = invoke("fleet", str(jobs), "--inventory", str(inventory), "-o", str(tmp_path / "s.csv"))
    assert result.exit_code == 2 and "gpu='a100-sxm-80gb': is not offering aws/p5.48xlarge's" in result.output


def test_a_pool_of_part_of_an_instance_is_refused(tmp_path: Path) -> None:
    """12 GPUs of 8-GPU instances ran one 8-GPU plan at a time and counted 4 phantom idle GPUs."""
    pools = [{"pool": "h", "offering": "aws/p5.48xlarge", "num_gpus": "12"}]
    result, _ = run(tmp_path, [{"id": "a", **GOOD_JOB}], pools)
    assert result.exit_code == 2
    # the run's one stderr line (the progress line "fleet: 1 jobs ..." came before it)
    assert result.stderr == "error: num_gpus=12: pool 'h': is not a whole number of aws/p5.48xlarge's 8-GPU instances\n"


def test_an_objective_column_is_said_to_do_nothing(tmp_path: Path) -> None:
    """A batch sheet's objective column is not used by fleet (docs/fleet.md): a warning line says so."""
    header = ["id", "model", "seq_len", "tokens", "max_gpus", "objective"]
    result, rows = run(tmp_path, [{"id": "a", **GOOD_JOB, "objective": "time"}], job_header=header)
    assert rows[0]["status"] == "scheduled"
    assert "warning: column 'objective' is not used" in result.stderr
    quiet, _ = run(tmp_path, [{"id": "a", **GOOD_JOB}], job_header=header)
    assert "objective" not in quiet.stderr


def test_a_pool_without_gpus_before_the_horizon_says_so_on_stderr(tmp_path: Path) -> None:
    """num_gpus 0 is in the domain (a window may hold none), and a window may start after the
    horizon: such a pool was left out of the summary without a word, as an unused market provider is."""
    pools = [*POOLS, {"pool": "empty", "offering": "aws/p5.48xlarge", "num_gpus": "0"},
             {"pool": "later", "offering": "aws/p5.48xlarge", "num_gpus": "8", "available_from": "5000"}]
    result, rows = run(tmp_path, [{"id": "a", **GOOD_JOB, "model": "gpt2-124m", "seq_len": "512", "tokens": "1e7"}],
                       pools)
    assert result.exit_code == 0, result.output
    assert rows[0]["pool"] == "h100"
    for name in ("empty", "later"):
        assert f"pool {name}: no GPUs before the horizon (num_gpus 0, or windows after it): it serves no job\n" \
               in result.stderr
