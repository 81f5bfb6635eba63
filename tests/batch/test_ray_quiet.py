"""`batch --backend ray -q` prints nothing of Ray's own: its token-authentication WARNING line
(`authentication_token_setup.py:85 -- Token authentication is enabled ...`) reached the terminal
under -q. Run as a process: Ray's log handler holds the real stderr, which CliRunner does not see."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.slow
def test_ray_says_nothing_under_quiet(tmp_path):
    pytest.importorskip("ray")
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("model,seq_len\ngpt2-124m,512\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "vramplan", "batch", str(jobs), "-o", str(tmp_path / "o.csv"),
                             "--backend", "ray", "--workers", "1", "-q"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
