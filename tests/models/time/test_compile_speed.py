"""What an uncompiled run loses to unfused element-wise ops (models/time/compile_speed.py), against
torchtitan's paired runs with and without torch.compile (benchmarks/llama3_h100_202412_torchtitan.md
@ 820504e, Tables 1 and 3: Llama 3.1 8B, FSDP, local batch 2, seq 8192, op SAC, bf16, H100)."""

from __future__ import annotations

import pytest

from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.catalogue.stack import with_preset
from vramplan.models.core.setup import Job, Plan
from vramplan.models.time.compile_speed import eager_elementwise_bytes_per_token, eager_elementwise_s
from vramplan.models.time.performance import performance

# (GPUs, tokens/s/GPU without torch.compile, with torch.compile of the blocks)
TORCHTITAN_PAIRS = [(8, 5762, 6667), (128, 5605, 6514)]


def _job(compile_: str, **fields) -> Job:
    return Job(**with_preset({"stack": "torchtitan", "seq_len": 8192, "compile": compile_, **fields}, load_stacks()))


def _tokens_per_gpu(catalogue, job: Job, gpus: int, gpu: str = "h100-sxm-80gb", model: str = "llama-3.1-8b") -> float:
    plan = Plan(gpu=gpu, num_gpus=gpus, zero=3, micro_batch=2, recompute="selective")
    return performance(catalogue.architecture(model), job, plan, catalogue.gpu(gpu), 8, 50.0).tokens_per_s / gpus


@pytest.mark.parametrize(("gpus", "eager", "compiled"), TORCHTITAN_PAIRS)
def test_the_paired_torchtitan_runs_keep_their_ratio(catalogue, gpus, eager, compiled) -> None:
    """The fitted HBM fraction (0.80) gives the compiled run 1.157 / 1.162 times the eager one's speed."""
    ratio = _tokens_per_gpu(catalogue, _job("model"), gpus) / _tokens_per_gpu(catalogue, _job("none"), gpus)
    assert ratio == pytest.approx(compiled / eager, rel=0.01)


def test_the_cost_follows_matmul_rate_over_hbm_bandwidth(catalogue) -> None:
    """A100's matmuls are 3.2x slower than H100's, its HBM 1.6x: the same traffic costs it less of the step."""
    loss = {}
    for gpu in ("h100-sxm-80gb", "a100-sxm-80gb"):
        loss[gpu] = 1 - _tokens_per_gpu(catalogue, _job("none"), 64, gpu) / _tokens_per_gpu(catalogue, _job("model+loss"), 64, gpu)
    assert 0.12 < loss["h100-sxm-80gb"] < 0.16 and 0.07 < loss["a100-sxm-80gb"] < 0.12
    assert loss["a100-sxm-80gb"] < loss["h100-sxm-80gb"]


def test_only_unfused_eager_blocks_of_the_measured_stacks_pay(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=3, micro_batch=2, recompute="selective")
    assert eager_elementwise_bytes_per_token(arch, _job("model+loss"), plan) == 0
    blocks_only = eager_elementwise_bytes_per_token(arch, _job("model"), plan)  # the eager loss: 36 bytes per logit
    assert blocks_only == 36 * arch.vocab_size
    for job in (Job(seq_len=8192), Job(seq_len=8192, stack="megatron", kernels="fused"), _job("none", kernels="fused")):
        assert eager_elementwise_s(arch, job, plan, catalogue.gpu("h100-sxm-80gb")) == 0


def test_torchtitans_uncompiled_405b_run(catalogue) -> None:
    """docs/performance.md @ 3faaa1a: 405B on 128 H100, FSDP 16 x TP 8, local batch 2, full AC, no
    optimizations: 109 tokens/s/GPU; 1.15x without the eager cost, 1.10x with it (a 405B block's
    element-wise bytes are a smaller share of its matmuls than an 8B block's)."""
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=128, zero=3, micro_batch=2, recompute="full", tp=8, sequence_parallel=True)
    gpu = catalogue.gpu("h100-sxm-80gb")
    arch = catalogue.architecture("llama-3.1-405b")
    eager = performance(arch, _job("none"), plan, gpu, 8, 50.0).tokens_per_s / 128
    compiled = performance(arch, _job("model+loss"), plan, gpu, 8, 50.0).tokens_per_s / 128
    assert 1.03 < compiled / eager < 1.07 and 1.05 < eager / 109 < 1.15
