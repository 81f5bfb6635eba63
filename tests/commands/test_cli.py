"""The command line through click's CliRunner (docs/design.md section 7).

Exit codes: 0 ok, 1 error, 2 bad input, 3 does not fit. Results on stdout; an error is exactly
one line on stderr, starting with "error:", naming the field and the value, never a traceback.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
from helpers.cli import assert_error_line, invoke
from helpers.paths import CATALOGUE_DIR, HF_CONFIGS

from vramplan.models.core.results import PILLARS, EstimateResult
from vramplan.models.core.setup import Job, Plan
from vramplan.models.estimate import estimate

COMMANDS = ["estimate", "gpus", "models", "offerings"]
FORMATS = ["table", "json", "csv"]

FULL_EXAMPLE = [
    "estimate", "--model", "llama-3.1-70b", "--method", "full", "--seq-len", "8192", "--micro-batch", "1",
    "--gpu", "h100-sxm-80gb", "--num-gpus", "64", "--zero", "3", "--recompute", "full", "--precision", "bf16",
    "--optimizer", "adamw", "--accounting", "zero", "--attention", "flash", "--offload", "none",
]
DOES_NOT_FIT = ["estimate", "--model", "llama-2-7b", "--method", "full", "--gpu", "a10g-24gb", "--num-gpus", "1"]
SMALL = ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--num-gpus", "8", "--zero", "3",
         "--seq-len", "4096", "--micro-batch", "1", "--recompute", "full", "--tokens", "2e9"]

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INFEASIBLE = 0, 1, 2, 3



def assert_ok(result, code: int = EXIT_OK) -> None:
    assert result.exit_code == code, (result.exit_code, result.stderr, result.exception)
    assert "Traceback" not in result.stderr


# --- help -----------------------------------------------------------------------------------------


def test_group_help():
    result = invoke("--help")
    assert_ok(result)
    for command in COMMANDS:
        assert command in result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_command_help(command):
    result = invoke(command, "--help")
    assert_ok(result)
    assert result.stdout.startswith("Usage:")
    assert "--format" in result.stdout and "--output" in result.stdout


def test_estimate_help_documents_the_options():
    text = invoke("estimate", "--help").stdout
    for option in ["--model", "--gpu", "--num-gpus", "--zero", "--recompute", "--precision", "--seq-len",
                   "--micro-batch", "--offload", "--tokens", "--gpus-csv", "--offerings-csv", "--models-csv"]:
        assert option in text, option


def test_unknown_command_is_usage_error():
    result = invoke("frobnicate")
    assert result.exit_code == EXIT_USAGE
    assert_error_line(result, "frobnicate")


# --- catalogue listings ---------------------------------------------------------------------------


def test_models_json_lists_exact_parameter_counts(catalogue):
    result = invoke("models", "--format", "json")
    assert_ok(result)
    rows = json.loads(result.stdout)
    assert isinstance(rows, list) and all(isinstance(row, dict) for row in rows)
    assert all({"name", "num_params"} <= set(row) for row in rows)
    by_name = {row["name"]: row for row in rows}
    assert set(by_name) == set(catalogue.architectures)
    assert by_name["llama-3.1-70b"]["num_params"] == 70_553_706_496
    assert by_name["llama-3.1-8b"]["num_params"] == 8_030_261_248
    assert isinstance(by_name["gpt2-124m"]["num_params"], int)


LISTINGS = {"gpus": "gpus", "offerings": "offerings", "models": "architectures"}


def _names(catalogue, command: str) -> set[str]:
    return set(getattr(catalogue, LISTINGS[command]))


@pytest.mark.parametrize("command", sorted(LISTINGS))
def test_listing_json(command, catalogue):
    result = invoke(command, "--format", "json")
    assert_ok(result)
    rows = json.loads(result.stdout)
    assert [row["name"] for row in rows] == list(getattr(catalogue, LISTINGS[command]))


@pytest.mark.parametrize("command", sorted(LISTINGS))
def test_listing_csv(command, catalogue):
    result = invoke(command, "--format", "csv")
    assert_ok(result)
    reader = csv.DictReader(io.StringIO(result.stdout))
    rows = list(reader)
    assert reader.fieldnames and reader.fieldnames[0] == "name"
    assert len(set(reader.fieldnames)) == len(reader.fieldnames)
    assert {row["name"] for row in rows} == _names(catalogue, command)
    assert all(len(row) == len(reader.fieldnames) and None not in row for row in rows)


def test_gpus_csv_carries_the_catalogue_columns(catalogue):
    rows = list(csv.DictReader(io.StringIO(invoke("gpus", "--format", "csv").stdout)))
    h100 = next(row for row in rows if row["name"] == "h100-sxm-80gb")
    assert int(h100["memory_usable_mib"]) == catalogue.gpus["h100-sxm-80gb"].memory_usable_mib
    assert float(h100["bf16_dense_tflops"]) == catalogue.gpus["h100-sxm-80gb"].bf16_dense_tflops


def test_offerings_json_has_dated_per_gpu_prices(catalogue):
    rows = json.loads(invoke("offerings", "--format", "json").stdout)
    p5 = next(row for row in rows if row["name"] == "aws/p5.48xlarge")
    assert p5["price_date"] and p5["gpu"] == "h100-sxm-80gb"
    assert p5["price_usd_per_gpu_hour"] == pytest.approx(p5["price_usd_per_hour"] / p5["num_gpus"], abs=1e-4)


@pytest.mark.parametrize("command", sorted(LISTINGS))
def test_listing_table(command):
    result = invoke(command)
    assert_ok(result)
    assert result.stdout.strip()
    assert "name" in result.stdout
    assert result.stderr == ""


def test_gpus_table_shows_short_names():
    text = invoke("gpus", "--format", "table").stdout
    for name in ["a10g-24gb", "l4-24gb", "l40s-48gb"]:
        assert name in text


@pytest.mark.parametrize("command", sorted(LISTINGS))
def test_listing_table_shows_every_name_unbroken(command, catalogue):
    text = invoke(command).stdout
    missing = sorted(name for name in _names(catalogue, command) if name not in text)
    assert not missing


@pytest.mark.parametrize("command", sorted(LISTINGS))
def test_listing_output_file(command, tmp_path):
    out = tmp_path / f"{command}.json"
    result = invoke(command, "--format", "json", "-o", str(out))
    assert_ok(result)
    assert result.stdout == ""
    assert json.loads(out.read_text(encoding="utf-8"))


def test_listing_uses_user_csv(tmp_path):
    header = (CATALOGUE_DIR / "gpus.csv").read_text(encoding="utf-8").splitlines()
    l4 = next(line for line in header if line.startswith("l4-24gb,"))
    path = tmp_path / "gpus.csv"
    path.write_text("\n".join([header[0], l4.replace("l4-24gb", "my-l4-24gb", 1)]) + "\n", encoding="utf-8")
    offerings = tmp_path / "offerings.csv"
    o_lines = (CATALOGUE_DIR / "offerings.csv").read_text(encoding="utf-8").splitlines()
    offerings.write_text(o_lines[0] + "\n", encoding="utf-8")
    result = invoke("gpus", "--format", "json", "--gpus-csv", str(path), "--offerings-csv", str(offerings))
    assert_ok(result)
    assert [row["name"] for row in json.loads(result.stdout)] == ["my-l4-24gb"]


# --- estimate -------------------------------------------------------------------------------------


def _api_result(catalogue) -> EstimateResult:
    job = Job(seq_len=4096)
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=3, micro_batch=1, recompute="full")
    return estimate(catalogue, "llama-3.1-8b", job, plan, 2e9)


def test_estimate_json_round_trips(catalogue):
    result = invoke(*SMALL, "--format", "json")
    assert_ok(result)
    parsed = EstimateResult.model_validate_json(result.stdout)
    assert parsed == _api_result(catalogue)
    assert json.loads(parsed.model_dump_json()) == json.loads(result.stdout)


def test_estimate_json_fields_and_sums():
    data = json.loads(invoke(*SMALL, "--format", "json").stdout)
    assert data["model"]["name"] == "llama-3.1-8b"
    assert data["model"]["num_params"] == 8_030_261_248
    memory = data["memory"]
    for field in ["weights_bytes", "gradients_bytes", "optimizer_states_bytes", "activations_bytes",
                  "overhead_bytes", "total_bytes", "capacity_bytes", "limit_bytes", "fits", "host_bytes"]:
        assert field in memory, field
    for pillar in PILLARS:
        assert isinstance(memory[f"{pillar}_bytes"], int) and memory[f"{pillar}_bytes"] >= 0, pillar
    assert memory["total_bytes"] == sum(memory[f"{p}_bytes"] for p in PILLARS)
    assert memory["capacity_bytes"] == 81559 * 2**20
    assert memory["limit_bytes"] <= 0.9 * memory["capacity_bytes"]
    assert memory["fits"] is True and memory["total_bytes"] <= memory["limit_bytes"]
    assert memory["host_bytes"] == 0  # no offload
    performance = data["performance"]
    assert performance["tokens_per_s"] > 0 and 0 < performance["mfu_fraction"] < 1 and performance["step_time_s"] > 0
    assert data["cost"]["usd_per_hour"] > 0


def test_estimate_csv_is_one_flat_row():
    json_data = json.loads(invoke(*SMALL, "--format", "json").stdout)
    result = invoke(*SMALL, "--format", "csv")
    assert_ok(result)
    lines = result.stdout.splitlines()
    assert len(lines) == 2, lines[:3]
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == 1
    row = rows[0]
    for key in ["model.name", "model.num_params", "memory.total_bytes", "memory.fits", "performance.tokens_per_s",
                "cost.usd_per_hour"]:
        assert key in row, key
    assert int(row["memory.total_bytes"]) == json_data["memory"]["total_bytes"]
    assert row["model.name"] == "llama-3.1-8b"


@pytest.mark.parametrize("fmt", FORMATS)
def test_estimate_output_file(fmt, tmp_path):
    out = tmp_path / f"estimate.{fmt}"
    stdout_text = invoke(*SMALL, "--format", fmt).stdout
    result = invoke(*SMALL, "--format", fmt, "-o", str(out))
    assert_ok(result)
    assert result.stdout == ""
    assert out.read_text(encoding="utf-8") == stdout_text


def test_the_fully_specified_example_fits():
    result = invoke(*FULL_EXAMPLE)
    assert_ok(result, EXIT_OK)
    assert "FITS" in result.stdout and "DOES NOT FIT" not in result.stdout
    assert "llama-3.1-70b" in result.stdout
    data = json.loads(invoke(*FULL_EXAMPLE, "--format", "json").stdout)
    assert data["memory"]["fits"] is True
    assert data["plan"]["num_gpus"] == 64 and data["plan"]["zero"] == 3
    assert data["model"]["num_params"] == 70_553_706_496


def test_plan_that_does_not_fit_exits_3():
    result = invoke(*DOES_NOT_FIT)
    assert_ok(result, EXIT_INFEASIBLE)
    assert "DOES NOT FIT" in result.stdout
    assert result.stderr == ""  # the answer is on stdout; not fitting is not an error message
    data = json.loads(invoke(*DOES_NOT_FIT, "--format", "json").stdout)
    assert data["memory"]["fits"] is False
    assert data["memory"]["total_bytes"] > data["memory"]["limit_bytes"]


def test_plan_that_does_not_fit_exits_3_in_every_format(tmp_path):
    for fmt in FORMATS:
        assert invoke(*DOES_NOT_FIT, "--format", fmt).exit_code == EXIT_INFEASIBLE, fmt
    out = tmp_path / "r.json"
    assert invoke(*DOES_NOT_FIT, "--format", "json", "-o", str(out)).exit_code == EXIT_INFEASIBLE
    assert json.loads(out.read_text(encoding="utf-8"))["memory"]["fits"] is False


def test_estimate_with_hf_config_path():
    result = invoke("estimate", "--model", str(HF_CONFIGS / "llama-3.1-8b.json"), "--gpu", "h100-sxm-80gb",
                    "--num-gpus", "8", "--zero", "3", "--format", "json")
    assert_ok(result)
    assert json.loads(result.stdout)["model"]["num_params"] == 8_030_261_248


def test_estimate_prices_with_user_offerings_csv(tmp_path):
    lines = (CATALOGUE_DIR / "offerings.csv").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "prices.csv"
    header = ",".join(c for c in lines[0].split(",") if c in ("provider", "instance_type", "gpu", "num_gpus",
                      "price_usd_per_hour", "spot_price_usd_per_hour", "host_memory_gib", "network_bandwidth_gb_per_s",
                      "price_date", "source"))  # the optional columns left out
    path.write_text(header + "\nacme,h100x8,h100-sxm-80gb,8,8.0,,2048,,2026-12-01,negotiated contract\n",
                    encoding="utf-8")
    result = invoke(*SMALL, "--format", "json", "--offerings-csv", str(path))
    assert_ok(result)
    cost = json.loads(result.stdout)["cost"]
    assert cost["offering"] == "acme/h100x8"
    assert cost["usd_per_hour"] == pytest.approx(8.0)


def test_more_gpus_with_zero3_never_need_more_memory_per_gpu():
    totals = []
    for num_gpus in ["8", "16", "64"]:
        args = ["estimate", "--model", "llama-3.1-70b", "--zero", "3", "--num-gpus", num_gpus, "--format", "json"]
        totals.append(json.loads(invoke(*args).stdout)["memory"]["total_bytes"])
    assert totals == sorted(totals, reverse=True)


# --- bad input: exit 2, one line on stderr naming the field and the value -------------------------


BASE = ["estimate", "--model", "llama-3.1-8b"]

BAD_INPUTS = {
    "seq-len-zero": (BASE + ["--seq-len", "0"], ["seq_len", "0"]),
    "micro-batch-negative": (BASE + ["--micro-batch", "-1"], ["micro_batch", "-1"]),
    "fp8-on-a100": (BASE + ["--precision", "fp8", "--gpu", "a100-sxm-80gb"], ["precision", "fp8", "a100-sxm-80gb"]),
    "zero-4": (BASE + ["--zero", "4"], ["--zero", "4"]),
    "unknown-model": (["estimate", "--model", "llama-3.1-7b"], ["model", "llama-3.1-7b", "llama-3.1-8b"]),
    # read as the current folder: "model='config.json': cannot read", a value never given
    "empty-model": (["estimate", "--model", ""], ["model=''", "is empty"]),
    "unknown-gpu": (BASE + ["--gpu", "h100"], ["gpu", "'h100'", "h100-sxm-80gb", "h100-pcie-80gb"]),
    "tokens-overflow": (BASE + ["--tokens", "1e400"], ["--tokens", "1e400"]),
    "tokens-not-a-number": (BASE + ["--tokens", "abc"], ["--tokens", "abc"]),
    "tokens-zero": (BASE + ["--tokens", "0"], ["--tokens", "0"]),
    "capacity-fraction": (BASE + ["--capacity-fraction", "1.5"], ["capacity_fraction", "1.5"]),
    "offload-without-zero": (BASE + ["--offload", "optimizer", "--zero", "0"], ["offload", "optimizer", "ZeRO"]),
    "offload-params-zero-2": (BASE + ["--offload", "optimizer+params", "--zero", "2"], ["offload", "optimizer+params"]),
    "lora-targets": (BASE + ["--lora-targets", "nonsense", "--method", "lora"], ["lora_targets", "nonsense"]),
    "seq-len-past-learned-positions": (["estimate", "--seq-len", "4096", "--model", "gpt2-124m"],
                                       ["seq_len", "4096", "1024"]),
    "gpus-csv-missing": (BASE + ["--gpus-csv", "no/such/gpus.csv"], ["gpus_csv", "no/such/gpus.csv"]),
    "unsupported-hf-config": (["estimate", "--model", str(HF_CONFIGS / "unsupported-t5.json")], ["model_type", "t5"]),
    "unknown-offering": (BASE + ["--offering", "aws/p9.huge"], ["offering", "aws/p9.huge"]),
    "offering-of-other-gpu": (BASE + ["--gpu", "h100-sxm-80gb", "--offering", "aws/g5.xlarge"],
                              ["offering", "aws/g5.xlarge"]),
    "num-gpus-zero": (BASE + ["--num-gpus", "0"], ["num_gpus", "0"]),
    "bad-format": (["gpus", "--format", "xml"], ["--format", "xml"]),
    "missing-model": (["estimate"], ["--model"]),
    "bad-method": (BASE + ["--method", "dpo"], ["--method", "dpo"]),
    "seq-len-not-int": (BASE + ["--seq-len", "4k"], ["--seq-len", "4k"]),
    "spot-without-spot-price": (BASE + ["--pricing", "spot", "--offering", "lambda/gpu_8x_h100_sxm5"],
                                ["pricing", "spot", "lambda/gpu_8x_h100_sxm5"]),
    "bf16-on-v100": (BASE + ["--gpu", "v100-sxm-32gb"], ["precision", "bf16", "v100-sxm-32gb"]),
    "fp8-with-qlora": (BASE + ["--method", "qlora", "--precision", "fp8"], ["precision", "fp8", "qlora"]),
    "lora-rank-zero": (BASE + ["--method", "lora", "--lora-rank", "0"], ["lora_rank", "0"]),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_and_exit_2(case):
    args, fragments = BAD_INPUTS[case]
    result = invoke(*args)
    assert result.exit_code == EXIT_USAGE, (result.exit_code, result.stderr)
    assert_error_line(result, *fragments)
    assert result.stdout == ""


def test_bad_user_gpus_csv_is_one_line_and_exit_2(tmp_path):
    lines = (CATALOGUE_DIR / "gpus.csv").read_text(encoding="utf-8").splitlines()
    fields = lines[0].split(",")
    cells = lines[2].split(",")
    cells[fields.index("memory_usable_mib")] = "-5"
    path = tmp_path / "gpus.csv"
    path.write_text("\n".join([lines[0], lines[1], ",".join(cells)] + lines[3:]) + "\n", encoding="utf-8")
    result = invoke("gpus", "--gpus-csv", str(path))
    assert result.exit_code == EXIT_USAGE
    assert_error_line(result, str(path), "memory_usable_mib", "-5")


def test_offload_error_names_the_field_not_the_whole_plan():
    result = invoke(*BASE, "--offload", "optimizer", "--zero", "0")
    assert result.stderr.startswith("error: offload=")
    assert "{" not in result.stderr


def test_unwritable_output_is_one_line_and_exit_1(tmp_path):
    out = tmp_path / "no" / "such" / "dir" / "r.json"
    result = invoke(*SMALL, "--format", "json", "-o", str(out))
    assert result.exit_code == EXIT_ERROR
    assert_error_line(result, str(out))
