"""Hostile inputs a fourth review found (2026-12-07), each now refused in one line or answered right.

- An empty path (`-o ''`, `--plot ''`, `--gpus-csv ''`: an unset shell variable) became Path('') =
  '.', and the error named a path the user never typed (`output='.': cannot write: it is a folder`,
  exit 1 for batch).
"""

from __future__ import annotations

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
