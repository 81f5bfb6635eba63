"""One number grammar and validated domains (hostile input): the CLI, the batch sheet and the catalogues
read numbers the same way; legal extremes answer, values beyond a domain are one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.catalogue import packaged_rows
from helpers.cli import invoke, one_line_error
from helpers.sheets import write_csv

from vramplan.models.catalogue.catalogue import MAX_CATALOGUE_ROWS
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.numbers import parse_count, parse_positive, parse_real
from vramplan.sheets.rows import parse_row

# --- the grammar ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text, value", [
    ("8", 8), (" 2048 ", 2048), ("1e3", 1000), ("1E+3", 1000), ("2.0", 2), ("1.5e3", 1500), (1000.0, 1000), (7, 7),
])
def test_counts_in_the_grammar(text, value):
    assert parse_count("seq_len", text) == value


@pytest.mark.parametrize("text", [
    "1_000", "1,000", "\u0661\u0662", "\uff11\uff12", "1.5", "1e-3", "0x10", "inf", "nan", "", "TRUE", True, False,
    1.5, float("inf"), "1" * 41, "9" * 30, "1e30", [1], None.__class__,
])
def test_not_counts(text):
    with pytest.raises(VramplanError) as error:
        parse_count("seq_len", text)
    assert error.value.field == "seq_len"


def test_reals_in_the_grammar():
    assert parse_real("tokens", "2e9") == 2e9 and parse_positive("tokens", ".5") == 0.5
    for bad in ("1e400", "inf", "-inf", True, float("nan"), "1/2", "2e9 tokens"):
        with pytest.raises(VramplanError):
            parse_real("tokens", bad)
    with pytest.raises(VramplanError, match="> 0"):
        parse_positive("tokens", "0")


@pytest.mark.parametrize("option, text", [
    ("--global-batch", "1_000"), ("--global-batch", "\u0661\u0662"), ("--seq-len", "true"), ("--tokens", "inf"),
    ("--max-gpus", "1.5"), ("--budget-usd", "nan"),
])
def test_the_cli_refuses_what_the_sheet_refuses(option, text):
    line = one_line_error(invoke("solve", "--model", "gpt2-124m", *_seq_len_unless(option), option, text))
    assert option in line and text in line
    column = option.removeprefix("--").replace("-", "_")
    with pytest.raises(VramplanError) as error:
        parse_row({"model": "gpt2-124m", "seq_len": "512", column: text})
    assert error.value.field == column


@pytest.mark.parametrize("args", [
    ["batch", "jobs.csv", "-o", "plans.csv", "--workers", "\u0662"],
    ["batch", "jobs.csv", "-o", "plans.csv", "--chunk-size", "\u0663"],
    ["fleet", "--seed", "\uff15", "jobs.csv", "--inventory", "inv.csv", "-o", "out.csv"],
    ["fleet", "--workers", "\uff12", "jobs.csv", "--inventory", "inv.csv", "-o", "out.csv"],
    ["estimate", "--model", "llama-3.1-8b", "--stack", "megatron", "--num-gpus", "4", "--pp", "4",
     "--stage-layers", "\uff18,8,8,8"],
])
def test_other_counts_take_ascii_digits_only(args):
    """click's IntRange (and str.isdigit in a pipeline split) took full-width and Arabic-Indic digits."""
    line = one_line_error(invoke(*args))
    assert "ASCII digits" in line or "stage_layers=" in line
    assert "Traceback" not in line


def test_the_sheet_accepts_what_the_cli_accepts():
    query = parse_row({"model": "gpt2-124m", "seq_len": "5.12e2", "global_batch": "1e3", "tokens": "2e9"})
    assert (query.job.seq_len, query.global_batch, query.tokens) == (512, 1000, 2e9)
    result = invoke("solve", "--model", "gpt2-124m", "--seq-len", "5.12e2", "--global-batch", "1e3", "--max-gpus", "8",
                    "--format", "json")
    assert result.exit_code == 0, result.output
    assert '"global_batch": 1000' in result.stdout


@pytest.mark.parametrize("cell", [True, False, "TRUE", "true"])
def test_booleans_are_not_counts_in_a_sheet(cell):
    with pytest.raises(VramplanError, match="boolean|not a number"):
        parse_row({"model": "gpt2-124m", "seq_len": "512", "num_gpus": cell})


# --- domains: beyond them one line, inside them an answer ---------------------------------------


