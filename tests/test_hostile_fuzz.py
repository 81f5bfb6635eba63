"""Property-based fuzzing of every input surface (hostile input), on a bounded budget.

Whatever the input (CLI option values, catalogue cells, batch-sheet cells), a command exits 0, 2
or 3 with at most one stderr line, and the batch parser answers a row or names its bad cell.
Every plan `solve` returns has passed solver/verify.py's exact re-check inside `solve` (a
mismatch raises, which would be exit 1 here).

The budget is fixed and the examples derandomised so CI is stable; set VRAMPLAN_FUZZ_EXAMPLES=N to
explore with N random examples per property. Derandomised examples are seeded from each test's own
source (hypothesis hashes the body and signature): an edit to a test body draws other examples.
"""

from __future__ import annotations

import csv
import os

from click.testing import CliRunner
from helpers.catalogue import packaged_rows
from helpers.cli import invoke
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from vramplan.batch.run import BatchOptions, run_batch
from vramplan.cli import main
from vramplan.models.catalogue.catalogue import load_catalogue
from vramplan.models.core.errors import VramplanError
from vramplan.sheets.rows import INPUT_COLUMNS, error_row, parse_row

EXPLORE = int(os.environ.get("VRAMPLAN_FUZZ_EXAMPLES", "0"))


