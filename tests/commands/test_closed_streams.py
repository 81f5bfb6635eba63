"""A command started with its stdout closed (`vramplan solve ... >&-`): Python has no sys.stdout
at all, and `solve` died with `internal error: AttributeError: 'NoneType' object has no attribute
'isatty'`. Now one line says what happened; with -o FILE the command runs as usual."""

from __future__ import annotations

import subprocess
import sys

import pytest

ARGS = ["solve", "--model", "gpt2-124m", "--seq-len", "512", "--gpu", "h100-sxm-80gb", "--max-gpus", "1"]


def _run(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], stderr=subprocess.PIPE, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("code", [
    # started with fd 1 closed (a shell's `>&-`): Python sets sys.stdout to None
    "import os, sys; os.close(1); os.execv(sys.executable, [sys.executable, '-m', 'vramplan', *sys.argv[1:]])",
    # fd 1 closed after Python started: sys.stdout exists, and writing it fails with EBADF
    "import os, sys; os.close(1); from vramplan.cli import main; main(sys.argv[1:])",
], ids=["closed-before-start", "closed-after-start"])
def test_a_closed_stdout_is_one_line_not_an_internal_error(code):
    result = _run(code, *ARGS)
    assert result.returncode == 1 and "internal error" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_started_without_stdout_the_result_asks_for_a_file(tmp_path, monkeypatch):
    from helpers.cli import invoke

    monkeypatch.setattr(sys, "stdout", None)
    from vramplan.commands.output import emit, screen_for
    from vramplan.models.core.errors import CommandFailure

    assert screen_for(None).plain  # no terminal to draw for
    with pytest.raises(CommandFailure, match="stdout is closed"):
        emit("a result", None)
    monkeypatch.undo()
    out = tmp_path / "plan.json"
    assert invoke(*ARGS, "-o", str(out)).exit_code == 0 and out.read_text(encoding="utf-8").startswith("{")
