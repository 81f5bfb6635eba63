"""Hostile inputs a fifth review found (2026-12-08), each now refused in one line or answered right.

- An output that is a folder was exit 1 for `batch -o`, `gpus -o`, `estimate -o` and `catalogue
  import -o` (`output='adir': cannot write: it is a folder`) but exit 2 for `fleet -o`,
  `--pools-out`, `--plot`, `--report` and `--launch-config` (click's own check, worded `Invalid
  value for '--plot': File 'adir' is a directory.`): bad input, exit 2, one wording for every
  output option (a folder that does not exist stays exit 1 for all, a write that cannot happen).
- A tiny `$COLUMNS` (`COLUMNS=10`, `COLUMNS=1`) broke every word of a table over lines (a letter a
  line, names cut to `v100-sxm-…`); `COLUMNS=²` or `LINES=²` (str.isdigit() but no int) stopped
  every table with `internal error: ValueError` (rich reads both).
- `fleet --quota AWS=8` said only that AWS is not a provider; provider names match exactly, as
  `--provider` and `--gpu` match theirs (which are not case-insensitive either): the error now says
  so and names the provider meant.
- `batch -o plans.json` and `fleet -o s.json` wrote CSV under a JSON name (`-o plans.png`, `--pools-out
  pools.html` under a picture's or a page's), exit 0; a jobs sheet named `jobs.json` (a JSON array)
  was read as CSV (`is not valid CSV: line 1: ',' expected after '"'`), an `.xls` as text that is
  not UTF-8. Without a format given, such a name is refused before any work, saying what to name it.
- `solve --region US-EAST-1` (a region no offering lists: the catalogue spells it us-east-1) and
  `--country USA` (or `nan`, `*`: no ISO 3166-1 alpha-2 code) were answered infeasible, exit 3, with
  a table of changes (8-bit optimizer states, LoRA...) that could not help; a batch row alike.
  Unknown providers were already refused: now regions are too (naming the one meant), and a country
  must be two letters.
- `catalogue import skypilot`: a vms.csv whose header names `Price` twice priced every instance at
  the second column's cells (csv.DictReader keeps the last), silently; a `Price` of `1_000` (or
  Arabic-Indic digits) was read by float() as 1000, a number no catalogue cell takes.
- `solve --report r.json` wrote an HTML page under a JSON name, `--launch-config l.png` (or `.csv`)
  a JSON configuration under a picture's name (the third review refused such names for `-o` only).
- `VRAMPLAN_DEBUG=0` (or `false`, `off`), meant to keep tracebacks off, turned them on: any
  non-empty value did, so an internal error printed a traceback instead of its one line.
- An output ending in '/' lost the slash to pathlib: `gpus -o newdir/` wrote a file named newdir,
  `-o plans.csv/` replaced plans.csv, exit 0, where the shell and open() say 'Not a directory'.
- `VRAMPLAN_TODAY=20261231` and `2026-W50-1` were taken (date.fromisoformat's other ISO forms)
  where every message says YYYY-MM-DD, and `2027-02-29` was said not to be of that form.
"""

from __future__ import annotations

import pytest
from helpers.cli import assert_error_line, invoke
from helpers.sheets import write_csv

JOBS = "model,seq_len\ngpt2-124m,512\n"
FLEET_JOB = {"id": "a", "model": "gpt2-124m", "seq_len": "512", "tokens": "1e6", "max_gpus": "8"}
FLEET_POOL = {"pool": "h100", "offering": "aws/p5.48xlarge", "num_gpus": "8", "committed": "true"}


def _fleet_files(folder) -> tuple[str, str]:
    jobs = write_csv(folder / "fjobs.csv", [FLEET_JOB], list(FLEET_JOB))
    inventory = write_csv(folder / "inv.csv", [FLEET_POOL], list(FLEET_POOL))
    return str(jobs), str(inventory)


FOLDER_OUTPUTS = [
    (("gpus", "-o", "{out}"), "output"),
    (("stacks", "-o", "{out}"), "output"),
    (("estimate", "--model", "gpt2-124m", "--seq-len", "512", "-o", "{out}"), "output"),
    (("estimate", "--model", "gpt2-124m", "--seq-len", "512", "--plot", "{out}.png"), "plot"),
    (("estimate", "--model", "gpt2-124m", "--seq-len", "512", "--launch-config", "{out}"), "launch-config"),
    (("solve", "--model", "gpt2-124m", "--seq-len", "512", "--report", "{out}"), "report"),
    (("solve", "--model", "gpt2-124m", "--seq-len", "512", "--plot", "{out}.svg"), "plot"),
    (("batch", "jobs.csv", "-q", "-o", "{out}"), "output"),
    (("fleet", "fjobs.csv", "--inventory", "inv.csv", "-o", "{out}"), "output"),
    (("fleet", "fjobs.csv", "--inventory", "inv.csv", "-o", "s.csv", "--pools-out", "{out}"), "pools-out"),
    (("fleet", "fjobs.csv", "--inventory", "inv.csv", "-o", "s.csv", "--plot", "{out}.png"), "plot"),
    (("catalogue", "import", "skypilot", "sky", "-o", "{out}"), "output"),
]


