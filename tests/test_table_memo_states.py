"""solver/table_memo.py shares model states between the jobs of a model that differ only in
sequence length (and so in global batch): that holds only while models.model_states reads
neither the sequence length nor the micro-batch or accumulation. Checked here on every method
and ZeRO x offload choice, so a models/ change that starts reading them fails this test rather
than the answers."""

from __future__ import annotations

from itertools import product

import pytest

from vramplan.models.catalogue import load_catalogue
from vramplan.models.model_states import model_states
from vramplan.models.setup import Job, Plan
from vramplan.solver.api import solve
from vramplan.solver.query import SolveQuery
from vramplan.solver.table_memo import TableMemo

CATALOGUE = load_catalogue()


@pytest.mark.parametrize("model", ["llama-3.1-8b", "mixtral-8x7b"])
@pytest.mark.parametrize("method", ["full", "lora", "qlora"])
def test_model_states_read_no_sequence_length_nor_batch(model: str, method: str) -> None:
    arch = CATALOGUE.architecture(model)
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


def test_answers_with_shared_states_are_those_without() -> None:
    queries = [SolveQuery(model="llama-3.1-8b", job=Job(seq_len=seq_len), tokens=1e9, max_gpus=16)
               for seq_len in (8192, 512, 2048)]
    memo = TableMemo()
    shared = [solve(CATALOGUE, q, tables=memo) for q in queries]
    alone = [solve(CATALOGUE, q) for q in queries]
    assert [r.plans for r in shared] == [r.plans for r in alone]
    assert len(memo._states) == 1
