"""Hostile config files and sheet paths: one line each, nothing read outside the models
folder, nothing echoed from a file, no hang on a FIFO, no read of a device."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.cli import invoke, one_line_error
from helpers.paths import HF_CONFIGS

from vramplan.models.catalogue.config_file import MAX_CONFIG_BYTES, config_path, json_depth, read_config_json
from vramplan.models.core.errors import VramplanError

SECRET = "sk-live-0123456789abcdef"


def llama() -> dict:
    return json.loads((HF_CONFIGS / "llama-3.1-8b.json").read_text())


def estimate(model: str):
    return invoke("estimate", "--model", str(model), "--seq-len", "128")


def write_config(path: Path, **changes) -> Path:
    config = llama() | changes
    path.write_text(json.dumps(config))
    return path


# --- --model on the command line: the user's own path, anywhere, but safely ----------------------


def test_a_fifo_as_model_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)  # nobody ever writes to it: a blocking open would hang forever
    assert "is not a regular file" in one_line_error(estimate(fifo))


def test_a_link_to_dev_zero_is_refused_before_reading(tmp_path):
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    assert "is not a regular file" in one_line_error(estimate(link))


def test_a_config_over_the_size_cap_is_refused(tmp_path):
    big = tmp_path / "big.json"
    big.write_text('{"pad": "' + "x" * MAX_CONFIG_BYTES + '"}')
    assert "larger than 1 MiB" in one_line_error(estimate(big))


def test_deep_nesting_is_one_line_not_recursion_error(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert "nests JSON deeper than" in one_line_error(estimate(deep))


def test_a_5000_digit_integer_is_one_line_not_value_error(tmp_path):
    path = tmp_path / "big_int.json"
    path.write_text(json.dumps(llama())[:-1] + ', "x": ' + "9" * 5000 + "}")
    assert "integer longer than 18 digits" in one_line_error(estimate(path))


def test_nan_and_latin1_configs_are_one_line(tmp_path):
    nan = tmp_path / "nan.json"
    nan.write_text('{"hidden_size": NaN}')
    assert "NaN" in one_line_error(estimate(nan))
    latin = tmp_path / "latin.json"
    latin.write_bytes('{"name": "caf\u00e9"}'.encode("latin-1"))
    assert "not UTF-8" in one_line_error(estimate(latin))


@pytest.mark.parametrize("key, value", [
    ("num_attention_heads", 0),  # ZeroDivisionError in hidden // heads before
    ("num_key_value_heads", 0),  # silently became multi-head attention before
    ("num_hidden_layers", True),  # a boolean is not a count
    ("hidden_size", 4096.5),
    ("vocab_size", "128256"),
])
def test_counts_must_be_whole_numbers_of_at_least_one(tmp_path, key, value):
    line = one_line_error(estimate(write_config(tmp_path / "config.json", **{key: value})))
    assert f"{key} must be a whole number >= 1" in line


def test_null_kv_heads_still_means_multi_head_attention():
    config = llama() | {"num_key_value_heads": None}
    assert read_config_json  # the reader accepts null: transformers' LlamaConfig reads it as MHA
    from vramplan.models.catalogue.hf_config import architecture_from_config

    arch = architecture_from_config(config, name="x", source="x")
    assert arch.num_kv_heads == arch.num_attention_heads == 32


def test_an_unsupported_model_type_is_never_echoed(tmp_path):
    line = one_line_error(estimate(write_config(tmp_path / "config.json", model_type=SECRET)))
    assert SECRET not in line and "supported: gpt2" in line


def test_a_256_character_model_is_one_line():
    assert "not in the catalogue" in one_line_error(estimate("a" * 256))
    assert "File name too long" in one_line_error(estimate("a" * 256 + ".json"))


def test_a_folder_without_config_json_is_one_line(tmp_path):
    assert "cannot read" in one_line_error(estimate(tmp_path))


def test_json_depth_ignores_brackets_in_strings():
    assert json_depth(r'{"a": [1, {"b": "[[[\"["}]}') == 3
    assert json_depth("[]" * 3) == 1


# --- model cells of a batch sheet: only inside --models-dir --------------------------------------


@pytest.fixture()
def tree(tmp_path):
    """sheet/ holds the jobs and models/tiny/config.json; secret/ is outside the sheet's folder."""
    sheet, secret = tmp_path / "sheet", tmp_path / "secret"
    (sheet / "models" / "tiny").mkdir(parents=True)
    secret.mkdir()
    write_config(sheet / "models" / "tiny" / "config.json")
    write_config(secret / "secret.json", model_type=SECRET)
    (sheet / "models" / "escape.json").symlink_to(secret / "secret.json")
    write_config(sheet / "models" / "leaky.json", model_type=SECRET)
    return tmp_path


def run_sheet(tree: Path, models: list[str], *extra: str) -> dict[str, tuple[str, str]]:
    jobs = tree / "sheet" / "jobs.csv"
    jobs.write_text("id,model,seq_len\n" + "".join(f"{i},{m},512\n" for i, m in enumerate(models)))
    output = tree / "out.csv"
    result = invoke("batch", str(jobs), "-o", str(output), "-q", "--workers", "1", *extra)
    assert result.exit_code in (0, 3), result.output
    import csv

    rows = list(csv.DictReader(output.read_text(encoding="utf-8-sig").splitlines()))
    return {row["model"]: (row["status"], row["error"]) for row in rows}


