"""Hostile inputs a fourth review found (2026-12-07), each now refused in one line or answered right.

- An empty path (`-o ''`, `--plot ''`, `--gpus-csv ''`: an unset shell variable) became Path('') =
  '.', and the error named a path the user never typed (`output='.': cannot write: it is a folder`,
  exit 1 for batch).
- A plan of a few minutes read `0.0 hours (0.00 days)`, `step 0.00 s` and `0.00` in the runner-ups'
  days column (the HTML report's hours column `0.0`).
- An option given twice took the last silently (`estimate --gpu h100-sxm-80gb --gpu a100-sxm-80gb`
  estimated the A100, `--sequence-parallel --no-sequence-parallel` was off).
- `VRAMPLAN_TODAY` (or a machine clock) before the packaged prices blamed the packaged catalogue:
  `offerings_csv='packaged offerings.csv': line 2, price_date ... is after today`.
- `run_batch(None, rows, options)` (a catalogue of the wrong kind, which docs/batch.md says is refused)
  started the local workers, which stopped the batch with a bare `RuntimeError`.
- `--gpus-csv` of your own GPUs alone blamed the packaged offerings (`offerings_csv='packaged
  offerings.csv': offering aws/p4d.24xlarge names unknown gpu ...`), a file the user never named.
- A config.json `layer_types` of the wrong length or kind was skipped for the family's default
  local/global pattern (transformers refuses such a config), silently.
"""

from __future__ import annotations

import json

import pytest
from helpers.cli import assert_error_line, invoke


@pytest.mark.parametrize(("args", "option"), [
    (("gpus", "-o", ""), "'-o' / '--output'"),
    (("stacks", "-o", " "), "'-o' / '--output'"),
    (("models", "--models-csv", ""), "'--models-csv'"),
    (("estimate", "--model", "gpt2-124m", "--plot", ""), "'--plot'"),
    (("estimate", "--model", "gpt2-124m", "--launch-config", ""), "'--launch-config'"),
    (("solve", "--model", "gpt2-124m", "--report", ""), "'--report'"),
    (("batch", "jobs.csv", "-o", ""), "'-o' / '--output'"),
    (("batch", "", "-o", "plans.csv"), "'JOBS'"),
    (("batch", "jobs.csv", "-o", "plans.csv", "--models-dir", ""), "'--models-dir'"),
    (("fleet", "jobs.csv", "--inventory", "jobs.csv", "-o", "s.csv", "--pools-out", ""), "'--pools-out'"),
    (("catalogue", "import", "skypilot", ""), "'DIRECTORY'"),
    (("catalogue", "check", ""), "'FILE'"),
])
def test_an_empty_path_is_refused_naming_the_option(tmp_path, monkeypatch, args, option):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs.csv").write_text("model,seq_len\ngpt2-124m,512\n", encoding="utf-8")
    result = invoke(*args)
    assert result.exit_code == 2
    assert_error_line(result, option, "is empty" if "" in args else "is blank")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.csv"]


@pytest.mark.parametrize(("hours", "text", "cell"), [
    (1234.5, "1,234.5 hours (51.44 days)", "51.44 d"), (3.5, "3.5 hours (0.15 days)", "3.5 h"),
    (0.2, "12.0 minutes", "12.0 min"), (0.01, "36.00 seconds", "36.00 s"), (1e-9, "under 0.01 seconds", "< 0.01 s"),
])
def test_a_training_time_reads_in_the_unit_it_fills(hours, text, cell):
    from vramplan.commands.render_text import duration_text, time_cell

    assert (duration_text(hours), time_cell(hours)) == (text, cell)


def test_a_run_of_seconds_reads_in_seconds_and_its_json_keeps_the_hours():
    args = ("estimate", "--model", "gpt2-124m", "--seq-len", "512", "--tokens", "1e6")
    table = invoke(*args).stdout
    assert "0.00 days" not in table and "step 0.00 s" not in table
    data = json.loads(invoke(*args, "--format", "json").stdout)
    seconds = data["cost"]["hours"] * 3600
    assert 0 < seconds < 60 and f"1.0M tokens take {seconds:.2f} seconds" in table
    assert f"step {data['performance']['step_time_s'] * 1e3:.3g} ms" in table


def test_the_runner_ups_time_column_is_not_zero_for_a_short_run():
    result = invoke("solve", "--model", "gpt2-124m", "--seq-len", "512", "--tokens", "1e6", "--global-batch", "8",
                    "--max-gpus", "8", "--gpu", "h100-sxm-80gb")
    assert result.exit_code == 0, result.stderr
    header = next(line for line in result.stdout.splitlines() if line.startswith("#"))
    assert " time " in header and " days " not in header
    assert " 0.00 " not in result.stdout


