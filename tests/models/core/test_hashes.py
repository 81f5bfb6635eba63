"""Architecture and Job (models/core) hash few fields and still agree with equality."""

from __future__ import annotations

from vramplan.models.core.setup import Job


def test_architecture_and_job_hashes_agree_with_equality(catalogue) -> None:
    """Architecture and Job hash a few fields (the functools caches of models/ hash them hundreds
    of thousands of times a batch): equal values must still hash alike, and values that differ
    only outside those fields must stay distinct keys."""
    arch = catalogue.architectures["llama-3.1-8b"]
    twin = type(arch).model_validate(arch.model_dump())
    deeper = arch.model_copy(update={"num_layers": arch.num_layers + 1})
    assert twin is not arch and twin == arch and hash(twin) == hash(arch)
    assert deeper != arch and {arch: 1, deeper: 2, twin: 3} == {arch: 3, deeper: 2}
    job, other = Job(seq_len=4096), Job(seq_len=4096, loss="fused")
    assert Job(seq_len=4096) == job and hash(Job(seq_len=4096)) == hash(job)
    assert other != job and len({job: 1, other: 2, Job(seq_len=4096): 3}) == 2
