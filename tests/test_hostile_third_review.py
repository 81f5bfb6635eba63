"""Hostile inputs a third review found (2026-12-07), each now refused in one line or answered right.

- `-o` into the packaged catalogues folder (`stacks -o catalogues/stacks.csv` in a source checkout)
  replaced a catalogue every later run reads, and every command after it failed.
- A NaN in a JSON-lines line (`"budget_usd": NaN`) or a Parquet float column (a NaN, not a null)
  read as an empty cell: the row was solved with no budget, or the default tokens.
- `--min-mfu 1e-310` (in its domain) made an infinite step cap: `internal error: OverflowError`.
- `VRAMPLAN_TODAY=9999-12-31` overflowed the catalogue's day of grace (`internal error: OverflowError`).
- `--restart-overhead` with a pricing other than spot, and `batch --address` with the local backend,
  were silently ignored (a contradiction: refused like the others, docs/input-rules.md#contradictions);
  `--qlora-bits` with method full said it applied to lora or qlora (qlora alone).
- `estimate --launch-config` wrote a ready-to-launch configuration for a plan that does not fit.
- A CSV line with text after a closing quote stopped the whole batch (a line short of a field is
  only its row's error).
- A second batch on an output another batch was writing said "add --resume to finish that run"
  (the running batch's journal), not that another run is writing it.
- `--jurisdiction eu --country US` planned on an offering with regions in both.
- A sheet separated by ';' said only that the model column is required.
- `load_catalogue(gpus_csv=123)` was a bare TypeError; an error in a packaged catalogue named it
  as the option (`offerings_csv='offerings.csv'`) the user had not given.
- A JSON-lines list of GPU names (`"gpus": ["h100-sxm-80gb"]`) was read as one name, `["h100-sxm-80gb"]`.
- Python API: `stack_job(stack=1)`, `estimate(tokens=10**400)`, `run_batch` with options None or a
  dict or rows None, and `plan_fleet(None, ...)` raised bare Python exceptions; `BatchOptions` took
  an address with the local backend and `FleetQuery` booleans as counts.
- Without a price for the pricing asked, the reason read "no provider has 1-year committed prices
  for (use --pricing on-demand)".
- `gpus -o g.xlsx`, `solve -o plan.parquet`: a text table written under a sheet's or a picture's name.
- A `--plot` or `--report` path in a folder that does not exist was named `output=`.
- The API's `Job(method="full", lora_rank=8)` and `Job(method="lora", qlora_bits=8)` were solved with
  the field ignored (the command line and a sheet refuse them).
"""

from __future__ import annotations

import json

import pytest
from helpers.cli import assert_error_line, invoke, invoke_batch
from helpers.paths import CATALOGUE_DIR


@pytest.mark.parametrize("args", [("stacks",), ("models", "--format", "json"), ("estimate", "--model", "llama-3.1-8b")])
@pytest.mark.parametrize("name", ["stacks.csv", "offerings.csv", "a-new-file.csv"])
def test_no_output_goes_into_the_packaged_catalogues(args, name):
    target = CATALOGUE_DIR / name
    before = target.read_bytes() if target.exists() else None
    result = invoke(*args, "-o", str(target))
    assert result.exit_code == 2
    assert_error_line(result, "packaged catalogues folder", "write to another file")
    assert (target.read_bytes() if target.exists() else None) == before


def _jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("cell", ["NaN", "Infinity", "-Infinity"])
def test_a_json_constant_that_is_no_number_is_its_rows_error(tmp_path, cell):
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text('{"model": "gpt2-124m", "seq_len": 512, "budget_usd": 5}\n'
                    f'{{"model": "gpt2-124m", "seq_len": 512, "budget_usd": {cell}}}\n', encoding="utf-8")
    out = tmp_path / "plans.jsonl"
    invoke_batch(str(jobs), "-o", str(out), quiet=True)
    first, second = _jsonl(out)
    assert first["status"] != "error"
    assert second["status"] == "error" and second["error"].startswith(f"budget_usd={cell!r}: is not a number")
    assert second["budget_usd"] == cell  # the cell as given (strict JSON: its text)