@pytest.mark.parametrize(("args", "option"), [
    (("estimate", "--model", "gpt2-124m", "--gpu", "h100-sxm-80gb", "--gpu", "a100-sxm-80gb"), "'--gpu'"),
    (("estimate", "--model", "gpt2-124m", "--sequence-parallel", "--no-sequence-parallel"),
     "'--sequence-parallel' / '--no-sequence-parallel'"),
    (("solve", "--model", "gpt2-124m", "--seq-len", "512", "--seq-len", "1024"), "'--seq-len'"),
    (("gpus", "--format", "json", "--format", "csv"), "'--format'"),
    (("batch", "jobs.csv", "-o", "a.csv", "--output", "b.csv"), "'-o' / '--output'"),
    (("fleet", "jobs.csv", "--inventory", "jobs.csv", "--inventory", "jobs.csv", "-o", "s.csv"), "'--inventory'"),
    (("catalogue", "import", "skypilot", ".", "--price-date", "2026-01-01", "--price-date", "2026-02-01"),
     "'--price-date'"),
])
def test_an_option_given_twice_is_refused_not_the_last_taken(tmp_path, monkeypatch, args, option):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs.csv").write_text("model,seq_len\ngpt2-124m,512\n", encoding="utf-8")
    result = invoke(*args)
    assert result.exit_code == 2
    assert_error_line(result, f"{option} is given more than once: give it once")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.csv"]


def test_a_repeatable_option_and_a_plain_flag_given_twice_still_run():
    result = invoke("solve", "--model", "gpt2-124m", "--seq-len", "512", "--gpu", "h100-sxm-80gb", "--gpu",
                    "a100-sxm-80gb", "--max-gpus", "1", "--top", "1", "--verbose", "--verbose", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["plans"][0]["plan"]["gpu"] in ("h100-sxm-80gb", "a100-sxm-80gb")


@pytest.mark.parametrize("args", [("gpus",), ("estimate", "--model", "gpt2-124m", "--seq-len", "512")])
def test_a_today_before_the_packaged_prices_names_vramplan_today_not_the_catalogue(args):
    result = invoke(*args, env={"VRAMPLAN_TODAY": "2026-06-01"})
    assert result.exit_code == 2
    assert_error_line(result, "VRAMPLAN_TODAY='2026-06-01': is before the newest price of the packaged offerings",
                      "pin a date on or after it")
    assert "packaged offerings.csv" not in result.stderr


def test_a_machine_clock_before_the_packaged_prices_says_so(monkeypatch):
    import datetime

    from vramplan.models.core import clock

    class Past(datetime.date):
        @classmethod
        def today(cls):
            return cls(2020, 1, 1)

    monkeypatch.setattr(clock, "date", Past)
    result = invoke("gpus", env={"VRAMPLAN_TODAY": None})
    assert result.exit_code == 2
    assert_error_line(result, "today='2020-01-01': the machine's clock is before the newest price",
                      "set the clock, or VRAMPLAN_TODAY=YYYY-MM-DD")


def test_run_batch_without_a_catalogue_is_refused_before_any_worker_starts():
    from vramplan import BatchOptions, VramplanError, run_batch

    with pytest.raises(VramplanError, match=r"catalogue='NoneType': must be a vramplan.Catalogue"):
        next(run_batch(None, [(0, {"model": "gpt2-124m", "seq_len": 512})], BatchOptions(backend="local", workers=1)))


def test_own_gpus_without_own_offerings_name_the_gpu_file_and_the_way_out(tmp_path):
    from helpers.paths import CATALOGUE_DIR

    gpus = tmp_path / "my_gpus.csv"
    header, *rows = (CATALOGUE_DIR / "gpus.csv").read_text(encoding="utf-8").splitlines()
    gpus.write_text("\n".join([header, *[row for row in rows if row.startswith("h100-sxm-80gb,")]]) + "\n",
                    encoding="utf-8")
    result = invoke("gpus", "--gpus-csv", str(gpus))
    assert result.exit_code == 2
    assert_error_line(result, f"gpus_csv='{gpus}': has no gpu ", "which the packaged offerings rent",
                      "pass --offerings-csv")


@pytest.mark.parametrize("types", [["sliding_attention", "full_attention"], "sliding_attention"])
def test_layer_types_not_one_per_layer_are_refused_as_transformers_refuses_them(tmp_path, types):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "gemma3_text", "hidden_size": 64, "num_hidden_layers": 4,
                                  "num_attention_heads": 2, "intermediate_size": 128, "vocab_size": 320,
                                  "sliding_window": 16, "layer_types": types}), encoding="utf-8")
    result = invoke("estimate", "--model", str(config), "--seq-len", "64")
    assert result.exit_code == 2
    assert_error_line(result, "layer_types='<a ", "must list one attention type per layer (4 layers) (in ")