def budget(examples: int):
    return settings(max_examples=EXPLORE or examples, deadline=None, derandomize=not EXPLORE, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# Values a hostile user types: extremes, other digit systems, separators, words, unicode.
SPECIAL = ["0", "-1", "1", "1e3", "1e-3", "1_000", "1,000", "\u0661\u0662", "\uff18", "inf", "-inf", "nan", "1e300",
           "1e-300", "9" * 30, "true", "TRUE", "", " ", "0x10", "1/2", "65536", "65537", "4096", "4097", "1e13",
           "1e14", "1e15", "=cmd|' /C calc'!A0", "\x00", "\u202e12", "2e9", ".5", "1.", "+3", "--help"]
NUMBER_TEXT = st.one_of(
    st.sampled_from(SPECIAL),  # half of the hostile values are these
    st.one_of(
        st.integers(-10**20, 10**20).map(str),
        st.integers(0, 70_000).map(str),  # in and just beyond the count domains
        st.floats(1e-4, 1e15).map(repr),  # in and just beyond the real domains
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.text(max_size=12),
    ),
)

# In-domain values (README "Input rules"), extremes included; one option per example may be hostile.
VALID = {
    "--seq-len": st.integers(1, 1_048_576), "--global-batch": st.integers(1, 65_536),
    "--tokens": st.floats(1, 1e14), "--max-gpus": st.integers(1, 512), "--max-nodes": st.integers(1, 4096),
    "--budget-usd": st.floats(1e-6, 1e12), "--deadline-hours": st.floats(1e-6, 1e6),
    "--micro-batch": st.integers(1, 65_536), "--num-gpus": st.integers(1, 4096), "--grad-accum": st.integers(1, 65_536),
    "--capacity-fraction": st.floats(1e-6, 1), "--lora-rank": st.integers(1, 65_536),
    "--cuda-context-mib": st.integers(0, 65_536), "--cublas-workspace-mib": st.integers(0, 65_536),
    "--nccl-mib": st.integers(0, 65_536), "--time-limit": st.floats(0.05, 1), "--top": st.integers(1, 100),
}
SOLVE_OPTIONS = ["--seq-len", "--global-batch", "--tokens", "--max-gpus", "--max-nodes", "--budget-usd",
                 "--deadline-hours", "--micro-batch", "--num-gpus", "--capacity-fraction", "--lora-rank",
                 "--cuda-context-mib", "--nccl-mib", "--time-limit", "--top"]
ESTIMATE_OPTIONS = ["--seq-len", "--micro-batch", "--grad-accum", "--num-gpus", "--capacity-fraction",
                    "--lora-rank", "--tokens", "--cuda-context-mib", "--cublas-workspace-mib", "--nccl-mib"]
CHOICES = {"--method": ["full", "lora", "qlora", "x"], "--zero": ["0", "1", "2", "3", "4"],
           "--precision": ["bf16", "fp16", "fp32", "fp8", "int4"], "--objective": ["cost", "time", "throughput"]}


def option_values(names: list[str], max_valid: int):
    """Up to max_valid in-domain options (as the text a user types) and at most one hostile one."""
    valid = st.dictionaries(st.sampled_from(names), st.none(), max_size=max_valid).flatmap(
        lambda chosen: st.fixed_dictionaries({name: VALID[name].map(str) for name in chosen}))
    hostile = st.dictionaries(st.sampled_from(names), NUMBER_TEXT, max_size=1)
    return st.tuples(valid, hostile).map(lambda pair: {**pair[0], **pair[1]})


def check(result) -> None:
    event(f"exit {result.exit_code}")
    assert result.exit_code in (0, 2, 3), (result.exit_code, result.output, result.exception)
    assert len(result.stderr.splitlines()) <= 1, result.stderr
    assert "Traceback" not in result.output


@budget(60)
@given(values=option_values(ESTIMATE_OPTIONS, 4), model=st.sampled_from(["gpt2-124m", "llama-3.1-8b", "mixtral-8x7b"]),
       choices=st.dictionaries(st.sampled_from(["--method", "--zero", "--precision"]),
                               st.sampled_from(["full", "lora", "0", "3", "bf16", "fp8", "x"]), max_size=2))
def test_estimate_options(values, model, choices):
    args = ["estimate", "--model", model]
    for name, value in {**values, **choices}.items():
        args += [name, value]
    check(CliRunner().invoke(main, args))


@budget(25)
@given(values=option_values(SOLVE_OPTIONS, 4), objective=st.sampled_from(CHOICES["--objective"]),
       engine=st.sampled_from(["cpsat", "brute"]), model=st.sampled_from(["gpt2-124m", "llama-3.1-8b"]))
def test_solve_options(values, objective, engine, model):
    args = ["solve", "--model", model, "--gpu", "h100-sxm-80gb,a10g-24gb", "--objective", objective,
            "--engine", engine, "--format", "json"]
    values.setdefault("--time-limit", "1")
    for name, value in values.items():
        args += [name, value]
    check(CliRunner().invoke(main, args))


def packaged(name: str) -> tuple[list[str], list[dict[str, str]]]:
    return packaged_rows(name)


CELL = st.one_of(NUMBER_TEXT, st.sampled_from(["true", "false", "nvidia", "h100-sxm-80gb", "2026-01", "x,y", '"']))


@budget(25)
@given(column=st.sampled_from(packaged("gpus.csv")[0]), cell=CELL, row=st.integers(0, 12))
def test_gpu_catalogue_cells(tmp_path_factory, column, cell, row):
    header, rows = packaged("gpus.csv")
    rows[row % len(rows)][column] = cell
    path = tmp_path_factory.mktemp("gpus") / "gpus.csv"
    with open(path, "w", newline="", encoding="utf-8", errors="surrogatepass") as file:
        writer = csv.DictWriter(file, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    name = rows[row % len(rows)]["name"]
    check(CliRunner().invoke(main, ["gpus", "--gpus-csv", str(path), "--format", "csv"]))
    check(CliRunner().invoke(main, ["estimate", "--model", "gpt2-124m", "--gpus-csv", str(path), "--gpu", name,
                                    "--precision", "fp16"]))
    solve_on(name, "--gpus-csv", str(path))


def solve_on(gpu: str, *catalogue: str) -> None:
    """A solve that uses the fuzzed row (a listing alone never does arithmetic on its numbers)."""
    check(invoke("solve", "--model", "gpt2-124m", "--seq-len", "512", "--gpu", gpu, "--max-gpus", "8", "--time-limit", "1",
                 "--format", "json", *catalogue))


@budget(25)
@given(column=st.sampled_from(packaged("offerings.csv")[0]), cell=CELL, row=st.integers(0, 47))
def test_offering_catalogue_cells(tmp_path_factory, column, cell, row):
    header, rows = packaged("offerings.csv")
    rows[row % len(rows)][column] = cell
    path = tmp_path_factory.mktemp("offerings") / "offerings.csv"
    with open(path, "w", newline="", encoding="utf-8", errors="surrogatepass") as file:
        writer = csv.DictWriter(file, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    check(CliRunner().invoke(main, ["offerings", "--offerings-csv", str(path), "--format", "csv"]))
    solve_on(packaged("offerings.csv")[1][row % len(rows)]["gpu"], "--offerings-csv", str(path),
             "--pricing", "spot" if column.startswith("spot") else "on-demand")


SHEET_CELL = st.one_of(CELL, st.integers(-10**20, 10**20), st.floats(), st.booleans(), st.none())
SHEET_ROW = st.fixed_dictionaries(
    {"model": st.one_of(st.sampled_from(["gpt2-124m", "llama-3.1-8b", "../x.json", "", "nope"]), st.text(max_size=8)),
     "seq_len": SHEET_CELL},
    optional={name: SHEET_CELL for name in INPUT_COLUMNS if name not in ("model", "seq_len")},
)


@budget(300)
@given(row=SHEET_ROW)
def test_sheet_cells_parse_or_name_their_column(row):
    try:
        parse_row(row)
    except VramplanError as error:
        assert error.field in INPUT_COLUMNS or error.field in ("job", "pins", "input"), error
        assert "\n" not in str(error)


@budget(8)
@given(rows=st.lists(SHEET_ROW, min_size=1, max_size=3))
def test_sheet_rows_are_all_answered(rows):
    catalogue = load_catalogue()
    small = [(i, {**row, "max_gpus": "8", "gpus": "a10g-24gb"}) for i, row in enumerate(rows)]
    answers = dict(run_batch(catalogue, small, BatchOptions(backend="serial")))
    assert sorted(answers) == list(range(len(rows)))
    for answer in answers.values():
        assert answer["status"] in ("optimal", "feasible", "infeasible", "error"), answer
        assert set(answer) == set(error_row(""))
        assert not (answer["error"] or "").startswith("internal error"), answer["error"]
