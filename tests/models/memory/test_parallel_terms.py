"""The factored memory terms the solver tabulates add up to the estimate's total, exactly."""

from __future__ import annotations

import random

import pytest
from helpers.catalogue import packaged_catalogue

from vramplan.models.architecture.parallel import candidate_stages
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.memory import memory_per_gpu, stage_memory
from vramplan.models.memory.memory_terms import memory_terms

# Stacks of one kind of layer, and mixed ones: DeepSeek's first dense layer, Gemma's local/global
# attention, Llama 4's alternating MoE layers (models.parallel.candidate_stages).
MODELS = ("llama-3.1-8b", "llama-3.1-70b", "gpt2-1.5b", "mixtral-8x7b", "qwen2.5-7b", "deepseek-v2-lite", "gemma-2-9b",
          "gemma-3-27b", "llama-4-maverick")
GPU = packaged_catalogue().gpu("h100-sxm-80gb")


def random_case(rng: random.Random) -> tuple[str, Job, Plan] | None:
    model = rng.choice([m for m in MODELS if m in packaged_catalogue().architectures])
    arch = packaged_catalogue().architecture(model)
    tp, pp, cp = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 3, 4, 8]), rng.choice([1, 1, 2, 4])
    dp = rng.choice([1, 2, 4, 8])
    ep = rng.choice([e for e in (1, 2, 4, 8) if arch.num_experts % e == 0 and (dp * cp) % e == 0])
    vpp = rng.choice([1, 1, 2, 4]) if pp > 1 else 1
    # megatron: the optimizer step's fp32 gradient copies (accounting zero); torchtitan: torch
    # pipelining's receive buffers (pp > 1); custom: neither
    job = Job(seq_len=rng.choice([1024, 2048, 4096]), kernels=rng.choice(["eager", "fused"]),
              accounting=rng.choice(["zero", "hf"]), stack=rng.choice(["custom", "megatron", "torchtitan"]))
    zero = rng.choice([0, 1, 2, 3])
    try:
        plan = Plan(gpu=GPU.name, num_gpus=tp * pp * cp * dp, tp=tp, pp=pp, cp=cp, ep=ep, vpp=vpp,
                    sequence_parallel=rng.random() < 0.5, zero=zero, recompute=rng.choice(["none", "selective", "full"]),
                    precision=rng.choice(["bf16", "fp8"]), micro_batch=rng.choice([1, 2, 4]),
                    grad_accum=rng.choice([1, 3, 8, 16]), offload=rng.choice(["none", "optimizer"]) if zero else "none")
        memory_per_gpu(arch, job, plan, GPU)
    except VramplanError:
        return None
    return model, job, plan


def cases(count: int) -> list[tuple[str, Job, Plan]]:
    rng = random.Random(8)
    found: list[tuple[str, Job, Plan]] = []
    while len(found) < count:
        case = random_case(rng)
        if case is not None:
            found.append(case)
    return found


@pytest.mark.parametrize(("model", "job", "plan"), cases(150))
def test_terms_sum_to_every_stage_total_and_the_max_is_the_estimate(catalogue, model: str, job: Job, plan: Plan) -> None:
    arch = catalogue.architecture(model)
    totals, hosts = {}, {}
    for stage in range(plan.pp):
        terms = memory_terms(arch, job, plan, stage)
        assert all(value >= 0 for value in terms.values()), terms
        totals[stage] = sum(terms.values())
        stage_total = stage_memory(arch, job, plan, GPU, None, stage)
        assert totals[stage] == stage_total.total_bytes
        hosts[stage] = stage_total.host_bytes
    worst = memory_per_gpu(arch, job, plan, GPU)
    assert worst.total_bytes == max(totals.values())  # the candidate stages find the most loaded rank
    assert worst.stage in candidate_stages(arch, plan.pp)
    assert totals[worst.stage] == worst.total_bytes
    assert worst.host_bytes == max(hosts.values())  # the node's host RAM: the rank that offloads the most
