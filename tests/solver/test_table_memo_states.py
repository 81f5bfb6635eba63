"""solver/table_memo.py shares model states between the jobs of a model that differ only in
sequence length (and so in global batch): that holds only while models.model_states reads
neither the sequence length nor the micro-batch or accumulation. Checked here on every method
and ZeRO x offload choice, so a models/ change that starts reading them fails this test rather
than the answers."""

from __future__ import annotations

from itertools import product

import pytest

from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.model_states import model_states
from vramplan.solver.api import solve
from vramplan.solver.query import SolveQuery
from vramplan.solver.table_memo import TableMemo


@pytest.mark.parametrize("model", ["llama-3.1-8b", "mixtral-8x7b"])
@pytest.mark.parametrize("method", ["full", "lora", "qlora"])
def test_model_states_read_no_sequence_length_nor_batch(catalogue, model: str, method: str) -> None:
    arch = catalogue.architecture(model)
    for (zero, offload), (tp, pp, ep) in product([(0, "none"), (2, "optimizer"), (3, "optimizer+params")],
                                                 [(1, 1, 1), (2, 2, 1), (1, 2, 2)]):
        if method == "qlora" and zero == 3:
            continue
        seen = set()
        for seq_len, micro, accum in ((512, 1, 1), (8192, 4, 16)):
            plan = Plan(gpu="-", num_gpus=16, zero=zero, offload=offload, tp=tp, pp=pp, ep=ep, micro_batch=micro,
                        grad_accum=accum)
            seen.add(tuple(model_states(arch, Job(method=method, seq_len=seq_len), plan, stage) for stage in range(pp)))
        assert len(seen) == 1, (zero, offload, tp, pp, ep)


def test_answers_with_shared_states_are_those_without(catalogue) -> None:
    queries = [SolveQuery(model="llama-3.1-8b", job=Job(seq_len=seq_len), tokens=1e9, max_gpus=16)
               for seq_len in (8192, 512, 2048)]
    memo = TableMemo()
    shared = [solve(catalogue, q, memo=memo) for q in queries]
    alone = [solve(catalogue, q) for q in queries]
    assert [r.plans for r in shared] == [r.plans for r in alone]
    assert len(memo._states) == 1


@pytest.mark.parametrize("model", ["llama-3.1-8b", "mixtral-8x7b"])
def test_time_terms_read_no_optimizer(catalogue, model: str) -> None:
    """The time-side terms the Tables of jobs that differ only in the optimizer share
    (solver/tables.py time_memo): compute, data-parallel traffic and its phase times, TP/PP/CP/EP
    time, the bubble and the forward's share read no optimizer. Checked on the models/ functions
    for each optimizer, so a change that starts reading it fails here rather than in the answers."""
    from vramplan.models.time.ep_time import ep_time_s
    from vramplan.models.time.flops import plan_flops_per_token
    from vramplan.models.time.parallel_time import (
        cp_exposed_s,
        parallel_traffic,
        pp_bubble_s,
        pp_p2p_s,
        tp_time_s,
    )
    from vramplan.models.time.performance import compute_time_s, dp_traffic

    arch, gpu = catalogue.architecture(model), catalogue.gpu("h100-sxm-80gb")
    for zero, (tp, pp, cp, ep), recompute in product([0, 2, 3], [(1, 1, 1, 1), (2, 2, 1, 2), (2, 1, 2, 1)],
                                                     ["none", "full"]):
        plan = Plan(gpu="-", num_gpus=32, zero=zero, tp=tp, pp=pp, cp=cp, ep=ep, recompute=recompute, grad_accum=4,
                    sequence_parallel=tp > 1)
        seen = set()
        for optimizer in ("adamw", "adamw-8bit", "sgd", "adamw-8bit-paged"):
            job = Job(seq_len=4096, optimizer=optimizer)
            seen.add((compute_time_s(arch, job, plan, gpu), dp_traffic(arch, job, plan),
                      tp_time_s(arch, job, plan, gpu, 1.0), pp_p2p_s(arch, job, plan, gpu, True, 50.0),
                      cp_exposed_s(arch, job, plan, gpu, 8, 50.0, 1.0), ep_time_s(arch, job, plan, gpu, 8, 50.0),
                      pp_bubble_s(plan, 1.0), plan_flops_per_token(arch, job, plan).forward_share,
                      parallel_traffic(arch, job, plan)))
        assert len(seen) == 1, (zero, tp, pp, cp, ep, recompute)


def test_answers_with_shared_time_terms_are_those_without(catalogue) -> None:
    """The explanation's 8-bit mitigation after the AdamW solve: one time memo, the same answers."""
    queries = [SolveQuery(model="llama-3.1-8b", job=Job(seq_len=4096, optimizer=optimizer), tokens=1e9, max_gpus=16)
               for optimizer in ("adamw", "adamw-8bit")]
    memo = TableMemo()
    shared = [solve(catalogue, q, memo=memo) for q in queries]
    alone = [solve(catalogue, q) for q in queries]
    assert [r.plans for r in shared] == [r.plans for r in alone]
    assert len(memo._times) == 1 and len(memo._jobs) == 2
    # The second job found the first one's time terms: fewer models/ evaluations than alone.
    assert shared[1].search.evaluations < alone[1].search.evaluations