def test_a_parquet_nan_is_its_rows_error_and_a_null_is_empty(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet

    jobs = tmp_path / "jobs.parquet"
    pyarrow.parquet.write_table(pa.table({"model": ["gpt2-124m"] * 3, "seq_len": [512] * 3,
                                          "budget_usd": pa.array([5.0, float("nan"), None])}), jobs)
    out = tmp_path / "plans.parquet"
    invoke_batch(str(jobs), "-o", str(out), quiet=True)
    import pandas

    plans = pandas.read_parquet(out)
    assert list(plans["status"][:1]) != ["error"] and plans["status"][2] != "error"  # 5 USD; null: no budget
    assert plans["status"][1] == "error" and plans["error"][1].startswith("budget_usd='NaN': is not a number")
    assert str(plans["budget_usd"].dtype) == "float64"  # written back as numbers, the NaN a NaN


@pytest.mark.parametrize("floor", [1e-310, 5e-324])
def test_a_subnormal_mfu_floor_caps_nothing(catalogue, floor):
    from vramplan import Job, SolveQuery, solve

    query = SolveQuery(model="gpt2-124m", job=Job(seq_len=1024), global_batch=8, tokens=1e8, gpus=("h100-sxm-80gb",),
                       max_gpus=8)
    floored = solve(catalogue, query.model_copy(update={"min_mfu": floor}))
    unfloored = solve(catalogue, query.model_copy(update={"min_mfu": 0.0}))
    assert floored.status == "optimal" and floored.plans[0].plan == unfloored.plans[0].plan


def test_a_last_day_for_today_is_one_line():
    result = invoke("estimate", "--model", "llama-3.1-8b", env={"VRAMPLAN_TODAY": "9999-12-31"})
    assert result.exit_code == 2
    assert_error_line(result, "VRAMPLAN_TODAY='9999-12-31'", "before 9999-01-01")


@pytest.mark.parametrize("command", ["estimate", "solve"])
def test_a_restart_overhead_off_spot_is_refused(command):
    result = invoke(command, "--model", "gpt2-124m", "--seq-len", "1024", "--restart-overhead", "0.5")
    assert result.exit_code == 2
    assert_error_line(result, "restart_overhead=0.5: applies to --pricing spot, not on-demand")


def test_a_restart_overhead_cell_off_spot_is_its_rows_error(tmp_path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("model,seq_len,pricing,restart_overhead\ngpt2-124m,512,spot,0.5\ngpt2-124m,512,,0.5\n",
                    encoding="utf-8")
    out = tmp_path / "plans.jsonl"
    invoke_batch(str(jobs), "-o", str(out), quiet=True)
    spot, on_demand = _jsonl(out)
    assert spot["status"] != "error"
    assert on_demand["status"] == "error" and "applies to --pricing spot, not on-demand" in on_demand["error"]


def test_an_address_without_a_cluster_backend_is_refused(tmp_path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("model,seq_len\ngpt2-124m,512\n", encoding="utf-8")
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), "--address", "10.255.255.1:6379")
    assert result.exit_code == 2
    assert_error_line(result, "address='10.255.255.1:6379': applies to --backend ray or dask")
    assert not (tmp_path / "plans.csv").exists()


def test_qlora_bits_with_full_names_qlora_alone():
    result = invoke("estimate", "--model", "llama-3.1-8b", "--qlora-bits", "8")
    assert_error_line(result, "qlora-bits='8': applies to --method qlora, not full")


def test_estimate_writes_no_launch_configuration_for_a_plan_that_does_not_fit(tmp_path):
    path = tmp_path / "launch.json"
    result = invoke("estimate", "--model", "llama-3.1-70b", "--seq-len", "8192", "--launch-config", str(path))
    assert result.exit_code == 3 and not path.exists()
    assert result.stderr == f"warning: the plan does not fit, so there is no launch configuration; {path} not written\n"
    fits = invoke("estimate", "--model", "llama-3.1-8b", "--seq-len", "1024", "--gpu", "h100-sxm-80gb", "--num-gpus", "8",
                  "--zero", "3", "--launch-config", str(path))
    assert fits.exit_code == 0 and path.exists()


def test_a_csv_line_with_text_after_a_quote_is_its_rows_error(tmp_path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text('model,seq_len\ngpt2-124m,1024\n"gpt2-124m","512"junk\ngpt2-124m,512\n', encoding="utf-8")
    out = tmp_path / "plans.jsonl"
    result = invoke_batch(str(jobs), "-o", str(out), quiet=True)
    assert result.exit_code == 3
    first, bad, last = _jsonl(out)
    assert first["status"] != "error" and last["status"] != "error"
    assert bad["status"] == "error" and bad["error"] == "row is not valid CSV (line 3: ',' expected after '\"')"


def test_a_header_line_that_is_no_csv_is_the_files_error(tmp_path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text('"model"x,seq_len\ngpt2-124m,1024\n', encoding="utf-8")
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), quiet=True)
    assert result.exit_code == 2
    assert_error_line(result, "is not valid CSV: line 1")


def test_a_batch_on_an_output_another_run_writes_says_so(tmp_path):
    from vramplan.sheets import output_file
    from vramplan.sheets.journal import journal_path

    jobs = tmp_path / "jobs.csv"
    jobs.write_text("model,seq_len\ngpt2-124m,512\n", encoding="utf-8")
    out = tmp_path / "plans.csv"
    target = output_file.output_target(out)
    journal_path(target.real).write_text("", encoding="utf-8")  # what the running batch writes beside it
    holder = output_file.OutputLock(target)
    try:
        result = invoke_batch(str(jobs), "-o", str(out), quiet=True)
    finally:
        holder.release()
    assert result.exit_code == 1
    assert "another vramplan run is writing it" in result.stderr and "--resume" not in result.stderr


def test_a_country_outside_the_jurisdiction_is_refused(catalogue):
    from vramplan import SolveQuery, solve

    result = invoke("solve", "--model", "llama-3.1-8b", "--jurisdiction", "eu", "--country", "US")
    assert result.exit_code == 2
    assert_error_line(result, "country='US': is outside --jurisdiction eu")
    inside = solve(catalogue, SolveQuery(model="llama-3.1-8b", jurisdiction="eu", countries=("de",)))
    assert inside.status == "optimal"
    assert "DE" in catalogue.offering(inside.plans[0].plan.offering).countries.upper().split(";")


@pytest.mark.parametrize("mark", [";", "\t"])
def test_a_sheet_separated_otherwise_is_told_the_separator(tmp_path, mark):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(f"model{mark}seq_len\ngpt2-124m{mark}512\n", encoding="utf-8")
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), quiet=True)
    assert result.exit_code == 2
    assert_error_line(result, "column='model': is required", f"columns are separated by ',' (not {mark!r})")


