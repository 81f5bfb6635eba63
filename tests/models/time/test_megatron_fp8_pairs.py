"""Megatron's kernel speed (models/time/calibration.py STACK_KERNEL_SPEED, issue 32): fitted on
Megatron-Core's bf16 dense runs on H100, checked on every Megatron dense fp8 run, none of them fitted.

Megatron-Bridge's performance summaries publish no dense bf16 run (every release's Llama rows are
FP8-CS, MXFP8 or NVFP4). Megatron-Core's bf16 dense runs the table holds: NVIDIA's DGX Cloud
benchmarking recipes (NVIDIA/dgxc-benchmarking llama3.1/README.md @ v25.04.02 and v25.05.05, NeMo 2.0 on
Megatron-Core + Transformer Engine) for Llama 3.1 8B, 70B and 405B on H100 (each with an fp8 twin;
405B also on GB200), and Megatron-Bridge's Qwen3 8B verification card (DP 16 on H100),
tests/data/measured_throughput.csv. torchtitan's torchao pairs are the control.

What the pairs said at Hopper's efficiency alone (docs/throughput-and-cost.md "Megatron's fp8 against
its bf16 twins"): the bf16 twins read 0.85-0.92; the fp8 model (models/time/fp8.py) keeps the share
1 - e / GEMM_PLATEAU of a linear's bf16 time that is not GEMM, so a base speed under-read in e was
under-read again in the fp8 gain (the TP pairs' speedups 0.87-0.91 of the measured); and at the
efficiency that reproduced each bf16 twin, every fp8 twin read within tolerance. So the speed is the
base speed of Megatron's dense layers, fitted once on the bf16 runs, and the fp8 gain follows from it.
"""

from __future__ import annotations

import statistics

import pytest
from measured_throughput import compare, load_runs

from vramplan.models.time.calibration import STACK_KERNEL_SPEED, Efficiency

BF16_FIT = ["megatron-qwen3-8b-dp16-h100-bf16", "megatron-nemo2502-llama3.1-8b-cp2-h100-bf16",
            "megatron-nemo2502-llama3.1-70b-tp4-pp4-cp2-h100-bf16", "megatron-nemo2502-llama3.1-405b-tp8-pp8-cp2-h100-bf16"]
MEGATRON = [  # (bf16 twin, fp8 twin)
    ("megatron-nemo2502-llama3.1-8b-cp2-h100-bf16", "megatron-nemo2502-llama3.1-8b-cp2-h100-fp8"),
    ("megatron-nemo2502-llama3.1-70b-tp4-pp4-cp2-h100-bf16", "megatron-nemo2502-llama3.1-70b-tp4-pp8-h100-fp8"),
    ("megatron-nemo2502-llama3.1-405b-tp8-pp8-cp2-h100-bf16", "megatron-nemo2502-llama3.1-405b-tp8-pp8-cp2-h100-fp8"),
    ("megatron-nemo2504-llama3.1-405b-tp4-pp8-cp2-gb200-bf16", "megatron-nemo2504-llama3.1-405b-tp4-pp8-cp2-gb200-fp8"),
]
TORCHAO = [  # torchao Float8 tensorwise and its bf16 run (tp8-small-model pair left out: a known miss of both)
    ("torchtitan-llama3.1-8b-fsdp8-compile", "torchtitan-llama3.1-8b-fsdp8-compile-fp8"),
    ("torchtitan-llama3.1-8b-fsdp128-compile", "torchtitan-llama3.1-8b-fsdp128-compile-fp8"),
    ("torchtitan-llama3.1-8b-fsdp8-h100-202503-compile", "torchtitan-llama3.1-8b-fsdp8-h100-202503-compile-fp8"),
    ("torchtitan-llama3.1-70b-fsdp32-tp8-bf16-2025", "torchtitan-llama3.1-70b-fsdp32-tp8-fp8-2025"),
    ("torchtitan-llama3.1-8b-fsdp8-mi300x-compile", "torchtitan-llama3.1-8b-fsdp8-mi300x-compile-fp8"),
    ("torchtitan-llama3.1-8b-fsdp8-b200-compile", "torchtitan-llama3.1-8b-fsdp8-b200-compile-fp8"),
]


@pytest.fixture(scope="module")
def runs():
    return {run.id: run for run in load_runs()}


def _speedup_read(runs, catalogue, bf16: str, fp8: str) -> float:
    """Predicted fp8 / bf16 speedup over the measured one."""
    b, f = compare(runs[bf16], catalogue), compare(runs[fp8], catalogue)
    return (f.predicted / b.predicted) / (runs[fp8].measured / runs[bf16].measured)


def test_the_torchao_control_pairs_gain_what_the_model_says(runs, catalogue) -> None:
    """torchao's fp8 gain is the model's to within 3% on H100, MI300X and B200 (no kernel speed)."""
    assert "torchtitan" not in STACK_KERNEL_SPEED
    for bf16, fp8 in TORCHAO:
        assert _speedup_read(runs, catalogue, bf16, fp8) == pytest.approx(1.0, abs=0.03), fp8


