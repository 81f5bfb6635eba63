"""Each term of the registry (models/terms.py) reads only the Job and Plan fields it declares: the
solver's memo shares a term's values between the jobs that agree on those fields
(solver/table_memo.py), so an undeclared read would hand one job another's value. Each function runs
over a grid of architectures (dense, MoE, MLA with dense first layers, local/global attention),
stacks, methods, kernels, optimizers and plans (TP/PP/EP, ZeRO x offload, recompute, fp8/fp16)
with a Job and a Plan that record every attribute read."""

from __future__ import annotations

from itertools import product

import pytest

from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.terms import TERMS, Term, job_fields

MODELS = ("llama-3.1-8b", "mixtral-8x7b", "deepseek-v2-lite", "gemma-2-9b")
JOBS = [dict(method=method, stack=stack, kernels=kernels, optimizer=optimizer)
        for method, stack, kernels, optimizer in product(("full", "lora", "qlora"),
                                                         ("hf", "megatron", "litgpt", "torchtune", "torchtitan", "unsloth"),
                                                         ("eager", "fused"), ("adamw", "sgd"))]
PLANS = [dict(zero=0, offload="none", tp=1, pp=1, ep=1, recompute="none", precision="bf16"),
         dict(zero=3, offload="none", tp=2, pp=2, ep=1, recompute="full", precision="bf16", sequence_parallel=True),
         dict(zero=3, offload="optimizer+params", tp=1, pp=1, ep=1, recompute="selective", precision="bf16"),
         dict(zero=2, offload="optimizer", tp=1, pp=2, ep=2, recompute="full", recompute_layers=3, precision="fp8"),
         dict(zero=1, offload="none", tp=2, pp=1, ep=2, recompute="none", precision="fp16", cp=2)]


class Recording:
    """Delegates every attribute to the object and records its name; equal only to itself, so a
    cache keyed by the job never answers in the function's place."""

    def __init__(self, obj: object, reads: set[str]) -> None:
        object.__setattr__(self, "_obj", obj)
        object.__setattr__(self, "_reads", reads)

    def __getattr__(self, name: str):
        self._reads.add(name)
        return getattr(self._obj, name)

    def __hash__(self) -> int:
        return hash(self._obj)

    def __eq__(self, other: object) -> bool:
        return self is other


def _reads(catalogue, term: Term) -> tuple[set[str], set[str], int]:
    job_reads: set[str] = set()
    plan_reads: set[str] = set()
    gpu = catalogue.gpu("h100-sxm-80gb")
    calls = 0
    for model, job_cells, plan_cells in product(MODELS, JOBS, PLANS):
        arch = catalogue.architecture(model)
        job = Job(**job_cells)
        plan = Plan(gpu="-", num_gpus=16, micro_batch=2, grad_accum=4, **plan_cells)
        args = (arch, Recording(job, job_reads), Recording(plan, plan_reads))
        try:
            term.function(*args, gpu) if term.name == "compute_time_s" else term.function(*args)
        except VramplanError:
            continue  # a combination the model refuses (its message names it): nothing to read
        calls += 1
    return job_reads, plan_reads, calls


@pytest.mark.parametrize("term", TERMS, ids=lambda term: term.name)
def test_each_term_reads_only_what_it_declares(catalogue, term: Term) -> None:
    job_reads, plan_reads, calls = _reads(catalogue, term)
    assert calls > len(MODELS) * len(JOBS)  # the grid ran, not refused
    assert job_reads <= term.job_fields, f"{term.name} reads undeclared Job fields {sorted(job_reads - term.job_fields)}"
    assert plan_reads <= term.plan_fields, f"{term.name} reads undeclared Plan fields {sorted(plan_reads - term.plan_fields)}"
    assert job_reads and plan_reads  # the recording sees the reads


def test_the_memo_keys_leave_out_what_no_term_reads() -> None:
    """What the sharing is for: a batch's jobs that differ in sequence length share model states,
    and an explanation's 8-bit-optimizer mitigation shares the time terms of the job it explains."""
    from vramplan.models.terms import STATES_TERMS, TIME_TERMS
    assert "seq_len" not in job_fields(STATES_TERMS) and "optimizer" not in job_fields(TIME_TERMS)
    assert "optimizer" in job_fields(STATES_TERMS) and "seq_len" in job_fields(TIME_TERMS)
