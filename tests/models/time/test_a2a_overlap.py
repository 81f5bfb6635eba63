"""Megatron's MoE all-to-all overlap (Job.moe_a2a_overlap, --overlap-moe-expert-parallel-comm): the
EP all-to-alls run beside another micro-batch's compute (models/time/ep_time.py a2a_overlapped), a
pair holds one layer more (models/memory/activations.py a2a_pair_bytes), and the stack contract
keeps what Megatron refuses beside it (models/catalogue/stack_contract.py a2a_overlap_refusal:
NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/transformer_config.py L3002-3046)."""

from __future__ import annotations

import pytest
from helpers.cli import invoke, one_line_error
from helpers.parallel_grid import assert_the_four_terms

from vramplan.launch.configs import LaunchModel, launch_config
from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.catalogue.stack import with_preset
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.activations import activations, microbatch_activations
from vramplan.models.time.ep_time import all_to_all_seconds, ep_time_s, ep_traffic
from vramplan.solver.api import solve
from vramplan.solver.query import Pins, SolveQuery


def _job(**fields) -> Job:
    return Job(**with_preset({"stack": "megatron", "seq_len": 4096, **fields}, load_stacks()))


# Qwen3-30B-A3B on two 8-GPU H100 nodes, EP 16: the all-to-alls cross the network
PLAN = Plan(gpu="h100-sxm-80gb", num_gpus=16, ep=16, zero=1, micro_batch=1, grad_accum=4, precision="bf16")


def test_the_all_to_alls_hide_behind_the_compute_and_only_beyond_it(catalogue) -> None:
    """EP time with the overlap is the exposed all-to-all beyond the step's compute, the expert GEMMs'
    and permutations' time unchanged: behind 10 s of compute none of it shows, behind none all of it."""
    arch, gpu = catalogue.architecture("qwen3-30b-a3b"), catalogue.gpu("h100-sxm-80gb")
    # a full-iteration graph: no MoE forward waits for the host (models/time/moe_host.py, test_moe_host.py)
    plain, overlapped = _job(cuda_graphs="full-iteration"), _job(moe_a2a_overlap=True, cuda_graphs="full-iteration")
    a2a = all_to_all_seconds(ep_traffic(arch, plain, PLAN).routed_bytes, PLAN.layout, gpu, 8, 50.0)
    exposed = ep_time_s(arch, plain, PLAN, gpu, 8, 50.0)
    assert 0 < a2a < exposed  # the all-to-all is part of the EP time, beside the expert GEMMs' shape
    assert ep_time_s(arch, overlapped, PLAN, gpu, 8, 50.0, compute_s=10.0) == pytest.approx(exposed - a2a)
    assert ep_time_s(arch, overlapped, PLAN, gpu, 8, 50.0, compute_s=0.0) == exposed
    assert ep_time_s(arch, overlapped, PLAN, gpu, 8, 50.0, compute_s=a2a / 2) == pytest.approx(exposed - a2a / 2)
    assert ep_time_s(arch, plain, PLAN, gpu, 8, 50.0, compute_s=10.0) == exposed  # without it, all exposed
    assert_the_four_terms(arch, overlapped, PLAN, gpu, compute_s=0.05)


def test_a_pair_holds_one_layer_more(catalogue) -> None:
    """While one micro-batch's forward layer runs beside another's backward layer, the rank holds the
    forward's new layer before the backward's is released: one layer of the kind that keeps the most,
    without and with a pipeline (whose in-flight chunks do not change: test_pipeline_buffers.py)."""
    arch = catalogue.architecture("qwen3-30b-a3b")
    for plan in (PLAN, PLAN.model_copy(update={"pp": 2, "vpp": 2, "num_gpus": 32, "grad_accum": 4})):
        plain, overlapped = _job(), _job(moe_a2a_overlap=True)
        layer = microbatch_activations(arch, plain, plan).per_layer_bytes
        assert layer > 0
        assert activations(arch, overlapped, plan).layers_bytes == activations(arch, plain, plan).layers_bytes + layer