@pytest.mark.parametrize(("args", "option"), FOLDER_OUTPUTS)
@pytest.mark.parametrize("kind", ["folder", "missing folder"])
def test_an_output_that_is_a_folder_or_in_none_is_one_exit_code_for_every_option(tmp_path, monkeypatch, args,
                                                                            option, kind):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs.csv").write_text(JOBS, encoding="utf-8")
    _fleet_files(tmp_path)
    (tmp_path / "sky" / "aws").mkdir(parents=True)
    (tmp_path / "sky" / "aws" / "vms.csv").write_text("InstanceType\n", encoding="utf-8")
    out = "out" if kind == "folder" else "missing/out"
    argv = [arg.format(out=out) for arg in args]
    if kind == "folder":
        (tmp_path / argv[-1]).mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    result = invoke(*argv)  # a folder is bad input (exit 2), a missing one a write that cannot happen (exit 1)
    assert result.exit_code == (2 if kind == "folder" else 1), (result.exit_code, result.stderr)
    assert_error_line(result, f"{option}='{argv[-1]}': cannot write: ",
                      "it is a folder" if kind == "folder" else "does not exist")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("columns", ["10", "1", "59"])
def test_a_tiny_screen_gets_tables_of_the_least_width_not_a_letter_a_line(columns):
    result = invoke("gpus", env={"COLUMNS": columns})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "GPUs (dense TFLOPS; usable memory as the driver reports)"  # the title in one line
    assert any(line.startswith("h100-sxm-80gb ") for line in lines) and "…" not in result.stdout
    assert max(map(len, lines)) <= 60
    assert invoke("gpus", env={"COLUMNS": "60"}).stdout == result.stdout


def test_a_tiny_screen_draws_a_plan_readably():
    result = invoke("estimate", "--model", "gpt2-124m", "--seq-len", "512", env={"COLUMNS": "10"})
    assert result.exit_code == 0, result.stderr
    assert "limit (90% of 79.65 GiB)" in result.stdout and "verda/1H100.80S.32V" in result.stdout


@pytest.mark.parametrize("variable", ["COLUMNS", "LINES"])
@pytest.mark.parametrize("value", ["\u00b2", "\u0668\u0660", "-5", "abc", " "])
def test_a_columns_or_lines_that_is_no_number_is_ignored(variable, value):
    result = invoke("stacks", env={variable: value})
    assert result.exit_code == 0 and not result.stderr, result.stderr
    assert result.stdout == invoke("stacks", env={"COLUMNS": None, "LINES": None}).stdout


def test_the_screen_width_reads_ascii_digits_only():
    from vramplan.commands.output import MIN_TABLE_COLUMNS, columns_width

    assert [columns_width(text) for text in ("", "0", "\u00b2", "\u0668\u0660", "x", "1", "80", " 120 ")] == [
        None, None, None, None, None, MIN_TABLE_COLUMNS, 80, 120]


@pytest.mark.parametrize(("quota", "hint"), [("AWS=8", "did you mean aws?"), ("Lambda=8", "did you mean lambda?"),
                                             ("xyz=8", "providers: aws, azure")])
def test_a_quota_provider_matches_exactly_as_provider_does_and_names_the_one_meant(tmp_path, quota, hint):
    jobs, inventory = _fleet_files(tmp_path)
    result = invoke("fleet", jobs, "--inventory", inventory, "-o", str(tmp_path / "s.csv"), "--market", "on",
                    "--quota", quota)
    assert result.exit_code == 2
    assert_error_line(result, f"quota='{quota.split('=')[0]}': is not a provider of the catalogue (names match "
                              "exactly, as for --provider); ", hint)
    assert not (tmp_path / "s.csv").exists()
    solve = invoke("solve", "--model", "gpt2-124m", "--seq-len", "512", "--provider", quota.split("=")[0])
    assert solve.exit_code == 2 and "provider=" in solve.stderr  # --provider matches exactly too


