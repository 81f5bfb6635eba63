"""Tables fit the screen (commands/output.py): the terminal's width, a compact layout below 100
columns, plain text (no box drawing, no colour) when stdout is not a terminal.

CliRunner's stdout is not a terminal, so these runs take the plain path; $COLUMNS gives the width
as it does for `COLUMNS=60 vramplan ... | less`.
"""

from __future__ import annotations

import pytest
from helpers.cli import invoke

from vramplan.commands.output import Screen
from vramplan.commands.render_solve import solve_table

HEADLINE = ["solve", "--model", "llama-3.1-70b", "--method", "full", "--seq-len", "8192", "--global-batch", "64",
            "--tokens", "2e9", "--objective", "cost"]
INFEASIBLE = HEADLINE + ["--gpu", "a100-sxm-80gb", "--num-gpus", "2", "--offload", "none"]
ESTIMATE = ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--num-gpus", "8", "--zero", "3",
            "--offload", "optimizer"]
BOX_DRAWING = set(chr(c) for c in range(0x2500, 0x2580))


def run(args: list[str], columns: int | None):
    env = {"COLUMNS": str(columns) if columns else None}
    return invoke(*args, env=env)


@pytest.fixture(scope="module")
def headline_result(catalogue):
    from vramplan.models.core.setup import Job
    from vramplan.solver.api import solve
    from vramplan.solver.query import SolveQuery

    query = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=64, tokens=2e9, objective="cost",
                       top_k=3, pareto=True)
    return solve(catalogue, query)


CASES = {
    "estimate": (ESTIMATE, 0),
    "solve": (HEADLINE + ["--pareto"], 0),
    "solve-infeasible": (INFEASIBLE, 3),
    "gpus": (["gpus"], 0),
    "models": (["models"], 0),
    "offerings": (["offerings"], 0),
}


@pytest.mark.parametrize("columns", [60, 120])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_line_fits_the_width(case, columns):
    args, code = CASES[case]
    result = run(args, columns)
    assert result.exit_code == code, result.stderr
    too_long = [line for line in result.stdout.splitlines() if len(line) > columns]
    assert not too_long, too_long[:3]
    assert not set(result.stdout) & BOX_DRAWING and "\x1b" not in result.stdout  # a pipe gets plain text


def test_wide_solve_table_has_every_column_and_narrow_stacks_the_plan():
    wide = run(HEADLINE, None).stdout
    assert "digitalocean/mi300x-x8" in wide and "mb x acc" in wide and "USD/h " in wide and "tokens/s" in wide
    narrow = run(HEADLINE, 60).stdout
    assert "mb x acc" not in narrow and "USD/h " not in narrow
    # The plan's offering and configuration still show, stacked under its cluster.
    lines = narrow.splitlines()
    import json

    plan = json.loads(run([*HEADLINE, "--format", "json", "--top", "1"], None).stdout)["plans"][0]["plan"]
    first = next(i for i, line in enumerate(lines) if line.startswith("1 ") and "x mi300x-192gb" in line)
    assert lines[first + 1].strip() == "digitalocean/mi300x-x8"
    assert lines[first + 2].strip().startswith(f"ZeRO-{plan['zero']}, recompute {plan['recompute']}")
    from vramplan.models.core.layout import PLAN_FIELDS, Layout

    layout = Layout(*(plan[name] for name in PLAN_FIELDS))
    label = layout._replace(sp=layout.sp and layout.tp > 1).label(plan["dp"])
    assert any(line.strip().startswith(label) for line in lines[first + 3:first + 6])  # the layout


