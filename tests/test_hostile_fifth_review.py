"""Hostile inputs a fifth review found (2026-12-08), each now refused in one line or answered right.

- An output that is a folder was exit 1 for `batch -o`, `gpus -o`, `estimate -o` and `catalogue
  import -o` (`output='adir': cannot write: it is a folder`) but exit 2 for `fleet -o`,
  `--pools-out`, `--plot`, `--report` and `--launch-config` (click's own check, worded `Invalid
  value for '--plot': File 'adir' is a directory.`): bad input, exit 2, one wording for every
  output option (a folder that does not exist stays exit 1 for all, a write that cannot happen).
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