@pytest.mark.parametrize(("args", "option", "kind"), [
    (("batch", "jobs.csv", "-o", "plans.json"), "output", "a JSON file (a sheet of JSON is JSON lines, .jsonl)"),
    (("batch", "jobs.csv", "-o", "plans.PNG"), "output", "a picture"),
    (("batch", "jobs.json", "-o", "plans.csv"), "jobs", "a JSON file (a sheet of JSON is JSON lines, .jsonl)"),
    (("batch", "jobs.xls", "-o", "plans.csv"), "jobs", "an Excel 97-2003 file (save it as .xlsx)"),
    (("fleet", "fjobs.csv", "--inventory", "inv.csv", "-o", "s.json"), "output", "a JSON file (a sheet of JSON is JSON lines, .jsonl)"),
    (("fleet", "fjobs.csv", "--inventory", "inv.csv", "-o", "s.csv", "--pools-out", "p.html"), "pools-out",
     "a web page"),
    (("fleet", "fjobs.csv", "--inventory", "jobs.json", "-o", "s.csv"), "inventory",
     "a JSON file (a sheet of JSON is JSON lines, .jsonl)"),
])
def test_a_sheet_named_as_another_kind_of_file_is_refused_before_any_work(tmp_path, monkeypatch, args, option, kind):
    monkeypatch.chdir(tmp_path)
    for name in ("jobs.csv", "jobs.json", "jobs.xls"):
        (tmp_path / name).write_text(JOBS, encoding="utf-8")
    _fleet_files(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    result = invoke(*args)
    assert result.exit_code == 2
    path = args[args.index(f"--{option}") + 1] if f"--{option}" in args else (
        args[args.index("-o") + 1] if option == "output" else args[1])
    flag = {"output": "--format", "pools-out": None}.get(option, "--input-format" if args[0] == "fleet" else None)
    assert_error_line(result, f"{option}='{path}': is named as {kind}, not a sheet: name it .csv, .xlsx, .parquet or "
                              ".jsonl" + (f", or give {flag}" if flag else ""))
    assert result.stderr.rstrip().endswith(".jsonl" + (f", or give {flag}" if flag else ""))
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_format_given_writes_under_any_name():
    from pathlib import Path

    from vramplan.sheets.sheet_files import format_of

    assert format_of(Path("plans.json"), "jsonl", "output", "--format") == "jsonl"
    assert format_of(Path("plans.txt"), None, "output", "--format") == "csv"  # a name of no kind stays CSV
    assert format_of(Path("plans.json")) == "csv"  # the Python API's and a resume's reading: unchanged


@pytest.mark.parametrize(("region", "hint"), [("US-EAST-1", "did you mean us-east-1?"),
                                              ("ca-mtl-1", "did you mean CA-MTL-1?"),
                                              ("nowhere", "see `vramplan offerings --format csv`")])
def test_a_region_no_offering_lists_is_refused_naming_the_one_meant(region, hint):
    result = invoke("solve", "--model", "gpt2-124m", "--seq-len", "512", "--gpu", "h100-sxm-80gb", "--region", region)
    assert result.exit_code == 2 and result.stdout == ""
    assert_error_line(result, f"region='{region}': is a region of no offering in the catalogue; {hint}")


@pytest.mark.parametrize("country", ["USA", "nan", "*", "U", "\u00dcS"])
def test_a_country_that_is_no_two_letter_code_is_refused(country):
    from vramplan import SolveQuery
    from vramplan.solver.query_fields import query_from_fields

    with pytest.raises(ValueError, match=r"is not an ISO 3166-1 alpha-2 code: two letters, such as US or DE"):
        query_from_fields({"model": "gpt2-124m", "seq_len": 512, "countries": f"DE;{country}"})  # a batch cell
    with pytest.raises(ValueError, match="alpha-2"):
        SolveQuery(model="gpt2-124m", countries=(country,))
    result = invoke("solve", "--model", "gpt2-124m", "--seq-len", "512", "--country", country)
    assert result.exit_code == 2
    assert_error_line(result, f"country={country!r}: is not an ISO 3166-1 alpha-2 code")


def test_a_country_code_in_any_case_and_a_known_region_still_plan(catalogue):
    from vramplan import Job, SolveQuery, solve

    answer = solve(catalogue, SolveQuery(model="gpt2-124m", job=Job(seq_len=512), gpus=("h100-sxm-80gb",), max_gpus=8,
                                         countries=("us",), regions=("us-east-1", "CA-MTL-1")))
    assert answer.status == "optimal"


SKY_HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,SpotPrice"


def _sky_import(tmp_path, *lines: str, header: str = SKY_HEADER):
    (tmp_path / "v8" / "lambda").mkdir(parents=True)
    (tmp_path / "v8" / "lambda" / "vms.csv").write_text("\n".join([header, *lines]) + "\n", encoding="utf-8")
    return invoke("catalogue", "import", "skypilot", str(tmp_path / "v8"), "--price-date", "2026-12-05")


def test_a_skypilot_header_that_repeats_a_column_is_refused(tmp_path):
    result = _sky_import(tmp_path, "gpu_8x_h100_sxm5,H100,8,208,1800,23.92,us-east-1,,0.01",
                         header=SKY_HEADER + ",Price")
    assert result.exit_code == 2 and result.stdout == ""
    assert_error_line(result, "cloud='lambda/vms.csv': its header names the column 'Price' twice")


@pytest.mark.parametrize("price", ["1_000", "\u0662\u0663", "0x10", "nan", "-5"])
def test_a_skypilot_price_outside_the_number_grammar_skips_its_instance_naming_the_cell(tmp_path, price):
    result = _sky_import(tmp_path, f"gpu_8x_h100_sxm5,H100,8,208,1800,{price},us-east-1,")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("\n") == 1  # the header alone
    assert f"Price {price!r} is not a number > 0: lambda/gpu_8x_h100_sxm5" in result.stderr


@pytest.mark.parametrize(("args", "option", "name"), [
    (("solve", "--model", "gpt2-124m", "--seq-len", "512"), "report", "r.json"),
    (("solve", "--model", "gpt2-124m", "--seq-len", "512"), "report", "r.PNG"),
    (("solve", "--model", "gpt2-124m", "--seq-len", "512"), "report", "r.csv"),
    (("solve", "--model", "gpt2-124m", "--seq-len", "512"), "launch-config", "l.png"),
    (("estimate", "--model", "gpt2-124m", "--seq-len", "512"), "launch-config", "l.csv"),
    (("estimate", "--model", "gpt2-124m", "--seq-len", "512"), "launch-config", "l.xlsx"),
])
def test_a_report_or_launch_config_named_as_another_kind_of_file_is_refused(tmp_path, args, option, name):
    path = tmp_path / name
    result = invoke(*args, f"--{option}", str(path))
    assert result.exit_code == 2 and result.stdout == "" and not path.exists()
    assert_error_line(result, f"{option}='{path}': --{option} writes ", f"not {path.suffix}; name the file so")


@pytest.mark.parametrize(("value", "on"), [("0", False), ("false", False), (" OFF ", False), ("no", False), ("", False),
                                           ("1", True), ("yes", True), ("true", True)])
def test_vramplan_debug_is_off_when_set_to_a_word_for_off(monkeypatch, value, on):
    from vramplan.commands import output
    from vramplan.models.core.debug import debug_enabled

    monkeypatch.setenv("VRAMPLAN_DEBUG", value)
    assert debug_enabled() is on

    def boom(options):
        raise RuntimeError("boom")

    monkeypatch.setattr(output, "chosen_format", boom)
    result = invoke("gpus")
    if on:
        assert isinstance(result.exception, RuntimeError)  # raised for Python to print its traceback
    else:
        assert result.exit_code == 1 and result.stderr == "internal error: RuntimeError: boom\n"


@pytest.mark.parametrize(("args", "option"), [(a, o) for a, o in FOLDER_OUTPUTS if a[-1] == "{out}"])
@pytest.mark.parametrize("name", ["newdir/", "jobs.csv/"])
def test_an_output_ending_in_a_slash_is_refused_and_writes_nothing(tmp_path, monkeypatch, args, option, name):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs.csv").write_text(JOBS, encoding="utf-8")
    _fleet_files(tmp_path)
    (tmp_path / "sky" / "aws").mkdir(parents=True)
    (tmp_path / "sky" / "aws" / "vms.csv").write_text("InstanceType\n", encoding="utf-8")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    result = invoke(*[arg.format(out=name) for arg in args])
    assert result.exit_code == 2
    assert_error_line(result, f"{name!r} ends in '/', which names a folder: name a file")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


@pytest.mark.parametrize(("today", "reason"), [("20261231", "must be a date YYYY-MM-DD"),
                                               ("2026-W50-1", "must be a date YYYY-MM-DD"),
                                               ("2026-12-31T00:00", "must be a date YYYY-MM-DD"),
                                               ("2027-02-29", "is not a day of the calendar")])
def test_vramplan_today_is_a_calendar_day_written_yyyy_mm_dd(today, reason):
    result = invoke("gpus", env={"VRAMPLAN_TODAY": today})
    assert result.exit_code == 2
    assert_error_line(result, f"VRAMPLAN_TODAY={today!r}: {reason}")
