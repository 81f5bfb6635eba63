"""A dropless MoE layer that waits for the host (models/time/moe_host.py, HOST_SYNCED_MOE_STACKS:
Megatron-Core's dispatchers sync the CPU every MoE forward, and Transformer Engine launches each
local expert's GEMMs on its own): the calibration reproduced from the published runs
(tests/data/measured_throughput.csv: Megatron-Bridge's Qwen3 MoE runs without a full-iteration CUDA
graph), the runs it was not fitted to (DeepSeek-V3's), and the mechanism's shape (none under a
full-iteration graph, on other stacks or dense models; less under per-layer attention graphs; more
with more local experts; less with bigger micro-batches)."""

from __future__ import annotations

import math
import statistics

import pytest
from helpers.catalogue import packaged_catalogue
from helpers.cli import invoke, one_line_error
from measured_throughput import Run, compare, load_runs, predict

from vramplan.launch.configs import LaunchModel, launch_config
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.time import moe_host
from vramplan.models.time.calibration import MOE_HOST_EXPERT_S, MOE_HOST_SYNC_GRAPHED_S, MOE_HOST_SYNC_S
from vramplan.models.time.moe_host import host_sync
from vramplan.models.time.performance import performance

CAT = packaged_catalogue()
RUNS = load_runs()


def _host_synced(run: Run, models: tuple[str, ...]) -> bool:
    """A Megatron run of one of these MoE models without a full-iteration CUDA graph."""
    return (run.cells["stack"] == "megatron" and run.cells.get("cuda_graphs") != "full-iteration"
            and run.cells["model"] in models)


FIT = [run for run in RUNS if _host_synced(run, ("qwen3-30b-a3b", "qwen3-235b-a22b"))]
CHECK = [run for run in RUNS if _host_synced(run, ("deepseek-v3",))]