def test_catalogue_paths_of_the_wrong_type_and_packaged_files_are_named():
    from vramplan import VramplanError, load_catalogue

    with pytest.raises(VramplanError, match=r"gpus_csv='123': must be a path"):
        load_catalogue(gpus_csv=123)
    result = invoke("gpus", env={"VRAMPLAN_TODAY": "2020-01-01"})  # every packaged price is from after it
    assert result.exit_code == 2
    # the fourth review: that is VRAMPLAN_TODAY's error, not the packaged file's (it named no option either)
    assert_error_line(result, "VRAMPLAN_TODAY='2020-01-01': is before the newest price of the packaged offerings")


def test_a_json_list_of_names_is_a_list_column():
    from vramplan.sheets.rows import parse_row

    query = parse_row({"model": "gpt2-124m", "seq_len": "512", "gpus": '["h100-sxm-80gb", "a100-sxm-80gb"]',
                       "countries": '["de"]'})
    assert query.gpus == ("h100-sxm-80gb", "a100-sxm-80gb") and query.countries == ("de",)
    assert parse_row({"model": "gpt2-124m", "seq_len": "512", "gpus": "[1, 2]"}).gpus == ("[1", "2]")  # no names: as written


def test_the_python_api_names_what_it_refuses(catalogue):
    from vramplan import BatchOptions, FleetQuery, Job, Plan, VramplanError, estimate, plan_fleet, run_batch, stack_job

    plan = Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=3)
    cases = [
        (lambda: stack_job(stack=1), "stack='1': must be a stack's name"),
        (lambda: estimate(catalogue, "llama-3.1-8b", Job(), plan, tokens=10**400), "tokens="),
        (lambda: estimate(catalogue, "llama-3.1-8b", Job(), plan, 1e9, "spot", 10**400), "restart_overhead="),
        (lambda: list(run_batch(catalogue, [(0, {"model": "gpt2-124m", "seq_len": 512})], None)), "options='NoneType'"),
        (lambda: list(run_batch(catalogue, [(0, {"model": "gpt2-124m", "seq_len": 512})], {"backend": "serial"})),
         "options='dict'"),
        (lambda: list(run_batch(catalogue, None, BatchOptions(backend="serial"))), "rows='NoneType'"),
        (lambda: plan_fleet(None, FleetQuery(jobs=(), pools=())), "catalogue='NoneType'"),
        (lambda: BatchOptions(backend="local", address="127.0.0.1:1"), "applies to the ray or dask backend"),
        (lambda: FleetQuery(jobs=(), pools=(), num_workers=True), "is a boolean, not a number"),
        (lambda: FleetQuery(jobs=(), pools=(), random_seed=True), "is a boolean, not a number"),
    ]
    for call, fragment in cases:
        with pytest.raises((VramplanError, ValueError)) as error:
            call()
        assert fragment in str(error.value), (fragment, str(error.value))