@pytest.mark.parametrize("option, value, bound", [
    ("--budget-usd", "1e300", "<= 1e+12"),
    ("--deadline-hours", "1e300", "<= 1000000"),
    ("--global-batch", "1000000000", "<= 65536"),  # took 36-62 s in a divisor loop before
    ("--max-gpus", "1000000", "<= 16384"),  # brute force ran past 40 s before
    ("--max-gpus", "0", ">= 1"),
    ("--tokens", "1e15", "<= 1e+14"),
    ("--seq-len", "16777216", "<= 1048576"),
    ("--micro-batch", "100000", "<= 65536"),
])
def test_values_beyond_a_domain_are_one_line_naming_field_value_and_bound(option, value, bound):
    line = one_line_error(invoke("solve", "--model", "gpt2-124m", *_seq_len_unless(option), option, value))
    assert option.removeprefix("--").replace("-", "_") in line and bound in line, line


@pytest.mark.parametrize("command, option, value, bound", [
    ("estimate", "--tokens", "1e308", "between 1 and 1e+14"),  # printed a 300-digit cost before
    ("estimate", "--capacity-fraction", "1e-7", ">= 0.05"),  # the limit rounded to 0 bytes: "nothing fits"
    ("solve", "--capacity-fraction", "0.0004", ">= 0.05"),
])
def test_estimate_domains_are_the_solvers(command, option, value, bound):
    line = one_line_error(invoke(command, "--model", "gpt2-124m", "--seq-len", "512", "--gpu", "h100-sxm-80gb",
                                 option, value))
    assert option.removeprefix("--").replace("-", "_") in line and bound in line, line


@pytest.mark.parametrize("extra", [
    ("--tokens", "1e13"), ("--global-batch", "65536"), ("--max-gpus", "16384", "--max-nodes", "16384"),
    pytest.param(("--max-gpus", "16384", "--engine", "brute"), marks=pytest.mark.slow), ("--budget-usd", "1e12"),
    ("--deadline-hours", "1e6"),
])
def test_legal_extremes_answer(extra):
    result = invoke("solve", "--model", "gpt2-124m", "--seq-len", "512", "--time-limit", "5", "--format", "json",
                    *extra)
    assert result.exit_code in (0, 3), result.output
    assert result.stderr == ""


def test_a_large_batch_of_an_8b_model_solves_on_cpsat():
    result = invoke("solve", "--model", "llama-3.1-8b", "--seq-len", "2048", "--global-batch", "30000",
                    "--time-limit", "5", "--format", "json")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("model, seq_len", [("llama-3.1-405b", "8192"), ("llama-3.1-70b", "4096")])
def test_large_models_at_global_batch_4096_solve_for_cost(model, seq_len):
    result = invoke("solve", "--model", model, "--seq-len", seq_len, "--global-batch", "4096", "--time-limit", "5",
                    "--format", "json")
    assert result.exit_code in (0, 3), result.output


def test_an_internal_error_is_one_stderr_line():
    """Whatever an internal error holds (CP-SAT prints a line per variable), stderr is one line."""
    result = invoke("solve", "--model", "llama-3.1-405b", "--seq-len", "8192", "--global-batch", "4096",
                    "--time-limit", "5")
    assert result.exit_code in (0, 1, 3)
    assert len(result.stderr.splitlines()) <= 1


# --- catalogue columns ---------------------------------------------------------------------------


def packaged(name: str) -> list[dict[str, str]]:
    return packaged_rows(name)[1]


def write(rows: list[dict[str, str]], path: Path) -> str:
    return str(write_csv(path, rows, list(rows[0])))


