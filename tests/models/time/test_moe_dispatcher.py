"""The EP token dispatcher as a recipe option (Job.moe_dispatcher, `--moe-dispatcher`, the batch
column `moe_dispatcher`, catalogues/stacks.csv `moe_dispatcher` and stack_capabilities.csv
`moe_dispatchers`):
- the time model (models/time/moe_dispatch.py): Megatron's flex dispatcher on DeepEP / HybridEP
  sends a token once per remote node holding any of its experts over the network and once per
  rank over NVLink, the expected counts under balanced routing against a brute-force enumeration
  of every expert choice;
- ep_time.all_to_all_seconds with it (the alltoall dispatcher's unchanged), and the
  published runs: Qwen3-30B-A3B on 16 H100 with HybridEP (Megatron-Bridge 3a9559f0) and
  DeepSeek-V3 on 2,048 H800 with DeepEP-style dispatch;
- the solver's numpy mirror (solver/bound_arrays.py _ep_seconds_grid), cell for cell;
- the stack contract (megatron runs all three, torchtitan alltoall and deepep, the others alltoall
  only), the CLI option, the batch column and the launch configurations (Megatron
  --moe-token-dispatcher-type / --moe-flex-dispatcher-backend, torchtitan
  expert_parallel_comm_backend)."""

from __future__ import annotations

import itertools
import json
import tomllib
from fractions import Fraction

import pytest
from helpers.catalogue import packaged_catalogue
from helpers.cli import assert_error_line, invoke, one_line_error
from helpers.parallel_grid import assert_the_four_terms, checked_grid

from vramplan.launch.configs import LaunchModel, launch_config
from vramplan.models.architecture.parallel import dispatcher_refusal
from vramplan.models.catalogue.catalogue import load_stack_capabilities, load_stacks
from vramplan.models.catalogue.stack_contract import job_refusal
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.time.ep_time import all_to_all_seconds, ep_traffic
from vramplan.models.time.moe_dispatch import Dispatch, dispatch_shares, expected_copies, miss_probability
from vramplan.models.time.performance import performance
from vramplan.sheets.rows import INPUT_COLUMNS, parse_row
from vramplan.solver.query_fields import query_from_fields
from vramplan.solver.space_build import build_space

CATALOGUE = packaged_catalogue()
H100 = CATALOGUE.gpu("h100-sxm-80gb")
QWEN3_30B = CATALOGUE.architecture("qwen3-30b-a3b")  # 128 experts, top-8


