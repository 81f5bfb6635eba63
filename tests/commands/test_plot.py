"""Pictures (commands/plot.py): what the charts draw, checked on the figures' own artists, and
the files the commands write. Needs the plot extra (matplotlib); skipped without it."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("matplotlib")

from helpers.cli import invoke  # noqa: E402

from vramplan.commands import plot  # noqa: E402
from vramplan.models.core.results import PILLARS  # noqa: E402
from vramplan.models.core.setup import Job, Plan  # noqa: E402
from vramplan.models.core.units import BYTES_PER_GIB  # noqa: E402
from vramplan.models.estimate import estimate  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ESTIMATE = ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--num-gpus", "8", "--zero", "3"]
SOLVE = ["solve", "--model", "llama-3.1-8b", "--seq-len", "4096", "--global-batch", "32", "--gpu", "h100-sxm-80gb",
         "--gpu", "a100-sxm-80gb", "--max-gpus", "32", "--tokens", "1e9"]  # a front of 3 plans (8, 16, 32 GPUs)


def _result(catalogue, offload: str = "none"):
    plan = Plan(gpu="a100-sxm-80gb", num_gpus=8, zero=3, recompute="full", offload=offload)
    return estimate(catalogue, "llama-3.1-70b", Job(seq_len=4096), plan, 1e9)


def _hlines(axis) -> list[float]:
    return sorted(line.get_ydata()[0] for line in axis.get_lines())


def test_memory_bar_stacks_the_pillars_against_limit_and_capacity(catalogue):
    memory = _result(catalogue).memory
    figure = plot.memory_figure(memory, "t")
    (axis,) = figure.axes
    heights = [patch.get_height() for patch in axis.patches]
    bottoms = [patch.get_y() for patch in axis.patches]
    expected = [getattr(memory, f"{p}_bytes") / BYTES_PER_GIB for p in PILLARS]
    assert heights == pytest.approx(expected)
    assert bottoms == pytest.approx([sum(expected[:i]) for i in range(len(expected))])  # stacked
    assert _hlines(axis) == pytest.approx(sorted([memory.limit_bytes / BYTES_PER_GIB,
                                                  memory.capacity_bytes / BYTES_PER_GIB]))
    assert [t.get_text().split(" ")[0] for t in axis.get_legend().get_texts()] == [
        "overhead", "activations", "optimizer", "gradients", "weights"]  # top of the stack first


def test_offload_adds_host_ram_against_the_instance(catalogue):
    memory = _result(catalogue, offload="optimizer").memory
    assert memory.host_bytes > 0
    figure = plot.memory_figure(memory, "t")
    gpu_axis, host_axis = figure.axes
    assert [p.get_height() for p in host_axis.patches] == pytest.approx([memory.host_bytes / BYTES_PER_GIB])
    assert _hlines(host_axis) == pytest.approx(sorted([memory.host_limit_bytes / BYTES_PER_GIB,
                                                       memory.host_capacity_bytes / BYTES_PER_GIB]))
    assert "host RAM" in host_axis.get_title()


def test_estimate_plot_writes_a_png(tmp_path):
    out = tmp_path / "memory.png"
    result = invoke(*ESTIMATE, "--plot", str(out))
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes().startswith(PNG_SIGNATURE)
    import matplotlib.image

    pixels = matplotlib.image.imread(str(out))
    assert pixels.shape[0] > 300 and pixels.shape[1] > 500 and pixels.std() > 0.05  # not blank


def test_solve_plot_draws_the_front_labelled_with_clusters_and_the_chosen_plan(tmp_path):
    import json

    data = json.loads(invoke(*SOLVE, "--pareto", "--format", "json").stdout)
    from vramplan.solver.query import SolveResult

    result = SolveResult.model_validate(data)
    assert len(result.pareto) >= 2
    figure = plot.pareto_figure(result)
    (axis,) = figure.axes
    front, chosen = axis.collections
    points = sorted((p.cost.hours, p.cost.usd_total) for p in result.pareto)
    assert [c for xy in front.get_offsets() for c in xy] == pytest.approx([c for xy in points for c in xy])
    best = result.plans[0]
    assert list(chosen.get_offsets()[0]) == pytest.approx([best.cost.hours, best.cost.usd_total])
    assert len(chosen.get_offsets()) == 1
    labels = sorted(text.get_text() for text in axis.texts)
    assert labels == sorted(f"{p.plan.num_gpus} x {p.plan.gpu}" for p in result.pareto)
    out = tmp_path / "front.svg"  # the extension picks the format
    assert invoke(*SOLVE, "--pareto", "--plot", str(out)).exit_code == 0
    assert out.read_text(encoding="utf-8").lstrip().startswith("<?xml") and "<svg" in out.read_text(encoding="utf-8")


def test_plot_implies_the_front(tmp_path):
    out = tmp_path / "front.png"
    result = invoke(*SOLVE, "--plot", str(out))
    assert result.exit_code == 0 and "Pareto front" in result.stdout
    assert out.read_bytes().startswith(PNG_SIGNATURE)


@pytest.mark.parametrize("args", [[*ESTIMATE, "--plot", "m.png"], [*SOLVE, "--plot", "f.png"],
                                  [*SOLVE, "--report", "r.html"]])
def test_missing_matplotlib_is_one_line_naming_the_extra(args, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    result = invoke(*args)
    assert result.exit_code == 1
    assert result.stderr == "error: pictures need matplotlib: pip install 'vramplan[plot]'\n"
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("args", [[*ESTIMATE, "--plot", "memory.xyz"], [*SOLVE, "--plot", "front"]])
def test_image_name_without_a_known_extension_is_bad_input(args, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    result = invoke(*args)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("error: plot=") and ".png, .svg, .pdf" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and not list(tmp_path.iterdir())