def test_megatrons_refusals_beside_it_are_the_contracts() -> None:
    """transformer_config.py L3002-3046: EP > 1, virtual stages under a pipeline, no full recompute, a
    16-bit model; and only Megatron (and the what-if stack) has the switch."""
    base = ["estimate", "--model", "qwen3-30b-a3b", "--seq-len", "4096", "--gpu", "h100-sxm-80gb", "--num-gpus", "16",
            "--stack", "megatron", "--moe-a2a-overlap"]
    cases = [((), "ep=1", "without expert parallelism"),
             (("--ep", "8", "--pp", "2", "--grad-accum", "4"), "vpp=1", "pipeline without interleaved stages"),
             (("--ep", "8", "--recompute", "full"), "recompute=full", "full recompute with MoE all-to-all overlap"),
             (("--ep", "8", "--precision", "fp32"), "precision=fp32", "MoE all-to-all overlap in fp32")]
    for extra, value, feature in cases:
        message = one_line_error(invoke(*base, *extra))
        assert value in message and feature in message, (extra, message)
    assert invoke(*base, "--ep", "8", "--zero", "1").exit_code in (0, 3)
    assert invoke(*base, "--ep", "8", "--zero", "1", "--pp", "2", "--vpp", "2", "--grad-accum", "4").exit_code in (0, 3)
    message = one_line_error(invoke(*[a if a != "megatron" else "torchtitan" for a in base], "--ep", "8"))
    assert "stack='torchtitan'" in message and "moe_a2a_overlap=True" in message


def test_solve_plans_only_what_megatron_runs_with_it_and_the_engines_agree(catalogue) -> None:
    job = _job(moe_a2a_overlap=True)
    query = SolveQuery(model="qwen3-30b-a3b", job=job, global_batch=128, tokens=1e9, gpus=("h100-sxm-80gb",),
                       max_gpus=32, top_k=5, objective="throughput")
    cpsat = solve(catalogue, query, explain_infeasible=False)
    brute = solve(catalogue, query.model_copy(update={"engine": "brute"}), explain_infeasible=False)
    assert cpsat.status == brute.status == "optimal"
    assert [p.plan for p in cpsat.plans] == [p.plan for p in brute.plans]
    assert all(p.plan.ep > 1 and p.plan.recompute != "full" and (p.plan.pp == 1 or p.plan.vpp > 1) for p in cpsat.plans)
    interleaved = solve(catalogue, query.model_copy(update={"pins": Pins(pp=2, vpp=2)}), explain_infeasible=False)
    assert interleaved.plans and all(p.plan.pp == 2 and p.plan.vpp == 2 for p in interleaved.plans)
    # where no MoE forward waits for the host (a full-iteration graph) the overlap only hides time: the
    # same plan without it is never faster (with the host wait the paired backward is launched after
    # each sync too, and the overlap can cost more than it hides: models/time/moe_host.py)
    graphed = query.model_copy(update={"job": _job(moe_a2a_overlap=True, cuda_graphs="full-iteration")})
    best = solve(catalogue, graphed, explain_infeasible=False).plans[0]
    without = solve(catalogue, graphed.model_copy(update={"job": _job(cuda_graphs="full-iteration"), "pins": Pins(
        **{name: getattr(best.plan, name) for name in ("tp", "pp", "cp", "ep", "vpp", "zero", "recompute", "precision",
                                                       "micro_batch", "num_gpus")})}), explain_infeasible=False)
    assert without.plans[0].objective_value <= best.objective_value


def test_the_launch_configuration_turns_it_on() -> None:
    plan = PLAN.model_copy(update={"ep": 8})
    text = launch_config(_job(moe_a2a_overlap=True), plan, LaunchModel(48)).text
    assert "--overlap-moe-expert-parallel-comm" in text and "--delay-wgrad-compute" in text  # Megatron-Bridge's pairing
    assert "--overlap-moe-expert-parallel-comm" not in launch_config(_job(), plan, LaunchModel(48)).text


