"""torchtitan's tensorwise Float8 tensor parallelism all-gathers float8 (models/time/parallel_time.py
float8_tp, models/core/stack_behaviour.py FLOAT8_TP_STACKS): torchao's Float8ColwiseParallel /
Float8RowwiseParallel / PrepareFloat8ModuleInput (torchao/float8/float8_tensor_parallel.py) cast the
attention and MLP inputs to e4m3 before their sequence-parallel all-gather and wo / w2's output
gradients to e5m2 before their backward all-gather; the reduce-scatters (wo / w2's outputs, the input
gradients) stay bf16. Each of a layer's all-reduce volumes is one all-gather and one reduce-scatter,
so the TP bytes are (1 + 2) / (2 + 2) of bf16's, in the forward, the recomputed forward and the
backward alike, with or without async TP; other stacks, no SP, bf16 and MoE models are unchanged."""

from __future__ import annotations

import pytest
from helpers.catalogue import packaged_catalogue
from helpers.parallel_grid import assert_the_four_terms, checked_grid

from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.stack_behaviour import FLOAT8_TP_STACKS
from vramplan.models.time.parallel_time import float8_tp, parallel_traffic, tp_time_s
from vramplan.solver.query_fields import query_from_fields
from vramplan.solver.space_build import build_space

CATALOGUE = packaged_catalogue()
LLAMA_70B = CATALOGUE.architecture("llama-3.1-70b")
H100 = CATALOGUE.gpu("h100-sxm-80gb")
TP8 = {"gpu": H100.name, "num_gpus": 8, "tp": 8, "sequence_parallel": True, "grad_accum": 4}
FIELDS = ("tp_exposed_bytes", "tp_overlapped_bytes", "tp_forward_overlapped_bytes")


def _job(stack: str, tp_overlap: bool = False) -> Job:
    return Job(seq_len=8192, stack=stack, tp_overlap=tp_overlap, compile="model")


def _bytes(arch, job: Job, plan: Plan) -> tuple[float, ...]:
    traffic = parallel_traffic(arch, job, plan)
    return tuple(getattr(traffic, name) for name in FIELDS)


def test_the_behaviour_is_torchtitans() -> None:
    assert FLOAT8_TP_STACKS.stacks == {"torchtitan", "torchtitan-root-fsdp"}


@pytest.mark.parametrize("stack", ["torchtitan", "torchtitan-root-fsdp"])
@pytest.mark.parametrize("tp_overlap", [False, True])
@pytest.mark.parametrize("recompute", ["none", "full"])
def test_the_all_gathers_move_one_byte_the_reduce_scatters_two(stack: str, tp_overlap: bool, recompute: str) -> None:
    """Half of each collective volume is an all-gather (1 byte under Float8 TP), half a reduce-scatter
    (bf16): fp8 = bf16 / 2 (reduce-scatters) + bf16 / 2 / 2 (all-gathers at half the width)."""
    job = _job(stack, tp_overlap)
    bf16 = _bytes(LLAMA_70B, job, Plan(**TP8, recompute=recompute))
    fp8 = _bytes(LLAMA_70B, job, Plan(**TP8, recompute=recompute, precision="fp8"))
    assert float8_tp(LLAMA_70B, job, Plan(**TP8, recompute=recompute, precision="fp8"))
    assert any(bf16)
    for b, f in zip(bf16, fp8, strict=True):
        assert f == pytest.approx(b / 2 + b / 2 / 2)


def test_the_time_falls_with_the_bytes() -> None:
    """No compute to hide behind: torchtitan's TP time is its bytes over NVLink, 3/4 of bf16's."""
    job = _job("torchtitan")
    bf16 = tp_time_s(LLAMA_70B, job, Plan(**TP8), H100, compute_s=0.0)
    fp8 = tp_time_s(LLAMA_70B, job, Plan(**TP8, precision="fp8"), H100, compute_s=0.0)
    assert fp8 == pytest.approx(0.75 * bf16)


@pytest.mark.parametrize("case", ["megatron", "hf", "bf16", "no-sp", "moe", "tp1"])
def test_unchanged_where_nothing_casts_before_the_gather(case: str) -> None:
    """Megatron and hf gather bf16 here (no FLOAT8_TP_STACKS behaviour); without SP the collectives
    are all-reduces, which reduce bf16; torchtitan's MoE models keep bf16 TP (deepseek_v3 raises,
    gpt_oss passes enable_float8_tensorwise_tp=False); bf16 runs and TP 1 have nothing to cast."""
    arch, stack, plan = LLAMA_70B, "torchtitan", dict(TP8)
    if case in ("megatron", "hf"):
        stack = case
    elif case == "no-sp":
        plan["sequence_parallel"] = False
    elif case == "moe":
        arch = CATALOGUE.architecture("mixtral-8x7b")
    elif case == "tp1":
        plan = {**plan, "tp": 1, "sequence_parallel": False}
    job = _job(stack)
    fp8_plan = Plan(**plan, precision="bf16" if case == "bf16" else "fp8")
    assert not float8_tp(arch, job, fp8_plan)
    assert _bytes(arch, job, fp8_plan) == _bytes(arch, job, Plan(**plan))


def test_parallel_seconds_equal_the_four_terms_under_float8_tp() -> None:
    for tp_overlap in (False, True):
        for plan in (Plan(**TP8, precision="fp8"), Plan(**TP8, precision="fp8", recompute="full")):
            for compute in (0.0, 0.5, 30.0):
                assert_the_four_terms(LLAMA_70B, _job("torchtitan", tp_overlap), plan, H100, compute)


def test_the_solver_grid_is_the_scalar_function_to_the_bit() -> None:
    """parallel_seconds_grid against Tables.parallel_s on a torchtitan fp8 space: the mirror reads the
    bytes the traffic carries (tests/solver/test_bound_arrays.py's check)."""
    fields = {"tokens": 1e9, "model": "llama-3.1-70b", "seq_len": 8192, "global_batch": 64, "max_gpus": 64,
              "stack": "torchtitan", "gpus": "h100-sxm-80gb", "precision": "fp8", "compile": "model+loss"}
    space = build_space(CATALOGUE, query_from_fields(fields))
    cells, _ = checked_grid(space)
    assert cells > 20
