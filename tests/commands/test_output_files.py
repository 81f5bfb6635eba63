"""Every output of every command goes through one writer (sheets/output_file.py): nothing the user
has is destroyed (docs/commands.md "Output files").

Each case is a defect a hostile-input review found: before the writer, `solve --gpus-csv g.csv -o
g.csv` replaced the user's catalogue, `estimate --model cfg.json -o cfg.json` the config, a full
disk left the earlier output torn at 4,096 bytes, `batch -o Gemfile` deleted `Gemfile.lock`, an
existing journal was truncated, and two outputs of one run could be one file (the first lost).
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.cli import invoke, invoke_batch, one_line_error
from helpers.paths import CATALOGUE_DIR, EXAMPLES
from helpers.sheets import write_csv

from vramplan.sheets import output_file

SOLVE = ["solve", "--model", "llama-3.1-8b", "--method", "lora", "--seq-len", "2048", "--gpu", "h100-sxm-80gb"]
ESTIMATE = ["estimate", "--model", "llama-3.1-8b", "--method", "lora", "--seq-len", "2048", "--gpu", "h100-sxm-80gb"]
CONFIG = ('{"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, '
          '"intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 2048}')


def _copy(path: Path, source: Path) -> bytes:
    data = source.read_bytes()
    path.write_bytes(data)
    return data


@pytest.mark.parametrize("command", [SOLVE, ["gpus"]], ids=["solve", "gpus"])
def test_an_output_that_is_the_catalogue_read_is_refused_and_left_intact(tmp_path, command):
    gpus = tmp_path / "g.csv"
    original = _copy(gpus, CATALOGUE_DIR / "gpus.csv")
    line = one_line_error(invoke(*command, "--gpus-csv", str(gpus), "-o", str(gpus)))
    assert "output=" in line and "is the gpus-csv file itself" in line
    assert gpus.read_bytes() == original


@pytest.mark.parametrize("option", ["-o", "--report"])
def test_an_output_that_is_the_model_config_is_refused_and_left_intact(tmp_path, option):
    config = tmp_path / "cfg.json"
    config.write_text(CONFIG, encoding="utf-8")
    command = [*ESTIMATE[:2], str(config), *ESTIMATE[3:]] if option == "-o" else [*SOLVE[:2], str(config), *SOLVE[3:]]
    line = one_line_error(invoke(*command, option, str(config)))
    assert "is the model config file itself" in line
    assert config.read_text(encoding="utf-8") == CONFIG


@pytest.mark.parametrize(("command", "first", "second"), [
    (SOLVE, "-o", "--report"),
    (ESTIMATE, "-o", "--plot"),
    (SOLVE, "--plot", "--report"),
], ids=["solve-o-report", "estimate-o-plot", "solve-plot-report"])
def test_two_outputs_of_one_run_may_not_be_one_file(tmp_path, command, first, second):
    path = tmp_path / ("same.png" if "--plot" in (first, second) else "same")
    path.write_text("mine", encoding="utf-8")
    fmt = ["--format", "csv"] if first == "-o" else []  # -o same.png alone is refused for its name
    line = one_line_error(invoke(*command, *fmt, first, str(path), second, str(path)))
    assert "is also this run's" in line
    assert path.read_text(encoding="utf-8") == "mine"  # refused before any work: nothing written


def test_fleet_refuses_one_file_for_two_outputs_and_a_bad_picture_name_before_planning(tmp_path):
    jobs, inventory = EXAMPLES / "jobs.csv", EXAMPLES / "inventory.csv"
    out = tmp_path / "s.csv"
    line = one_line_error(invoke("fleet", str(jobs), "--inventory", str(inventory), "-o", str(out), "--pools-out", str(out)))
    assert "pools-out=" in line and "is also this run's --output file" in line
    started = time.monotonic()
    line = one_line_error(invoke("fleet", str(jobs), "--inventory", str(inventory), "-o", str(out), "--plot",
                                 str(tmp_path / "g.txt")))
    assert "must end in .png, .svg, .pdf" in line and not out.exists()
    assert time.monotonic() - started < 5  # found before the planner's solves (several seconds)
    line = one_line_error(invoke("fleet", str(jobs), "--inventory", str(inventory), "-o", str(inventory)))
    assert "is the inventory file itself" in line


def _run_with_file_size_limit(args: list[str], limit_bytes: int, cwd: Path) -> subprocess.CompletedProcess:
    """vramplan in a child whose files may not grow past limit_bytes (RLIMIT_FSIZE), SIGXFSZ ignored
    so a write past it fails with EFBIG, as a full disk fails with ENOSPC."""
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run([sys.executable, "-m", "vramplan", *args], cwd=cwd, capture_output=True, text=True,
                          preexec_fn=limit, timeout=120)


def test_a_failed_write_leaves_the_earlier_output_whole(tmp_path):
    """Before: a plain write truncated the file first, then failed at the limit: torn at 4,096 bytes."""
    out = tmp_path / "models.json"
    earlier = invoke("models", "--format", "json", "-o", str(out))
    assert earlier.exit_code == 0
    original = out.read_bytes()
    assert len(original) > 3 * 4096
    done = _run_with_file_size_limit(["models", "--format", "json", "--models-csv",
                                      str(CATALOGUE_DIR / "architectures.csv"), "-o", str(out)], 4096, tmp_path)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "output=" in done.stderr and "cannot write" in done.stderr
    assert out.read_bytes() == original
    assert [p.name for p in tmp_path.iterdir()] == ["models.json"]  # no temporary left behind


def test_batch_and_fleet_leave_a_users_lock_file_alone(tmp_path):
    """Before: `batch jobs.csv -o Gemfile` deleted Gemfile.lock (the lock was `<output>.lock`)."""
    jobs = write_csv(tmp_path / "jobs.csv", [["llama-3.1-8b", "lora", 2048]], ["model", "method", "seq_len"])
    (tmp_path / "Gemfile.lock").write_text("mine", encoding="utf-8")
    assert invoke_batch(str(jobs), "-o", str(tmp_path / "Gemfile"), quiet=True).exit_code == 0
    assert (tmp_path / "Gemfile.lock").read_text(encoding="utf-8") == "mine"
    assert not (tmp_path / f".Gemfile{output_file.LOCK_MARK}").exists()


def test_an_existing_journal_is_not_truncated_without_resume(tmp_path):
    jobs = write_csv(tmp_path / "jobs.csv", [["llama-3.1-8b", "lora", 2048]], ["model", "method", "seq_len"])
    journal = tmp_path / "plans.csv.partial.jsonl"
    journal.write_text("an unfinished run's rows\n", encoding="utf-8")
    line = one_line_error(invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), quiet=True))
    assert "add --resume" in line
    assert journal.read_text(encoding="utf-8") == "an unfinished run's rows\n"


def test_a_lock_that_is_not_vramplans_is_refused_and_kept(tmp_path):
    target = output_file.output_target(tmp_path / "plans.csv")
    target.lock_path.write_text("someone else's", encoding="utf-8")
    with pytest.raises(output_file.CommandFailure, match="is not a vramplan lock"):
        output_file.OutputLock(target)
    assert target.lock_path.read_text(encoding="utf-8") == "someone else's"


def test_the_marked_lock_of_a_killed_run_is_taken_over_and_removed(tmp_path):
    target = output_file.output_target(tmp_path / "plans.csv")
    target.lock_path.write_bytes(output_file.LOCK_CONTENT)  # what `kill -9` of a run leaves
    lock = output_file.OutputLock(target)
    lock.release()
    assert not target.lock_path.exists()


def test_a_lock_held_by_a_running_process_is_not_taken(tmp_path):
    target = output_file.output_target(tmp_path / "plans.csv")
    script = ("import sys, time; from pathlib import Path; from vramplan.sheets import output_file as o; "
              "lock = o.OutputLock(o.output_target(Path(sys.argv[1]))); print('held', flush=True); time.sleep(30)")
    holder = subprocess.Popen([sys.executable, "-c", script, str(target.given)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(output_file.CommandFailure, match="another vramplan run is writing it"):
            output_file.OutputLock(target)
        assert target.lock_path.exists()
    finally:
        holder.kill()
        holder.wait()
    os.unlink(target.lock_path)