def test_what_no_other_micro_batch_runs_beside_stays_exposed(catalogue) -> None:
    """Without a pipeline the first micro-batch's forward and the last one's backward run alone
    (combined_1f1b.py): at one micro-batch a step the overlap hides nothing, at m it leaves 1/m of
    what the compute would hide; interleaved, the first rank's warm-up and cool-down chunks."""
    from vramplan.models.time.ep_time import a2a_unhidden_share
    from vramplan.models.time.parallel_time import parallel_time
    arch, gpu = catalogue.architecture("qwen3-30b-a3b"), catalogue.gpu("h100-sxm-80gb")
    assert a2a_unhidden_share(1, 1, 1) == 1.0 and a2a_unhidden_share(1, 1, 8) == 1 / 8
    assert a2a_unhidden_share(2, 2, 4) == (2 + 2 + 1) / 8 and a2a_unhidden_share(4, 2, 4) == 1.0

    def step(plan: Plan, overlap: bool) -> float:  # no MoE forward waits for the host (test_moe_host.py)
        job = _job(moe_a2a_overlap=overlap, cuda_graphs="full-iteration")
        return parallel_time(arch, job, plan, gpu, 8, 50.0, compute_s=0.5).total_s

    one = PLAN.model_copy(update={"grad_accum": 1})
    assert step(one, True) == pytest.approx(step(one, False))  # nothing to pair with
    many = PLAN.model_copy(update={"grad_accum": 64})
    a2a = all_to_all_seconds(ep_traffic(arch, _job(), many).routed_bytes, many.layout, gpu, 8, 50.0)
    assert step(many, False) - step(many, True) == pytest.approx(min(a2a, 0.5) * 63 / 64)


def test_an_explanation_offers_dropping_the_overlap_and_nothing_it_refuses(catalogue) -> None:
    """DeepSeek-V3 in bf16 on at most 256 H100 fits only with a pipeline of 16 stages and full
    recompute, which the overlap refuses: the explanation's smallest change is dropping it, and it
    never offers full recompute or activation offload, which Megatron does not run beside it."""
    job = _job(moe_a2a_overlap=True)
    query = SolveQuery(model="deepseek-v3", job=job, global_batch=1024, tokens=1e9, gpus=("h100-sxm-80gb",),
                       max_gpus=256, pins=Pins(precision="bf16"))
    result = solve(catalogue, query)
    assert result.status == "infeasible"
    changes = {m.change: m for m in result.explanation.mitigations}
    dropped = changes["no MoE all-to-all overlap (--no-moe-a2a-overlap)"]
    assert dropped.fits and dropped.plan is not None
    assert not any("--recompute full" in change or "--activation-offload" in change for change in changes)
    assert result.explanation.smallest_change.startswith("no MoE all-to-all overlap")


@pytest.mark.parametrize("stack", ["megatron", "any", "hf"])
def test_a_dense_model_is_told_it_has_no_all_to_all_to_overlap(stack: str) -> None:
    """Once "needs expert parallelism (ep=1)", blamed on one stack even under --stack any (hf's), and
    asking for an EP degree a dense model cannot have: the option itself is refused, in solve and estimate."""
    expected = ("moe_a2a_overlap=True: llama-3.1-8b is a dense model (no expert all-to-all to overlap); "
                "drop --moe-a2a-overlap")
    message = one_line_error(invoke("solve", "--model", "llama-3.1-8b", "--stack", stack, "--moe-a2a-overlap",
                                    "--gpu", "h100-sxm-80gb", "--global-batch", "64", "--max-gpus", "16", "--tokens", "1e9"))
    assert expected in message
    assert expected in one_line_error(invoke("estimate", "--model", "llama-3.1-8b", "--stack", stack.replace("any", "megatron"),
                                             "--moe-a2a-overlap", "--num-gpus", "8"))