def test_the_kernel_speed_is_the_mean_of_the_bf16_runs(monkeypatch, runs, catalogue) -> None:
    """Each bf16 run read at the speed that predicts it exactly: 1.12 (Qwen3 8B, 1.09 before ZeRO-1's
    traffic hid only behind the last micro-batch), 1.18 (Llama 8B CP 2), 1.12 (70B), 1.13 (405B); the
    calibration is their mean to two decimals."""
    speeds = []
    for run_id in BF16_FIT:
        low, high = 0.8, 1.6
        for _ in range(30):
            mid = (low + high) / 2
            monkeypatch.setitem(STACK_KERNEL_SPEED, "megatron", Efficiency(mid, True, "fit"))
            low, high = (mid, high) if compare(runs[run_id], catalogue).ratio < 1 else (low, mid)
        speeds.append((low + high) / 2)
    monkeypatch.undo()
    assert min(speeds) > 1.08 and max(speeds) < 1.19
    assert STACK_KERNEL_SPEED["megatron"].value == pytest.approx(statistics.mean(speeds), abs=0.005)


def test_without_it_the_bf16_runs_read_low_on_hopper(monkeypatch, runs, catalogue) -> None:
    """The base speed: at Hopper's efficiency alone Megatron's bf16 runs read 0.85-0.92, under the
    torchao control's bf16 runs (1.02-1.17); with it 0.96-1.04."""
    for run_id in BF16_FIT:
        assert 0.95 < compare(runs[run_id], catalogue).ratio < 1.05, run_id
    monkeypatch.delitem(STACK_KERNEL_SPEED, "megatron")
    for run_id in BF16_FIT:
        assert 0.84 < compare(runs[run_id], catalogue).ratio < 0.93, run_id


def test_the_fp8_gain_follows_the_base_speed(monkeypatch, runs, catalogue) -> None:
    """With the speed the fp8 twins (not fitted) read 0.94-1.06 (0.93-1.04 before ZeRO-1's traffic hid
    only behind the last micro-batch: the 405B GB200 twin accumulates 32 micro-batches) and each
    pair's fp8 speedup 0.92-1.03
    of the measured (0.92: the 70B pair, whose twins run different layouts); without it the TP pairs'
    speedups read 0.87-0.91 (fp8_gemm_time_ratio reads the GEMM share from the same efficiency)."""
    for bf16, fp8 in MEGATRON:
        assert 0.93 < compare(runs[fp8], catalogue).ratio < 1.07, fp8
        assert 0.91 < _speedup_read(runs, catalogue, bf16, fp8) < 1.04, fp8
    monkeypatch.delitem(STACK_KERNEL_SPEED, "megatron")
    for pair in MEGATRON[1:]:
        assert 0.86 < _speedup_read(runs, catalogue, *pair) < 0.92, pair[1]


def test_every_megatron_dense_fp8_run_is_checked_not_fitted(runs, catalogue) -> None:
    """The check: Megatron's dense fp8 runs in the table (H100, B200, GB200, GB300; Llama 3 8B to
    405B, FP8-CS and MXFP8), 67 of 68 within 20%, median 0.95 (0.94 before ZeRO-1's traffic hid only
    behind the last micro-batch); the one outside is a known miss."""
    dense_fp8 = [run for run in runs.values() if run.cells["stack"] == "megatron" and run.cells["precision"] == "fp8"
                 and catalogue.architecture(run.cells["model"]).num_experts <= 1]
    ratios = {run.id: compare(run, catalogue).ratio for run in dense_fp8}
    outside = [run_id for run_id, ratio in ratios.items() if abs(ratio - 1) > 0.2]
    assert (len(ratios), len(outside)) == (68, 1)
    assert all(runs[run_id].known_miss for run_id in outside)
    assert statistics.median(ratios.values()) == pytest.approx(0.95, abs=0.01)


def test_the_speed_holds_where_it_is_fitted_or_checked(catalogue) -> None:
    """Hopper (fitted) and Blackwell (checked) and what borrows them (Ada) gain it. Ampere's value comes
    from Korthikanti et al.'s Megatron-LM runs (calibration.py), which carry it already, on an A100
    and on the generations that borrow it; CDNA3's from torchtitan on ROCm, with no Megatron run."""
    from vramplan.models.time.calibration import compute_efficiency, generation_efficiency

    for gpu in ("a100-sxm-80gb", "v100-sxm-32gb", "mi300x-192gb"):
        spec = catalogue.gpu(gpu)
        assert compute_efficiency(spec, "megatron").value == generation_efficiency(spec.architecture).value
    h100 = catalogue.gpu("h100-sxm-80gb")
    assert compute_efficiency(h100, "megatron").value == pytest.approx(0.4845 * STACK_KERNEL_SPEED["megatron"].value)
    assert compute_efficiency(h100, "hf").value == 0.4845
    for gpu in ("b200-180gb", "l40s-48gb"):
        spec = catalogue.gpu(gpu)
        assert compute_efficiency(spec, "megatron").value > generation_efficiency(spec.architecture).value