def _brute_force(experts: int, topk: int, tp: int, node_ranks: list[int]) -> tuple[Fraction, Fraction]:
    """(NVLink, network) copies of a token on EP rank 0 (local rank 0 of node 0), averaged over every
    set of top-k experts: EP rank r holds experts [r E/ep, (r+1) E/ep); a remote node holding any of
    them gets one network copy on its local rank 0; in every node reached each expert-TP rank of a
    hit EP rank gets an NVLink copy but the rank it arrived on (expert-TP rank 0 of local rank 0)."""
    ep = sum(node_ranks)
    per_rank = experts // ep
    node_of = [n for n, ranks in enumerate(node_ranks) for _ in range(ranks)]
    first = [sum(node_ranks[:n]) for n in range(len(node_ranks))]
    nvlink = network = Fraction(0)
    choices = list(itertools.combinations(range(experts), topk))
    for chosen in choices:
        hit = {e // per_rank for e in chosen}
        nodes = {node_of[r] for r in hit}
        network += len(nodes - {0})
        for n in nodes | {0}:
            ranks_hit = sum(1 for r in hit if node_of[r] == n)
            nvlink += tp * ranks_hit - (1 if first[n] in hit else 0)
    return nvlink / len(choices), network / len(choices)


@pytest.mark.parametrize(("experts", "topk", "tp", "ep", "inside"), [
    (12, 3, 1, 6, 2),  # three nodes of two EP ranks
    (16, 4, 1, 8, 4),  # two nodes: the Qwen3 EP16 shape, small
    (12, 2, 2, 6, 3),  # expert TP 2: each hit EP rank's two TP ranks
    (10, 3, 1, 5, 2),  # a last node of one rank
    (8, 3, 1, 4, 4),  # one node: NVLink only
])
def test_expected_copies_equal_the_enumeration_of_every_expert_choice(experts, topk, tp, ep, inside) -> None:
    nodes = [inside] * (ep // inside) + ([ep % inside] if ep % inside else [])
    nvlink, network = _brute_force(experts, topk, tp, nodes)
    got = expected_copies(Dispatch("hybridep", experts, topk), tp, ep, inside)
    assert got == pytest.approx((float(nvlink), float(network)), rel=1e-12, abs=1e-15)
    if ep % inside == 0:  # N (1 - C(E - E/N, k) / C(E, k)) distinct nodes, the own node's share apart
        n = ep // inside
        distinct = n * (1 - miss_probability(experts, experts // n, topk))
        own = 1 - miss_probability(experts, experts // n, topk)
        assert got[1] == pytest.approx(distinct - own)


def test_qwen3_over_two_nodes_sends_a_quarter_of_the_alltoall_network_bytes() -> None:
    """Top-8 of 128 experts over two 8-GPU nodes: the alltoall dispatcher sends 8 x 8/16 = 4 copies a
    token across; HybridEP one when the other node holds any of the 8 (1 - C(64,8)/C(128,8))."""
    nvlink, network = dispatch_shares(Dispatch("hybridep", 128, 8), 1, 16, 8)
    assert network == pytest.approx((1 - miss_probability(128, 64, 8)) / 8)
    assert network / (8 / 16) == pytest.approx(0.249, abs=0.001)
    # NVLink: in both nodes one copy per other rank holding any of the 8 (8 experts each), the remote
    # node's forwarded ones included: 5.8 copies, more than alltoall's 8 x 7/16 = 3.5 (at 9x the rate)
    assert nvlink == pytest.approx(2 * 7 * (1 - miss_probability(128, 8, 8)) / 8)
    assert nvlink > 7 / 16


def test_alltoall_keeps_the_routed_bytes_shares() -> None:
    plan = Plan(gpu=H100.name, num_gpus=16, zero=1, ep=16, grad_accum=4)
    job = Job(seq_len=4096, stack="megatron")
    traffic = ep_traffic(QWEN3_30B, job, plan)
    assert traffic.dispatch == Dispatch("alltoall", 128, 8)
    plain = all_to_all_seconds(traffic.routed_bytes, plan.layout, H100, 8, 50.0)
    assert all_to_all_seconds(traffic.routed_bytes, plan.layout, H100, 8, 50.0, traffic.dispatch) == plain
    assert plain == pytest.approx(traffic.routed_bytes * 8 / 16 / (50.0 * 0.8 * 1e9))
    flex = ep_traffic(QWEN3_30B, job.model_copy(update={"moe_dispatcher": "hybridep"}), plan)
    assert flex.routed_bytes == traffic.routed_bytes
    deduplicated = all_to_all_seconds(flex.routed_bytes, plan.layout, H100, 8, 50.0, flex.dispatch)
    assert deduplicated == pytest.approx(plain * 0.249, rel=0.01)  # the network share sets the time


def test_the_qwen3_ep16_h100_run_with_hybridep() -> None:
    """Megatron-Bridge's qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config (3a9559f0: flex dispatcher,
    HybridEP, 8 ranks per NVLink domain): 13,011 tokens/s/GPU measured. With the all-to-alls exposed,
    14,026 predicted with HybridEP (1.08x, 1.03x before Megatron's dense-layer kernel speed,
    calibration.STACK_KERNEL_SPEED; its permutation runs inside the dispatch there,
    moe_permute_fusion_into_hybridep), 7,314 with the alltoall dispatcher (0.56x; 7,147 before the
    kernel speed, 7,487 before its permutation passes, models/time/moe_permute.py). DeepEP moves the
    same bytes over the links as HybridEP but Megatron permutes its delivered rows in passes of their
    own: 13,329 (12,783). The recipe also runs its EP overlap (overlap_moe_expert_parallel_comm),
    which hides them behind the compute (models/time/ep_time.py a2a_overlapped): 1.48x (1.39x). These figures leave out the MoE host wait
    (a full-iteration graph, models/time/moe_host.py); the run graphs only its router, and with the
    wait it reads 0.63 (0.60 at the 3.25 ms fixed host time before the 42-run fit; `moe-host-time`:
    the wait its overlap pairs with each forward is charged where the run shows less; its fp8 twins
    without the overlap read 0.95-0.96)."""
    plan = Plan(gpu=H100.name, num_gpus=16, zero=1, ep=16, grad_accum=64)
    job = Job(seq_len=4096, stack="megatron", cuda_graphs="full-iteration")
    rates = {d: performance(QWEN3_30B, job.model_copy(update={"moe_dispatcher": d}), plan, H100, 8).tokens_per_s / 16
             for d in ("alltoall", "hybridep", "deepep")}
    assert rates["alltoall"] < rates["deepep"] < rates["hybridep"]  # the same link bytes, deepep's permutation
    assert rates["hybridep"] / 13011.378 == pytest.approx(1.08, abs=0.01)
    assert rates["deepep"] / 13011.378 == pytest.approx(1.02, abs=0.01)
    assert rates["alltoall"] / 13011.378 == pytest.approx(0.56, abs=0.01)
    overlapped = performance(QWEN3_30B, job.model_copy(update={"moe_dispatcher": "hybridep", "moe_a2a_overlap": True}),
                             plan, H100, 8).tokens_per_s / 16
    assert overlapped / 13011.378 == pytest.approx(1.48, abs=0.01)
    waiting = performance(QWEN3_30B, Job(seq_len=4096, stack="megatron", moe_dispatcher="hybridep", moe_a2a_overlap=True),
                          plan, H100, 8).tokens_per_s / 16
    assert waiting / 13011.378 == pytest.approx(0.63, abs=0.01)


def test_deepseek_v3_with_deepep_dispatch() -> None:
    """DeepSeek-V3 on 2,048 H800 (tests/models/time/test_moe_kernels.py's run: 1,543 tokens/s/GPU
    reported, 783 predicted with the alltoall dispatcher): with DeepEP's dispatch (one IB copy per
    node, NVLink forwarding) and Megatron's permutation of the delivered rows (models/time/
    moe_permute.py) 999 (0.65x; 957 before Megatron's dense-layer kernel speed, calibration.STACK_KERNEL_SPEED;
    994 before that permutation; 1,047 while the bubble idled for the compute alone). Still
    short: the node-limited routing (at most 4 nodes a token; 4.6 expected remote nodes of 7 without
    it) is not in the architecture catalogue, and
    DualPipe hides the rest behind the other micro-batch's compute."""
    h800 = H100.model_copy(update={"name": "h800-sxm-80gb", "intra_node_bandwidth_gb_per_s": 200.0})
    plan = Plan(gpu=h800.name, num_gpus=2048, zero=1, micro_batch=1, precision="fp8", recompute="selective",
                pp=16, ep=64, grad_accum=120)
    job = Job(seq_len=4096, stack="megatron", moe_dispatcher="deepep")
    rate = performance(CATALOGUE.architecture("deepseek-v3"), job, plan, h800, 8, 50.0).tokens_per_s / 2048
    assert rate == pytest.approx(999, rel=0.02)
    assert expected_copies(Dispatch("deepep", 256, 8), 1, 64, 8)[1] == pytest.approx(4.63, abs=0.01)


@pytest.mark.parametrize("dispatcher", ["hybridep", "deepep"])
def test_parallel_seconds_equal_the_four_terms(dispatcher: str) -> None:
    job = Job(seq_len=4096, stack="megatron", moe_dispatcher=dispatcher)
    for plan in (Plan(gpu=H100.name, num_gpus=16, zero=1, ep=16, grad_accum=4),
                 Plan(gpu=H100.name, num_gpus=32, zero=1, tp=2, sequence_parallel=True, ep=16, grad_accum=4),
                 Plan(gpu=H100.name, num_gpus=8, zero=1, ep=8, grad_accum=4)):
        for compute in (0.0, 0.5):
            assert_the_four_terms(QWEN3_30B, job, plan, H100, compute)


def test_the_solver_grid_is_the_scalar_function_to_the_bit() -> None:
    """parallel_seconds_grid against Tables.parallel_s on every cell of a Qwen3-30B-A3B space with
    HybridEP, EP groups inside and across 8-GPU instances."""
    fields = {"tokens": 1e9, "model": "qwen3-30b-a3b", "seq_len": 4096, "global_batch": 256, "max_gpus": 64,
              "stack": "megatron", "gpus": "h100-sxm-80gb", "moe_dispatcher": "hybridep"}
    space = build_space(CATALOGUE, query_from_fields(fields))
    cells, rows = checked_grid(space)
    assert cells > 40
    assert space.tables.job.moe_dispatcher == "hybridep"
    layouts = {t.layouts[i] for t, i in rows}
    assert any(lay.ep > 8 // (lay.tp * lay.cp) for lay in layouts)  # EP groups across instances (the network share)
    assert any(1 < lay.ep <= 8 // (lay.tp * lay.cp) for lay in layouts)  # ... and inside one (NVLink only)


def test_the_contract_names_who_runs_each_dispatcher() -> None:
    assert {preset.moe_dispatcher for preset in load_stacks().values()} == {"alltoall"}  # each release's default
    caps = load_stack_capabilities()
    assert {name: sorted(c.moe_dispatchers) for name, c in caps.items() if c.moe_dispatchers != {"alltoall"}} == {
        "megatron": ["alltoall", "deepep", "hybridep"], "torchtitan": ["alltoall", "deepep"],
        "custom": ["alltoall", "deepep", "hybridep"]}
    for stack in ("hf", "deepspeed", "torchtune", "litgpt", "unsloth", "torchtitan-root-fsdp"):
        job = Job(seq_len=4096, stack=stack, moe_dispatcher="deepep")
        assert job_refusal(caps[stack], job) == ("moe_dispatcher", "deepep", "the deepep MoE token dispatcher")
    titan = Job(seq_len=4096, stack="torchtitan", moe_dispatcher="hybridep")
    assert job_refusal(caps["torchtitan"], titan) == ("moe_dispatcher", "hybridep", "the hybridep MoE token dispatcher")
    assert job_refusal(caps["torchtitan"], titan.model_copy(update={"moe_dispatcher": "deepep"})) is None
    assert job_refusal(caps["megatron"], Job(seq_len=4096, stack="megatron", moe_dispatcher="hybridep")) is None


ESTIMATE = ["estimate", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm-80gb", "--num-gpus", "16", "--ep", "16",
            "--zero", "1", "--seq-len", "4096", "--micro-batch", "1", "--recompute", "none", "--format", "json"]


def test_the_cli_option_round_trips_and_a_stack_without_it_refuses_in_one_line() -> None:
    runs = {}
    for options in ((), ("--moe-dispatcher", "alltoall"), ("--moe-dispatcher", "hybridep")):
        result = invoke(*ESTIMATE, "--stack", "megatron", *options)
        assert result.exit_code in (0, 3), (result.exit_code, result.stderr)
        runs[options[-1] if options else "default"] = json.loads(result.stdout)
    assert runs["default"]["job"]["moe_dispatcher"] == runs["alltoall"]["job"]["moe_dispatcher"] == "alltoall"
    assert runs["hybridep"]["job"]["moe_dispatcher"] == "hybridep"
    assert runs["hybridep"]["performance"]["tokens_per_s"] > runs["alltoall"]["performance"]["tokens_per_s"]
    # in memory, HybridEP's own buffers (models/memory/dispatcher_buffers.py), nothing else
    buffers = runs["hybridep"]["memory"]["overhead"]["dispatcher_buffers_bytes"]
    assert buffers > 0 and runs["alltoall"]["memory"]["overhead"]["dispatcher_buffers_bytes"] == 0
    assert runs["hybridep"]["memory"]["total_bytes"] - runs["alltoall"]["memory"]["total_bytes"] == buffers
    refused = invoke(*ESTIMATE, "--stack", "hf", "--moe-dispatcher", "hybridep")
    assert refused.exit_code == 2
    assert_error_line(refused, "stack='hf'", "hybridep MoE token dispatcher", "moe_dispatcher=hybridep")


@pytest.mark.parametrize(("cell", "value"), [("", "alltoall"), ("hybridep", "hybridep"), ("deepep", "deepep")])
def test_the_batch_column_is_the_jobs_dispatcher(cell, value) -> None:
    assert "moe_dispatcher" in INPUT_COLUMNS
    query = parse_row({"model": "qwen3-30b-a3b", "seq_len": "4096", "stack": "megatron", "moe_dispatcher": cell})
    assert query.job.moe_dispatcher == value


def test_the_launch_configs_carry_the_published_keys() -> None:
    plan = Plan(gpu=H100.name, num_gpus=16, zero=1, ep=16, grad_accum=4)
    megatron = launch_config(Job(seq_len=4096, stack="megatron", moe_dispatcher="hybridep"), plan, LaunchModel(48)).text
    # core_v0.19.0 transformer_config.py moe_token_dispatcher_type / moe_flex_dispatcher_backend
    assert "  --moe-token-dispatcher-type flex\n  --moe-flex-dispatcher-backend hybridep\n" in megatron
    plain = launch_config(Job(seq_len=4096, stack="megatron"), plan, LaunchModel(48)).text
    assert "--moe-token-dispatcher-type alltoall" in plain and "--moe-flex-dispatcher-backend" not in plain
    dense = launch_config(Job(seq_len=4096, stack="megatron"), plan.model_copy(update={"ep": 1}), LaunchModel(48)).text
    assert "--moe-token-dispatcher-type" not in dense
    titan = tomllib.loads(launch_config(Job(seq_len=4096, stack="torchtitan", moe_dispatcher="deepep"),
                                        plan.model_copy(update={"zero": 2}), LaunchModel(48)).text)
    assert titan["parallelism"]["expert_parallel_comm_backend"] == "deepep"  # v0.2.2 Parallelism field
    with pytest.raises(VramplanError, match="moe_dispatcher"):  # FSDP beside EP, as torchtitan runs it
        launch_config(Job(seq_len=4096, stack="torchtitan", moe_dispatcher="hybridep"), plan.model_copy(update={"zero": 2}),
                      LaunchModel(48))


def test_torchtitan_runs_deepep_for_deepseek_models_only(catalogue) -> None:
    """torchtitan v0.2.2 builds DeepEPMoE in its DeepSeek-V3 model alone (deepseek_v3/model/args.py
    L116, model.py L358-362); Qwen3 ignores the flag and runs the all-to-all (qwen3/model/model.py
    L368, qwen3/infra/parallelize.py L111-119): refused for Qwen3, as a stack without DeepEP refuses
    it, in estimate and solve alike; run for DeepSeek-V2-Lite (its "16B" flavour) and by Megatron."""
    qwen, lite = catalogue.architecture("qwen3-30b-a3b"), catalogue.architecture("deepseek-v2-lite")
    deepep = Job(seq_len=4096, stack="torchtitan", moe_dispatcher="deepep")
    refusal = dispatcher_refusal(qwen, deepep)
    assert refusal is not None and refusal.field == "stack" and "all-to-all" in str(refusal)
    assert dispatcher_refusal(lite, deepep) is None
    assert dispatcher_refusal(qwen, deepep.model_copy(update={"stack": "megatron"})) is None
    assert dispatcher_refusal(qwen, deepep.model_copy(update={"moe_dispatcher": "alltoall"})) is None
    base = ["--stack", "torchtitan", "--moe-dispatcher", "deepep", "--seq-len", "4096", "--gpu", "h100-sxm-80gb"]
    message = one_line_error(invoke("estimate", "--model", "qwen3-30b-a3b", "--num-gpus", "8", "--ep", "8", "--zero", "3",
                                    *base))
    assert "stack='torchtitan'" in message and "moe_dispatcher=deepep" in message and "DeepSeek (MLA MoE)" in message
    message = one_line_error(invoke("solve", "--model", "qwen3-30b-a3b", "--max-gpus", "8", "--tokens", "1e9", *base))
    assert "moe_dispatcher=deepep" in message
    # a search over several stacks leaves torchtitan out and answers with the others
    solved = invoke("solve", "--model", "qwen3-30b-a3b", "--stack", "megatron,torchtitan", "--moe-dispatcher", "deepep",
                    "--gpu", "h100-sxm-80gb", "--global-batch", "64", "--max-gpus", "32", "--tokens", "1e9", "--format", "json")
    assert solved.exit_code == 0 and {p["plan"]["stack"] for p in json.loads(solved.stdout)["plans"]} == {"megatron"}
    assert invoke("estimate", "--model", "deepseek-v2-lite", "--num-gpus", "8", "--ep", "8", "--zero", "3",
                  *base).exit_code in (0, 3)