def test_runner_ups_show_their_memory_per_gpu():
    """Runner-ups at the same cost often differ only in memory (ZeRO-2 offloads the gradients that
    ZeRO-1 with an offloaded optimizer keeps): the table shows each plan's most loaded GPU in GiB,
    as its JSON reports it, and keeps that column longest as the screen narrows."""
    import json

    args = ["solve", "--model", "llama-3.1-405b", "--seq-len", "8192"]
    plans = json.loads(run([*args, "--format", "json"], None).stdout)["plans"]
    text = run(args, None).stdout
    header = next(line for line in text.splitlines() if line.startswith("#") and "GPUs" in line)
    assert "GiB/GPU" in header
    for index, plan in enumerate(plans, start=1):
        row = next(line for line in text.splitlines() if line.startswith(f"{index} ") and " x " in line)
        assert f" {plan['memory']['total_bytes'] / 2**30:,.2f} " in row
    assert len({plan["memory"]["total_bytes"] for plan in plans}) > 1  # same cost, different memory


def test_medium_width_drops_the_least_telling_columns_first():
    text = run(HEADLINE, 120).stdout
    header = next(line for line in text.splitlines() if line.startswith("#") and "GPUs" in line)
    # Memory per GPU outlasts tokens/s (time and USD total already say how fast): a memory planner's column.
    assert "offering" in header and "GiB/GPU" in header and "vs best" in header
    assert "mb x acc" not in header and "offload" not in header


def test_listing_narrow_keeps_the_leading_columns():
    narrow = run(["gpus"], 60).stdout
    assert "h100-sxm-80gb" in narrow and "usable GiB" in narrow and "GPUs/node" not in narrow
    assert "GPUs/node" in run(["gpus"], None).stdout


def test_terminal_gets_boxes_and_its_width(headline_result):
    text = solve_table(headline_result, Screen(width=120, plain=False))
    assert set(text) & BOX_DRAWING
    assert max(len(line) for line in _strip_ansi(text).splitlines()) <= 120
    plain = solve_table(headline_result, Screen(width=None, plain=True))
    assert not set(plain) & BOX_DRAWING and "\x1b" not in plain


def _strip_ansi(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text)


# --- -o FILE: the extension names the format, --format wins --------------------------------------

SMALL = ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--num-gpus", "8", "--zero", "3"]
EXTENSION_CASES = {
    "estimate": SMALL,
    "solve": ["solve", "--model", "llama-3.1-8b", "--seq-len", "4096", "--global-batch", "16", "--gpu",
              "h100-sxm-80gb", "--max-gpus", "8", "--top", "1"],
    "gpus": ["gpus"],
}


def _kind(text: str) -> str:
    import json

    try:
        json.loads(text)
        return "json"
    except ValueError:
        pass
    first = text.splitlines()[0]
    return "csv" if "," in first and " " not in first else "table"


@pytest.mark.parametrize("command", sorted(EXTENSION_CASES))
@pytest.mark.parametrize(("name", "expected"), [("plan.json", "json"), ("plans.CSV", "csv"), ("plan.txt", "table"),
                                                 ("plan", "table")])