def test_a_pricing_no_offering_has_reads_whole(tmp_path):
    lines = (CATALOGUE_DIR / "offerings.csv").read_text(encoding="utf-8").splitlines()
    offerings = tmp_path / "offerings.csv"
    offerings.write_text("\n".join([lines[0], *(line for line in lines if line.startswith("aws,p5.48xlarge,"))]) + "\n",
                         encoding="utf-8")
    result = invoke("solve", "--model", "llama-3.1-8b", "--pricing", "1yr", "--offerings-csv", str(offerings))
    assert result.exit_code == 3
    assert "no provider has 1-year committed prices (use --pricing on-demand)" in result.output, result.output


@pytest.mark.parametrize("args", [("gpus",), ("estimate", "--model", "gpt2-124m", "--seq-len", "512"),
                                  ("solve", "--model", "gpt2-124m", "--seq-len", "512")])
@pytest.mark.parametrize("name", ["out.xlsx", "out.parquet", "out.jsonl", "out.png"])
def test_a_text_output_under_a_sheet_or_picture_name_is_refused(tmp_path, args, name):
    path = tmp_path / name
    result = invoke(*args, "-o", str(path))
    assert result.exit_code == 2 and not path.exists()
    assert_error_line(result, "this command writes a table, JSON (.json) or CSV (.csv)")
    assert invoke(*args, "-o", str(path), "--format", "csv").exit_code in (0, 3)  # asked for: written


@pytest.mark.parametrize("option", ["--plot", "--report"])
def test_a_picture_or_page_path_is_named_as_its_option(tmp_path, option):
    name = "p.png" if option == "--plot" else "r.html"
    result = invoke("solve", "--model", "gpt2-124m", "--seq-len", "512", option, str(tmp_path / "none" / name))
    assert result.exit_code != 0
    assert result.stderr.startswith(f"error: {option[2:]}='") and "does not exist" in result.stderr


@pytest.mark.parametrize("fields, fragment", [
    ({"method": "full", "lora_rank": 8}, "lora_rank=8: applies to method lora or qlora"),
    ({"method": "full", "lora_dropout": 0.1}, "lora_dropout=0.1: applies to method lora or qlora"),
    ({"method": "lora", "qlora_bits": 8}, "qlora_bits=8: applies to method qlora, not lora"),
])
def test_the_api_job_refuses_adapter_fields_its_method_cannot_use(fields, fragment):
    from vramplan import Job, stack_job

    with pytest.raises(ValueError, match=fragment):
        Job(**fields)
    with pytest.raises(ValueError, match=fragment):
        stack_job(stack="torchtune", seq_len=2048, **fields)
    assert Job.model_validate(Job(method="lora", lora_rank=8).model_dump()).lora_rank == 8  # a dump round-trips
    assert Job(method="full", lora_rank=16).method == "full"  # the default is no contradiction
