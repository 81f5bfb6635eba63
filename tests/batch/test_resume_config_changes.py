"""--resume solves a row again when the config.json its model cell names changed (issue 33: a
row kept its answer, 138.7 USD, where a fresh run of the changed file says 276.66)."""

from __future__ import annotations

import json

from helpers.cli import invoke_batch
from helpers.paths import HF_CONFIGS
from helpers.sheets import read_rows, write_csv


def test_a_changed_config_is_solved_again_and_an_unchanged_one_from_the_journal(tmp_path) -> None:
    config = tmp_path / "tiny.json"
    config.write_text((HF_CONFIGS / "gpt2-124m.json").read_text(encoding="utf-8"), encoding="utf-8")
    jobs = write_csv(tmp_path / "jobs.csv", [{"id": "a", "model": "tiny.json", "seq_len": 512, "global_batch": 8}])
    out = tmp_path / "plans.csv"
    assert invoke_batch(str(jobs), "-o", str(out)).exit_code == 0
    before = read_rows(out)[0]
    data = json.loads(config.read_text(encoding="utf-8"))
    data["n_layer"] *= 4  # the same name, a model four times as deep
    config.write_text(json.dumps(data), encoding="utf-8")
    resumed = invoke_batch(str(jobs), "-o", str(out), "--resume")
    assert resumed.exit_code == 0, resumed.stderr
    after = read_rows(out)[0]
    assert "0 reused" in resumed.stderr
    assert float(after["weights_gib"]) > 2 * float(before["weights_gib"])