def test_sheet_paths_outside_the_sheet_folder_are_refused_like_missing_files(tree):
    models = ["models/tiny", "models/tiny/config.json", "../secret/secret.json", "../secret/missing.json",
              str(tree / "secret" / "secret.json"), "models/escape.json", "models/missing.json"]
    answers = run_sheet(tree, models)
    assert answers["models/tiny"][0] == answers["models/tiny/config.json"][0] == "optimal"
    refusals = [answers[m][1] for m in models[2:]]
    assert all("no such config file inside the models folder" in text for text in refusals), refusals
    # the same reason whether the outside file exists or not: only the file's name differs
    assert {text.split("'", 2)[2] for text in refusals} == {refusals[0].split("'", 2)[2]}
    assert not any(SECRET in text or str(tree) in text for text in refusals)


def test_a_sheet_config_error_never_echoes_file_values(tree):
    status, error = run_sheet(tree, ["models/leaky.json"])["models/leaky.json"]
    assert status == "error" and SECRET not in error and "supported: gpt2" in error


def test_models_dir_widens_or_narrows_what_a_sheet_may_read(tree):
    # a relative path is taken from the models folder
    answers = run_sheet(tree, ["secret/secret.json"], "--models-dir", str(tree))
    assert "model_type is not supported" in answers["secret/secret.json"][1]  # now inside: read
    answers = run_sheet(tree, ["models/tiny"], "--models-dir", str(tree / "secret"))
    assert "inside the models folder" in answers["models/tiny"][1]


def test_a_fifo_in_a_sheet_does_not_hang_the_batch(tree):
    os.mkfifo(tree / "sheet" / "models" / "pipe.json")
    status, error = run_sheet(tree, ["models/pipe.json"])["models/pipe.json"]
    assert status == "error" and "is not a regular file" in error


def test_config_path_without_models_dir_is_the_users_own_path(tmp_path):
    path = write_config(tmp_path / "any.json")
    assert config_path(str(path)) == path
    assert config_path("no-such-name") is None
    with pytest.raises(VramplanError, match="inside the models folder"):
        config_path(str(path), models_dir=tmp_path / "elsewhere")


def test_odd_paths_in_a_sheet_are_one_short_refusal(tmp_path):
    for text in ("a\x00b.json", "x" * 5000 + ".json", "..", "/", "~/.ssh/id_rsa.json"):
        with pytest.raises(VramplanError, match="inside the models folder") as error:
            config_path(text, models_dir=tmp_path)
        assert len(str(error.value)) < 400
    with pytest.raises(VramplanError, match="not a valid path"):
        read_config_json(Path("a\x00b.json"))


def test_a_file_that_is_not_a_sheet_never_has_its_first_line_printed(tmp_path):
    """`fleet --inventory /proc/self/environ` printed the environment as an 'unknown inventory
    column'; a batch sheet whose header holds such text did the same."""
    from helpers.cli import invoke
    from helpers.paths import EXAMPLES

    secret = tmp_path / "secrets.csv"
    secret.write_text("API_KEY=s3cr3t-value-that-must-not-leak\x00HOME=/root,x\n1,2\n", encoding="utf-8")
    for args, reason in (
            (["fleet", str(EXAMPLES / "jobs.csv"), "--inventory", str(secret), "-o", str(tmp_path / "s.csv")],
             "is not a column name"),
            (["batch", str(secret), "-o", str(tmp_path / "p.csv"), "-q"], "'model': is required")):  # own columns pass
        result = invoke(*args)
        assert result.exit_code == 2 and "s3cr3t" not in result.stderr and "API_KEY" not in result.stderr, result.stderr
        assert reason in result.stderr
    plain = tmp_path / "jobs.csv"
    plain.write_text("model,seq_len,deadline\nllama-3.1-8b,4096,1\n", encoding="utf-8")
    assert "'deadline': unknown column; did you mean 'deadline_hours'?" in invoke("batch", str(plain), "-o",
                                                                                 str(tmp_path / "q.csv")).stderr


@pytest.mark.parametrize("command", [["batch"], ["fleet", "--inventory", "INVENTORY"]])
def test_a_device_as_a_sheet_is_refused_without_reading_it(tmp_path, command):
    """`batch /dev/zero -o x.csv` and `fleet /dev/zero ...` read forever (no answer in 30 s)."""
    inventory = tmp_path / "inventory.csv"
    inventory.write_text("pool,offering,num_gpus\np,aws/p5.48xlarge,8\n", encoding="utf-8")
    args = [str(inventory) if arg == "INVENTORY" else arg for arg in command]
    line = one_line_error(invoke(args[0], "/dev/zero", *args[1:], "-o", str(tmp_path / "out.csv")))
    assert "'/dev/zero': is a device, not a sheet" in line


@pytest.mark.parametrize("option, value", [("--gpu", ""), ("--provider", ";"), ("--region", " , ")])
def test_a_restriction_that_names_nothing_is_refused(option, value):
    """`--gpu ""` searched every GPU, as if the option were left out."""
    line = one_line_error(invoke("solve", "--model", "gpt2-124m", "--seq-len", "128", option, value))
    assert "names nothing; leave it out to allow every one" in line