def _step_at(run: Run, host_s: float, monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(moe_host, "host_sync_s", lambda num_experts, ep, graphs: host_s)
    perf = predict(run, CAT)
    return perf.tokens_per_step / perf.tokens_per_s


def _probe(run: Run, monkeypatch: pytest.MonkeyPatch) -> tuple[float, float, float, float, int, bool]:
    """(step with no host time, syncs, the GPU's interval, tokens/s/GPU per second of step, local
    experts, attention graphed): the step is base + syncs x max(0, host_s - interval), read at
    host_s 0, 10 and 20 s (both far above any interval)."""
    base, at_10, at_20 = (_step_at(run, h, monkeypatch) for h in (0.0, 10.0, 20.0))
    syncs = (at_20 - at_10) / 10.0
    interval = 10.0 - (at_10 - base) / syncs
    perf = predict(run, CAT)
    per_gpu_rate = perf.tokens_per_step / int(run.cells["num_gpus"])
    experts = CAT.architecture(run.cells["model"]).num_experts // int(run.cells["ep"] or 1)
    return base, syncs, interval, per_gpu_rate, experts, run.cells.get("cuda_graphs") == "attn"


def _ratio(probe: tuple[float, float, float, float, int, bool], measured: float, fixed_s: float,
           graphed_s: float, per_expert_s: float) -> float:
    """predicted / measured of a probed run under these host times."""
    base, syncs, interval, per_gpu_rate, experts, graphed = probe
    step = base + syncs * max(0.0, (graphed_s if graphed else fixed_s) + per_expert_s * experts - interval)
    return per_gpu_rate / step / measured


def _log_error(probe: tuple[float, float, float, float, int, bool], measured: float, *host: float) -> float:
    return abs(math.log(_ratio(probe, measured, *host)))


@pytest.fixture(scope="module")
def probes():
    with pytest.MonkeyPatch.context() as monkeypatch:
        return {run.id: (_probe(run, monkeypatch), run.measured) for run in FIT + CHECK}


CALIBRATED = (MOE_HOST_SYNC_S.value, MOE_HOST_SYNC_GRAPHED_S.value, MOE_HOST_EXPERT_S.value)


def _within(probed: list, host: tuple[float, float, float]) -> int:
    return sum(abs(_ratio(p, m, *host) - 1) <= 0.20 for p, m in probed)


def test_the_host_time_is_fitted_to_the_qwen3_runs(probes):
    """Least absolute log error over the 42 Qwen3 runs without a full-iteration graph, on a 0.25 ms x
    0.25 ms x 0.025 ms grid: the calibration's values (models/time/calibration.py), which bring 37
    of them within 20% of the measurement (12 without the host time; 36 at 3.0 / 2.0 / 0.275 ms before
    ZeRO-1's traffic hid only behind the last micro-batch; 36 of 41 at 3.25 ms before the
    25.11 GB300 Qwen3-235B-A22B BF16 run, 37 and 17 before Megatron's dense-layer kernel speed,
    calibration.STACK_KERNEL_SPEED, and GB300's own speed, GPU_SPEED)."""
    fit = [probes[run.id] for run in FIT]
    assert len(fit) == 42
    grid = [(a * 2.5e-4, g * 2.5e-4, b * 2.5e-5) for a in range(0, 41) for g in range(0, 41) for b in range(0, 21)]
    best = min(grid, key=lambda host: sum(_log_error(p, m, *host) for p, m in fit))
    assert best == pytest.approx(CALIBRATED, abs=1e-9)
    assert (_within(fit, CALIBRATED), _within(fit, (0.0, 0.0, 0.0))) == (37, 12)


def test_deepseek_v3_runs_it_was_not_fitted_to_stay_within_20_percent(probes):
    """DeepSeek-V3's Megatron runs without a full-iteration graph (4 to 32 local experts, MLA, PP 2-16):
    every one within 20% with the host time (15 of 20 without it; 17 of 19 before Megatron's dense-layer
    kernel speed and GB300's own speed), the published table's figures."""
    check = [probes[run.id] for run in CHECK]
    assert len(check) == 20
    assert (_within(check, CALIBRATED), _within(check, (0.0, 0.0, 0.0))) == (20, 15)
    # 1.04 before ZeRO-1's traffic hid only behind the last micro-batch; 0.94 before the host time
    assert statistics.median(compare(run, CAT).ratio for run in CHECK) == pytest.approx(1.01, abs=0.02)


MOE = CAT.architecture("qwen3-30b-a3b")
GPU = CAT.gpu("b200-180gb")
MEGATRON = Job(seq_len=4096, stack="megatron", kernels="fused", accounting="hf")


def _plan(**layout) -> Plan:
    return Plan(**{"gpu": GPU.name, "num_gpus": 8, "zero": 1, "precision": "bf16", "grad_accum": 16, "micro_batch": 1,
                   "ep": 8, **layout})


def _host_s(job: Job, plan: Plan) -> float:
    with_host = performance(MOE, job, plan, GPU).step_time_s
    without = performance(MOE, job.model_copy(update={"cuda_graphs": "full-iteration"}), plan, GPU).step_time_s
    return with_host - without


def test_a_full_iteration_graph_another_stack_or_a_dense_model_waits_for_no_host():
    assert _host_s(MEGATRON, _plan()) > _host_s(MEGATRON.model_copy(update={"cuda_graphs": "attn"}), _plan()) > 0
    assert host_sync(MOE, MEGATRON.model_copy(update={"cuda_graphs": "full-iteration"}), _plan()).syncs == 0
    assert host_sync(MOE, Job(seq_len=4096, stack="torchtitan"), _plan()).syncs == 0
    dense = CAT.architecture("llama-3.1-8b")
    assert host_sync(dense, MEGATRON, Plan(gpu=GPU.name, num_gpus=8)).syncs == 0


def test_more_local_experts_wait_longer_and_bigger_micro_batches_hide_it():
    """EP 8 leaves 16 of Qwen3-30B-A3B's 128 experts on a rank, EP 2 64: the host launches 4x the
    GEMMs; micro-batch 8 gives the GPU 8x the work of each interval, over 8x fewer syncs."""
    ep8, ep2 = _host_s(MEGATRON, _plan(ep=8)), _host_s(MEGATRON, _plan(ep=2, num_gpus=2))
    assert ep2 > ep8 > 0
    assert _host_s(MEGATRON, _plan(micro_batch=8, grad_accum=2)) < ep8 / 8


def test_full_recompute_syncs_again_and_the_a2a_overlap_pairs_a_backward_with_each_forward():
    plain = host_sync(MOE, MEGATRON, _plan())
    recomputed = host_sync(MOE, MEGATRON, _plan(recompute="full"))
    assert recomputed.syncs == 2 * plain.syncs  # every layer's forward runs twice
    overlapped = host_sync(MOE, MEGATRON.model_copy(update={"moe_a2a_overlap": True}), _plan())
    assert overlapped.interval_share > 2.5 * plain.interval_share  # the interval holds its backward too


def test_cuda_graphs_are_megatrons_and_refused_where_megatron_refuses_them():
    """Only Megatron has the switch (catalogues/stack_capabilities.csv cuda_graphs); per-layer graphs
    refuse full recompute, --recompute-layers and the layer-level activation offload
    (transformer_config.py L2800-2801, L2855-2858 @ d98e8a64), each one line naming the field."""
    base = ["estimate", "--model", "qwen3-30b-a3b", "--seq-len", "4096", "--gpu", "b200-180gb", "--num-gpus", "8",
            "--ep", "8", "--zero", "1"]
    message = one_line_error(invoke(*base, "--cuda-graphs", "attn"))
    assert "stack='hf'" in message and "cuda_graphs=attn" in message
    megatron = [*base, "--stack", "megatron", "--cuda-graphs", "attn"]
    for extra, field in ((("--recompute", "full"), "recompute=full"), (("--recompute-layers", "4"), "recompute_layers=4"),
                         (("--activation-offload",), "activation_offload=True")):
        assert field in one_line_error(invoke(*megatron, *extra)), extra
    assert invoke(*megatron).exit_code in (0, 3)
    assert invoke(*base, "--stack", "megatron", "--cuda-graphs", "full-iteration", "--recompute", "full").exit_code in (0, 3)


def test_the_estimate_shows_the_wait_and_warns_of_what_it_leaves_out():
    """The step line names the MoE host wait, past 10% of the step a host-bound warning says what
    shortens it, and a plan with graphs says their memory is not in the estimate."""
    base = ["estimate", "--model", "qwen3-30b-a3b", "--seq-len", "4096", "--gpu", "b200-180gb", "--num-gpus", "8",
            "--ep", "8", "--zero", "1", "--stack", "megatron", "--grad-accum", "64", "--precision", "fp8"]
    text = invoke(*base, env={"COLUMNS": None}).stdout
    assert "MoE host wait" in text and "warning: host-bound: its MoE layers wait" in text
    graphed = invoke(*base, "--cuda-graphs", "full-iteration", env={"COLUMNS": None}).stdout
    assert "MoE host wait" not in graphed and "host-bound" not in graphed
    assert "the graphs' memory pool and the MoE layers' capacity padding" in graphed


def test_the_launch_configuration_writes_the_graphs_and_refuses_a_graphed_dropless_moe():
    plan = Plan(gpu="b200-180gb", num_gpus=8, ep=8, zero=1)
    attn = launch_config(MEGATRON.model_copy(update={"cuda_graphs": "attn"}), plan, LaunchModel(48, 128)).text
    assert "--cuda-graph-impl transformer_engine" in attn and "--cuda-graph-modules attn moe_router moe_preprocess" in attn
    dense = launch_config(MEGATRON.model_copy(update={"cuda_graphs": "full-iteration"}), Plan(gpu="b200-180gb", num_gpus=8),
                          LaunchModel(32)).text
    assert "--cuda-graph-impl full_iteration" in dense and "--no-check-for-nan-in-loss-and-grad" in dense
    with pytest.raises(VramplanError, match="cuda_graphs='full-iteration'"):
        launch_config(MEGATRON.model_copy(update={"cuda_graphs": "full-iteration"}), plan, LaunchModel(48, 128))