def test_output_extension_names_the_format(command, name, expected, tmp_path):
    out = tmp_path / name
    result = invoke(*EXTENSION_CASES[command], "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert _kind(out.read_text(encoding="utf-8")) == expected


@pytest.mark.parametrize("command", sorted(EXTENSION_CASES))
def test_explicit_format_wins_over_the_extension(command, tmp_path):
    out = tmp_path / "plan.json"
    result = invoke(*EXTENSION_CASES[command], "-o", str(out), "--format", "csv")
    assert result.exit_code == 0, result.stderr
    assert _kind(out.read_text(encoding="utf-8")) == "csv"
    assert _kind(invoke(*EXTENSION_CASES[command]).stdout) == "table"  # stdout: a table


# --- one unit system per output ------------------------------------------------------------------


def test_table_speaks_gib_billions_and_percent_json_exact_integers_and_fractions():
    import json

    table = run(SMALL, None).stdout
    data = json.loads(run([*SMALL, "--format", "json"], None).stdout)
    assert "llama-3.1-8b (8.03B params)" in table  # 8,030,261,248 (HF transformers' count, tests/golden_params.py)
    assert data["model"]["num_params"] == 8_030_261_248
    mfu = data["performance"]["mfu_fraction"]
    assert 0 < mfu < 1 and "mfu" not in data["performance"]
    assert f"MFU {mfu:.1%}" in table
    header = run([*SMALL, "--format", "csv"], None).stdout.splitlines()[0].split(",")
    assert "performance.mfu_fraction" in header and "performance.mfu" not in header


def test_explanation_uses_the_tables_gib():
    import re

    text = run(INFEASIBLE, None).stdout
    assert "GiB" in text and not re.search(r"\d GB\b", text), text
    # 16 bytes/param x 70,553,706,496 / 2 GPUs = 564,429,651,968 bytes = 525.7 GiB; the limit is 90% of 80 GiB.
    assert "at least 525.7 GiB per GPU" in text and "72.0 GiB limit" in text


# --- no internal wording in user text ------------------------------------------------------------

INTERNAL_WORDS = ("seed", "issue 7", "TODO", "DESIGN.md", "product card")


@pytest.mark.parametrize("args", [INFEASIBLE, HEADLINE + ["--pareto"], SMALL, ["solve", "--help"],
                                  ["estimate", "--help"], ["--help"]])
def test_user_text_has_no_internal_wording(args):
    result = run(args, None)
    text = (result.stdout + result.stderr).lower()
    assert result.stdout
    assert not [word for word in INTERNAL_WORDS if word.lower() in text]


# --- uncalibrated efficiency is visible ----------------------------------------------------------


def test_borrowed_efficiency_is_said_in_the_table_and_json():
    import json

    # L40S (Ada) has no published calibration run: models/time/calibration.py reuses Hopper's.
    l40s = ["estimate", "--model", "llama-3.1-8b", "--gpu", "l40s-48gb", "--num-gpus", "8", "--zero", "3"]
    table = run(l40s, None).stdout
    perf = json.loads(run([*l40s, "--format", "json"], None).stdout)["performance"]
    assert perf["efficiency_calibrated"] is False and perf["efficiency_borrowed_from"] == "hopper"
    assert "uncalibrated" in table and "borrowed from the hopper generation" in table
    h100 = json.loads(run([*SMALL, "--format", "json"], None).stdout)["performance"]
    assert h100["efficiency_calibrated"] is True and h100["efficiency_borrowed_from"] is None
    assert "uncalibrated" not in run(SMALL, None).stdout


def test_solve_marks_each_borrowed_mfu():
    import json

    ada = [*HEADLINE, "--gpu", "l40s-48gb"]  # Ada: efficiency borrowed from Hopper
    text = run(ada, None).stdout
    plan = json.loads(run([*ada, "--format", "json", "--top", "1"], None).stdout)["plans"][0]
    assert plan["plan"]["gpu"] == "l40s-48gb" and plan["performance"]["efficiency_borrowed_from"] == "hopper"
    assert f"{plan['performance']['mfu_fraction']:.1%}*" in text and "* uncalibrated compute efficiency" in text


def test_the_steps_gradient_copies_show_where_they_set_the_peak():
    """Megatron fp16 with 16-bit gradients (accounting zero), ZeRO-0, one H200: the optimizer step's
    fp32 copies (29.92 GiB) outweigh the freed activations, so they get a row and the total is the step's."""
    copies = ["estimate", "--model", "llama-3.1-8b", "--seq-len", "4096", "--stack", "megatron", "--precision", "fp16",
              "--accounting", "zero", "--zero", "0", "--recompute", "full", "--gpu", "h200-sxm-141gb", "--num-gpus", "1"]
    shown = run(copies, 120)
    assert "step's fp32 grad copies" in shown.output and "150.22" in shown.output, shown.output
    assert shown.exit_code == 3  # does not fit: the step needs 150.22 GiB of the 126.36 limit
    plain = run([("hf" if arg == "zero" and copies[i - 1] == "--accounting" else arg) for i, arg in enumerate(copies)], 120)
    assert "total" in plain.output and "grad copies" not in plain.output, plain.output  # fp32 buffer: no copy