def with_column(column: str, value: str) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The packaged gpus and offerings rows, `column` (of whichever file has it) set to `value` in every row."""
    gpus, offerings = packaged("gpus.csv"), packaged("offerings.csv")
    if column in gpus[0]:
        return [row | {column: value} for row in gpus], offerings
    return gpus, [row | {column: value} for row in offerings]


def solve_with(tmp_path, gpus=None, offerings=None, *extra: str):
    args = ["solve", "--model", "gpt2-124m", "--seq-len", "512", "--max-gpus", "8", "--time-limit", "5"]
    if gpus is not None:
        args += ["--gpus-csv", write(gpus, tmp_path / "gpus.csv")]
    if offerings is not None:
        args += ["--offerings-csv", write(offerings, tmp_path / "offerings.csv")]
    return invoke(*args, *extra)


@pytest.mark.parametrize("column", ["price_usd_per_hour", "spot_price_usd_per_hour", "host_memory_gib"])
@pytest.mark.parametrize("value", ["inf", "1e300", "1e-300", "nan", "-1", "1_0"])
def test_offering_columns_beyond_their_domain_are_one_line(tmp_path, column, value):
    rows = [row | {column: value} for row in packaged("offerings.csv")]
    line = one_line_error(solve_with(tmp_path, offerings=rows))
    assert "offerings_csv" in line and column in line and "line 2" in line


@pytest.mark.parametrize("provider", ["a,b", "a;b", "a=b"])
def test_a_provider_name_no_option_can_select_is_one_line(tmp_path, provider):
    """',' and ';' separate names in --provider and a batch providers cell, '=' ends a --quota provider: such
    a row loaded, and nothing could select it ("provider='a': no offering; known: a,b")."""
    rows = [row | {"provider": provider} for row in packaged("offerings.csv")]
    line = one_line_error(solve_with(tmp_path, offerings=rows))
    assert "offerings_csv" in line and "provider" in line


@pytest.mark.parametrize("column", ["fp16_dense_tflops", "bf16_dense_tflops", "hbm_bandwidth_gb_per_s",
                                    "network_bandwidth_gb_per_s", "memory_usable_mib"])
@pytest.mark.parametrize("value", ["inf", "1e300", "1e-300"])
def test_gpu_columns_beyond_their_domain_are_one_line(tmp_path, column, value):
    """An inf TFLOPS row returned a plan at MFU 0.0% with exit 0 before."""
    rows = [row | {column: value} for row in packaged("gpus.csv")]
    line = one_line_error(solve_with(tmp_path, gpus=rows))
    assert "gpus_csv" in line and column in line


@pytest.mark.parametrize("column, value", [("network_bandwidth_gb_per_s", "0.1"), ("fp16_dense_tflops", "0.1"),
                                           ("hbm_bandwidth_gb_per_s", "100000"), ("host_memory_gib", "1")])
def test_catalogue_extremes_inside_the_domain_answer(tmp_path, column, value):
    gpus, offerings = with_column(column, value)
    result = solve_with(tmp_path, gpus, offerings, "--format", "json")
    assert result.exit_code in (0, 3), result.output


@pytest.mark.parametrize("column, value", [("price_usd_per_hour", "10000"), ("bf16_dense_tflops", "1")])
def test_catalogue_extremes_that_overflow_the_integer_objective(tmp_path, column, value):
    gpus, offerings = with_column(column, value)
    result = invoke("solve", "--model", "llama-3.1-8b", "--time-limit", "5", "--format", "json",
                    "--gpus-csv", write(gpus, tmp_path / "gpus.csv"),
                    "--offerings-csv", write(offerings, tmp_path / "offerings.csv"))
    assert result.exit_code in (0, 3), result.output


def test_an_offerings_file_over_the_row_limit_is_one_line(tmp_path):
    """A 10,000-row offerings file took 24-56 s and overflowed the objective before."""
    base = packaged("offerings.csv")
    rows = [base[i % len(base)] | {"instance_type": f"x{i}"} for i in range(MAX_CATALOGUE_ROWS + 1)]
    line = one_line_error(solve_with(tmp_path, offerings=rows))
    assert f"more than {MAX_CATALOGUE_ROWS} rows" in line


@pytest.mark.parametrize("content", [b"caf\xe9,x\n", b"name\n" + b"a" * 200_000 + b"\n"])
def test_undecodable_or_oversized_catalogue_cells_are_one_line(tmp_path, content):
    path = tmp_path / "gpus.csv"
    path.write_bytes(content)
    one_line_error(invoke("gpus", "--gpus-csv", str(path)))


def test_a_fifo_catalogue_does_not_hang(tmp_path):
    import os

    fifo = tmp_path / "gpus.csv"
    os.mkfifo(fifo)
    assert "not a regular file" in one_line_error(invoke("gpus", "--gpus-csv", str(fifo)))


def test_a_number_longer_than_the_grammar_says_its_length():
    """A 50-digit count is a number: it is refused for its length, and says so (a third hostile
    review, 2026-12-07: it read 'is not a number')."""
    with pytest.raises(VramplanError, match="has more than 40 characters"):
        parse_count("seq_len", "9" * 50)
    with pytest.raises(VramplanError, match="is not a number"):
        parse_count("seq_len", "12 tokens")


def _seq_len_unless(option: str) -> tuple[str, ...]:
    """gpt2-124m's `--seq-len 512`, unless the test gives its own (an option is given once)."""
    return () if option == "--seq-len" else ("--seq-len", "512")
