"""The "bigger GPUs" change of an explanation names up to three GPUs and counts more
(solver/explain.py MAX_NAMED_GPUS): the catalogue's 21 GPUs over an RTX 4090 made a 300-character
change, the widest column of the changes table and most of the "Why" line."""

from __future__ import annotations

from vramplan.models.catalogue.catalogue import load_catalogue
from vramplan.models.core.setup import Job
from vramplan.solver import SolveQuery, solve

CATALOGUE = load_catalogue()


def _bigger(name: str) -> list[str]:
    limit = CATALOGUE.gpu(name).memory_usable_mib
    return sorted(gpu.name for gpu in CATALOGUE.gpus.values() if gpu.memory_usable_mib > limit)


def _changes(gpu: str) -> list[str]:
    # 405B full fine-tune on one GPU: nothing fits, whatever the GPU
    result = solve(CATALOGUE, SolveQuery(model="llama-3.1-405b", job=Job(seq_len=4096), gpus=(gpu,), max_gpus=1,
                                         tokens=1e8))
    assert result.status == "infeasible" and result.explanation is not None
    return [fix.change for fix in result.explanation.mitigations]


def test_a_few_bigger_gpus_are_named():
    assert _bigger("mi325x-256gb") == ["b300-288gb", "gb300-288gb", "mi355x-288gb"]
    assert "bigger GPUs (b300-288gb, gb300-288gb, mi355x-288gb)" in _changes("mi325x-256gb")


def test_many_bigger_gpus_are_counted():
    count = len(_bigger("rtx4090-24gb"))
    assert count > 3
    assert f"bigger GPUs (the {count} with more memory than rtx4090-24gb)" in _changes("rtx4090-24gb")
