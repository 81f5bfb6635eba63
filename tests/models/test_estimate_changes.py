"""An estimate that does not fit lists the single changes that make it fit (models/estimate_changes.py).

Each listed change is checked by estimating the changed plan again; each candidate that is not
listed either does not fit or is one the stack refuses."""

from __future__ import annotations

import pytest

from vramplan.models.catalogue.catalogue import load_catalogue
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.estimate import estimate
from vramplan.models.estimate_changes import single_changes

CATALOGUE = load_catalogue()
TOKENS = 1e9


def _fits(job: Job, plan: Plan) -> bool | None:
    """Whether the plan fits (None: the stack does not run it)."""
    try:
        return estimate(CATALOGUE, "llama-3.1-8b", job, plan, TOKENS, fitting_changes=False).memory.fits
    except VramplanError:
        return None


@pytest.mark.parametrize(("stack", "plan"), [
    # 8B full fine-tune under DDP on 64 H100: the optimizer states (12 bytes a parameter) do not fit
    ("hf", Plan(gpu="h100-sxm-80gb", num_gpus=64)),
    # one H100: only an offload to host RAM takes the states off the GPU
    ("hf", Plan(gpu="h100-sxm-80gb", num_gpus=1)),
    # torchtitan (FSDP2) refuses ZeRO-1 and the optimizer-only offload; 4k x 2 activations without recompute
    ("torchtitan", Plan(gpu="h100-sxm-80gb", num_gpus=8, micro_batch=2)),
    ("deepspeed", Plan(gpu="h100-sxm-80gb", num_gpus=8, micro_batch=2)),
])
def test_listed_changes_fit_and_the_others_do_not(stack, plan):
    job = Job(stack=stack, seq_len=4096)
    result = estimate(CATALOGUE, "llama-3.1-8b", job, plan, TOKENS)
    assert not result.memory.fits
    listed = {fix.change: fix for fix in result.fitting_changes}
    candidates = list(single_changes(plan))
    assert candidates
    for change, changed in candidates:
        fits = _fits(job, changed)
        assert (change in listed) == bool(fits), (change, fits)
        if change in listed:
            fix = listed[change]
            assert fix.total_bytes <= fix.limit_bytes
            assert fix.plan.model_copy(update={"offering": None}) == changed.model_copy(update={"offering": None})
    # least disruptive first: the candidates' own order
    assert list(listed) == [change for change, _ in candidates if change in listed]


def test_the_changes_of_the_8b_ddp_run():
    """ZeRO over 64 ranks shards the states; the offload needs ZeRO-1 at least (DeepSpeed
    offload_optimizer), and is said with it."""
    result = estimate(CATALOGUE, "llama-3.1-8b", Job(), Plan(gpu="h100-sxm-80gb", num_gpus=64), TOKENS)
    changes = [fix.change for fix in result.fitting_changes]
    assert changes[:3] == ["--zero 1", "--zero 2", "--zero 3"]
    assert "--zero 1 --offload optimizer" in changes
    zero3 = result.fitting_changes[2]
    assert zero3.plan.zero == 3 and zero3.plan.num_gpus == 64 and zero3.plan.offering is not None
    assert zero3.total_bytes < result.memory.total_bytes


def test_candidates_keep_the_global_batch_and_skip_what_does_nothing():
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=1, micro_batch=4, grad_accum=2, zero=0, recompute="full",
                offload="none")
    changes = dict(single_changes(plan))
    assert not any(change.startswith("--zero 1") and "offload" not in change for change in changes)  # one rank: no ZeRO
    assert not any("--recompute" in change for change in changes)  # full already
    smaller = changes["--micro-batch 1 --grad-accum 8"]
    assert smaller.micro_batch * smaller.grad_accum * smaller.dp == plan.micro_batch * plan.grad_accum * plan.dp
    assert changes["--zero 3 --offload optimizer+params"].zero == 3


def test_a_plan_that_fits_or_no_changes_asked_lists_none():
    fits = estimate(CATALOGUE, "llama-3.1-8b", Job(), Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=3), TOKENS)
    assert fits.memory.fits and fits.fitting_changes == []
    unasked = estimate(CATALOGUE, "llama-3.1-8b", Job(), Plan(gpu="h100-sxm-80gb", num_gpus=64), TOKENS,
                       fitting_changes=False)
    assert not unasked.memory.fits and unasked.fitting_changes == []
    with pytest.raises(VramplanError, match="fitting_changes"):
        estimate(CATALOGUE, "llama-3.1-8b", Job(), Plan(gpu="h100-sxm-80gb"), TOKENS, fitting_changes="yes")
