"""Plans the named stack can run (catalogues/stack_capabilities.csv, docs/stacks.md).

Before the contract a stack was a recipe preset only: `solve --model llama-3.1-405b --stack
deepspeed` answered TP4+SP x PP4 x DP2 (the HF Trainer with DeepSpeed never builds a pipeline,
and DeepSpeed's own pipeline engine refuses ZeRO-2/3), `--stack torchtune` and the default `hf`
answered pipelines neither has. Now `solve` searches only what the job's stack runs, `estimate`
of anything else is bad input naming the stack and the feature, and `custom` allows everything.
"""

from __future__ import annotations

import json
import random
import re

import pytest
from helpers.cli import invoke, one_line_error
from helpers.queries import random_query

from vramplan.models.catalogue.catalogue import load_catalogue, load_stack_capabilities, load_stacks
from vramplan.models.catalogue.stack_contract import plan_refusal
from vramplan.models.core.choices import STACKS
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.solver.api import solve
from vramplan.solver.query import Pins, SolveQuery
from vramplan.solver.query_fields import job_from_fields

CAPS = load_stack_capabilities()


def test_every_stack_has_one_contract_with_sources():
    assert set(CAPS) == set(load_stacks()) == set(STACKS)
    for name, caps in CAPS.items():
        if name == "custom":
            continue
        assert len(caps.source) > 500, name  # a citation per fact: file and symbol at a named release
        for fact in ("tp", "pp", "cp", "ep", "zero", "offload", "lora", "fp8"):
            assert re.search(rf"\b{fact}\b", caps.source.lower()), (name, fact)
    custom = CAPS["custom"]
    assert custom.tp and custom.pp and custom.vpp and custom.sequence_parallel and custom.zero_stages == {0, 1, 2, 3}


@pytest.mark.parametrize(("args", "feature"), [
    (["--num-gpus", "8", "--pp", "2"], "pipeline parallelism"),  # hf: the Trainer has no training pipeline
    (["--num-gpus", "8", "--tp", "8", "--sequence-parallel"], "Megatron sequence parallelism"),
    (["--num-gpus", "8", "--stack", "deepspeed", "--pp", "2"], "pipeline parallelism"),
    (["--num-gpus", "8", "--stack", "megatron", "--zero", "3", "--pp", "2"], "Megatron-FSDP (ZeRO-3) with pipeline parallelism"),
    (["--num-gpus", "8", "--stack", "megatron", "--zero", "3", "--offload", "optimizer"],
     "offload optimizer with Megatron-FSDP (ZeRO-3)"),
    (["--num-gpus", "8", "--stack", "torchtune", "--cp", "2"], "context parallelism"),
    (["--stack", "torchtitan", "--method", "qlora"], "qlora training"),
    (["--num-gpus", "16", "--stack", "unsloth", "--offering", "lambda/gpu_8x_h100_sxm5"], "more than one instance"),
    (["--num-gpus", "2", "--stack", "litgpt", "--method", "qlora"], "qlora on more than one GPU"),
    # torchtune v0.6.1's recipes raise without activation checkpointing; the writer refused what solve planned
    (["--num-gpus", "8", "--stack", "torchtune", "--activation-offload", "--recompute", "none"],
     "none recompute with activation offload"),
    # the deepspeed stack's launch file is the DeepSpeed JSON, which carries none of these (--stack hf writes them)
    (["--num-gpus", "8", "--stack", "deepspeed", "--cp", "2"], "context parallelism"),
    (["--num-gpus", "8", "--stack", "deepspeed", "--precision", "fp8"], "fp8 training"),
    (["--num-gpus", "8", "--stack", "deepspeed", "--compile"], "torch.compile"),
    # the optimizer in the backward: torchtune's full-finetune recipes only (its LoRA recipes have no
    # optimizer_in_bwd key: the plan's missing gradient buffer was not what ran); torchtitan's
    # early_step_in_backward raises under PP and EP; the HF Trainer has no such option
    (["--num-gpus", "8", "--stack", "torchtune", "--method", "lora", "--optimizer-in-backward"],
     "the optimizer step in the backward with lora training"),
    (["--num-gpus", "8", "--stack", "torchtitan", "--pp", "2", "--zero", "3", "--optimizer-in-backward"],
     "pipeline parallelism with the optimizer step in the backward"),
    (["--num-gpus", "1", "--optimizer-in-backward"], "the optimizer step in the backward"),
    # the optimizers each stack builds (its writer refused what estimate accepted), and Megatron's CPU
    # offload, which needs its precision-aware optimizer (Adam only)
    (["--num-gpus", "8", "--stack", "megatron", "--optimizer", "adamw-8bit"], "the adamw-8bit optimizer"),
    (["--num-gpus", "8", "--stack", "torchtitan", "--optimizer", "sgd"], "the sgd optimizer"),
    (["--num-gpus", "8", "--stack", "megatron", "--zero", "1", "--optimizer", "sgd", "--offload", "optimizer"],
     "offload optimizer with the sgd optimizer"),
])
def test_estimate_of_what_the_stack_does_not_run_names_the_stack_and_the_feature(args, feature):
    base = ["estimate", "--model", "llama-3.1-8b", "--seq-len", "4096", "--gpu", "h100-sxm-80gb"]
    line = one_line_error(invoke(*base, *args))
    stack = args[args.index("--stack") + 1] if "--stack" in args else "hf"
    assert f"stack='{stack}'" in line and f"does not run {feature}" in line
    assert invoke(*base, *[a for a in args if a not in ("--stack", stack)], "--stack", "custom").exit_code in (0, 3)


@pytest.mark.parametrize("stack", [s for s in STACKS if s != "custom"])
def test_solve_proposes_only_plans_the_stack_runs(catalogue, stack):
    # Unsloth trains on one node without sharding: a 70B full fine-tune does not fit it, LoRA does.
    model, method = ("llama-3.1-8b", "lora") if stack == "unsloth" else ("llama-3.1-70b", "full")
    query = SolveQuery(model=model, job=Job(method=method, seq_len=8192, stack=stack), global_batch=64, tokens=2e9,
                       gpus=("h100-sxm-80gb",), max_gpus=64, top_k=3)
    result = solve(catalogue, query)
    assert result.plans, (stack, result.status)
    for solved in result.plans:
        plan = Plan(**{k: v for k, v in solved.plan.model_dump().items() if k in Plan.model_fields})
        per_instance = catalogue.offering(solved.plan.offering).num_gpus
        assert plan_refusal(CAPS[stack], query.job, plan, per_instance,
                            catalogue.architecture(model).model_type) is None, (stack, solved.plan)


def test_the_405b_question_of_the_issue_gets_a_plan_deepspeed_runs(catalogue):
    """`solve --model llama-3.1-405b --stack deepspeed` returned TP4+SP x PP4 x DP2 under ZeRO-2."""
    job = Job(seq_len=8192, stack="deepspeed")
    plan = solve(catalogue, SolveQuery(model="llama-3.1-405b", job=job, gpus=("h100-sxm-80gb",))).plans[0].plan
    assert plan.pp == 1 and not plan.sequence_parallel
    custom = solve(catalogue, SolveQuery(model="llama-3.1-405b", job=job.model_copy(update={"stack": "custom"}),
                                         gpus=("h100-sxm-80gb",))).plans[0]
    assert custom.plan.pp > 1 or custom.plan.sequence_parallel  # what deepspeed was offered before


def test_a_pin_the_stack_does_not_run_is_one_line_naming_it(catalogue):
    query = SolveQuery(model="llama-3.1-8b", job=Job(seq_len=4096, stack="torchtune"), pins=Pins(pp=2))
    with pytest.raises(VramplanError, match="stack='torchtune'.*does not run pipeline parallelism"):
        solve(catalogue, query)


@pytest.mark.parametrize("seed", range(16))
def test_cpsat_agrees_with_brute_force_under_every_stack(catalogue, seed):
    """The oracle of solver/test_engines.py on each stack's narrower space: equal optima (or the
    same one-line refusal of a pin the stack does not run)."""
    rng = random.Random(1000 + seed)
    query = random_query(rng)
    query = query.model_copy(update={"job": query.job.model_copy(update={"stack": rng.choice(STACKS)}),
                                     "time_limit_s": 60.0})
    try:
        fast = solve(catalogue, query, explain_infeasible=False)
    except VramplanError as error:
        with pytest.raises(VramplanError, match=error.reason[:40].replace("(", r"\(").replace(")", r"\)")):
            solve(catalogue, query.model_copy(update={"engine": "brute"}), explain_infeasible=False)
        return
    slow = solve(catalogue, query.model_copy(update={"engine": "brute"}), explain_infeasible=False)
    assert fast.status == slow.status
    if fast.plans:
        assert fast.plans[0].objective_value == pytest.approx(slow.plans[0].objective_value, rel=1e-9)
        caps = CAPS[query.job.stack]
        for solved in fast.plans:
            plan = Plan(**{k: v for k, v in solved.plan.model_dump().items() if k in Plan.model_fields})
            assert plan_refusal(caps, query.job, plan, catalogue.offering(solved.plan.offering).num_gpus,
                                catalogue.architecture(query.model).model_type) is None


def test_a_batch_row_asking_for_what_its_stack_does_not_run_is_that_rows_error(tmp_path):
    from helpers.cli import invoke_batch
    from helpers.sheets import read_rows, write_csv

    jobs = write_csv(tmp_path / "jobs.csv", [["llama-3.1-8b", 4096, "torchtune", 2], ["llama-3.1-8b", 4096, "megatron", 2]],
                     ["model", "seq_len", "stack", "pp"])
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), quiet=True)
    assert result.exit_code == 3, result.stderr  # one row is an error, the other is solved
    refused, solved = read_rows(tmp_path / "plans.csv")
    assert refused["status"] == "error" and "stack='torchtune': does not run pipeline parallelism" in refused["error"]
    assert solved["status"] == "optimal" and solved["plan_pp"] == "2"


def test_an_explanation_tries_the_stacks_that_run_more_and_names_them(catalogue):
    """405B at 8k on at most 64 A100-40GB does not fit torchtune (TP only, no pipeline); the
    explanation tries the broadest stacks and names the one whose plan fits."""
    from vramplan.models.catalogue.stack import restacked
    from vramplan.models.catalogue.stack_contract import broader_stacks

    # parameter offload (torchtitan) before more ZeRO stages (megatron: 0-3, Megatron-FSDP offloading nothing)
    assert broader_stacks(CAPS, "torchtune")[:2] == ["torchtitan", "megatron"]
    assert broader_stacks(CAPS, "custom") == [] and "custom" not in broader_stacks(CAPS, "unsloth")
    query = SolveQuery(model="llama-3.1-405b", job=Job(seq_len=8192, stack="torchtune", master_weights="none",
                                                       loss="chunked", recompute_layers=None),
                       gpus=("a100-sxm-40gb",), max_gpus=64)
    result = solve(catalogue, query)
    assert result.status == "infeasible"
    changes = {m.change: m for m in result.explanation.mitigations}
    titan = changes["the torchtitan stack (--stack torchtitan)"]
    assert titan.fits and titan.plan.gpu == "a100-sxm-40gb"
    # The recipe follows the stack, as --stack fills it: torchtune's defaults become torchtitan's.
    moved = restacked(query.job, "torchtitan", load_stacks())
    assert (moved.stack, moved.master_weights, moved.loss, moved.selective) == ("torchtitan", "fp32", "eager", "op")


def test_pinned_zero_and_offload_that_no_stack_runs_together_is_one_line(catalogue):
    """--zero 1 --offload optimizer+params left an empty ZeRO x offload domain: an internal
    IndexError (and, for a moment of this change, a wrong 'the stack does not run' on every stack)."""
    for stack in ("hf", "custom"):
        query = SolveQuery(model="llama-3.1-8b", job=Job(seq_len=2048, stack=stack), pins=Pins(zero=1, offload="optimizer+params"))
        with pytest.raises(VramplanError, match="offload='optimizer\\+params': needs ZeRO stage 3.*--zero is 1"):
            solve(catalogue, query)


def test_a_stack_searches_and_estimates_only_the_recompute_it_has() -> None:
    """catalogues/stack_capabilities.csv recomputes: the HF Trainer checkpoints whole layers or
    nothing (no attention-only or per-op mode), torchtitan has per-op SAC, Megatron selective."""
    refused = one_line_error(invoke("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--recompute", "selective"))
    assert "stack='hf'" in refused and "selective recompute" in refused
    assert invoke("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--num-gpus", "8", "--zero", "3",
                  "--recompute", "op", "--stack", "torchtitan").exit_code == 0
    pinned = one_line_error(invoke("solve", "--model", "llama-3.1-8b", "--recompute", "op", "--stack", "megatron"))
    assert "stack='megatron'" in pinned and "op recompute" in pinned
    caps = load_stack_capabilities()
    for stack in ("hf", "deepspeed", "torchtune", "litgpt", "unsloth"):
        assert caps[stack].recomputes == {"none", "full"}


def test_choices_a_stack_runs_on_one_gpu_or_on_several_only() -> None:
    """torchtune offloads the optimizer alone only in its single-device recipes and parameters with
    it only in its distributed ones; litgpt checkpoints every block on several GPUs and none on one
    (catalogues/stack_capabilities.csv single_gpu_only / multi_gpu_only)."""
    base = ["estimate", "--model", "llama-3.1-8b", "--seq-len", "4096", "--gpu", "h100-sxm-80gb"]
    refused = one_line_error(invoke(*base, "--stack", "torchtune", "--num-gpus", "8", "--zero", "2", "--offload", "optimizer"))
    assert "does not run offload optimizer on more than one GPU" in refused
    refused = one_line_error(invoke(*base, "--stack", "litgpt", "--method", "lora", "--recompute", "full"))
    assert "does not run recompute full on one GPU" in refused
    catalogue = load_catalogue()
    tune = solve(catalogue, SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192, stack="torchtune"),
                                       gpus=("h100-sxm-80gb",), top_k=5))
    assert tune.plans and all(p.plan.num_gpus == 1 or p.plan.offload != "optimizer" for p in tune.plans)
    lit = solve(catalogue, SolveQuery(model="llama-3.1-8b", job=Job(method="lora", seq_len=4096, stack="litgpt"), top_k=5))
    assert lit.plans and all((p.plan.num_gpus > 1) == (p.plan.recompute == "full") for p in lit.plans)


@pytest.mark.parametrize("stack", ["hf", "deepspeed", "megatron", "torchtitan", "torchtune", "litgpt", "unsloth"])
def test_the_best_plans_of_every_stack_have_a_launch_config(stack) -> None:
    """What solve proposes, the stack's own configuration expresses (launch/ refuses what a stack
    cannot run, so a refusal here is a plan the contract let through)."""
    from vramplan.launch.configs import LaunchModel, launch_config

    catalogue = load_catalogue()
    for model, method, seq_len in (("llama-3.1-8b", "lora", 4096), ("llama-3.1-70b", "full", 8192)):
        job = job_from_fields({"model": model, "method": method, "seq_len": seq_len, "stack": stack})
        if stack in ("unsloth",) and method == "full":
            continue  # Unsloth: one node; 70B full fine-tuning has no plan there
        result = solve(catalogue, SolveQuery(model=model, job=job, gpus=("h100-sxm-80gb",), top_k=3))
        for solved in result.plans:
            plan = Plan(**{k: v for k, v in solved.plan.model_dump().items() if k in Plan.model_fields})
            if method == "lora" and stack in ("megatron", "torchtitan"):
                # the stacks run LoRA elsewhere than the writers' entry points (Megatron-Bridge's PEFT
                # recipe; torchtitan main, not v0.2.2): refused by name, nothing written
                with pytest.raises(VramplanError, match="method='lora'"):
                    launch_config(job, plan, LaunchModel.of(catalogue.architecture(model)))
                continue
            launch_config(job, plan, LaunchModel.of(catalogue.architecture(model)))


@pytest.mark.parametrize(("model", "stack"), [("mixtral-8x7b", "torchtune"), ("gemma-3-27b", "torchtune"),
                                            ("qwen2.5-7b", "torchtitan"), ("gpt-oss-20b", "litgpt")])
def test_a_stack_plans_only_the_model_families_it_builds(catalogue, model, stack) -> None:
    """torchtune v0.6.1, torchtitan v0.2.2 and litgpt v0.5.13 build their own models (a stack review:
    Mixtral on torchtune came back as TP 4 with a recipe torchtune has no builder for)."""
    family = catalogue.architecture(model).model_type
    line = one_line_error(invoke("estimate", "--model", model, "--seq-len", "4096", "--gpu", "h100-sxm-80gb",
                                 "--num-gpus", "8", "--stack", stack))
    assert f"stack='{stack}'" in line and f"does not run {family} models" in line
    assert f"does not run {family} models" in one_line_error(invoke(
        "solve", "--model", model, "--seq-len", "4096", "--max-gpus", "16", "--stack", stack))
    answer = solve(catalogue, SolveQuery(model=model, job=job_from_fields({"model": model, "seq_len": 4096}),
                                         stacks=tuple(STACKS), max_gpus=16, top_k=20))
    assert answer.plans and stack not in {p.plan.stack for p in answer.plans}


def test_deepspeeds_long_context_plans_have_its_launch_config(catalogue) -> None:
    """A stack review's finding: at 128k tokens solve chose CP 8 x DP 2 for --stack deepspeed, and its
    writer then refused the plan (Ulysses is accelerate's, not the DeepSpeed JSON's)."""
    from vramplan.launch.configs import LaunchModel, launch_config

    job = job_from_fields({"model": "llama-3.1-8b", "seq_len": 131072, "stack": "deepspeed"})
    result = solve(catalogue, SolveQuery(model="llama-3.1-8b", job=job, max_gpus=16, global_batch=16, top_k=3))
    assert result.plans
    for solved in result.plans:
        plan = Plan(**{k: v for k, v in solved.plan.model_dump().items() if k in Plan.model_fields})
        assert plan.cp == 1 and plan.precision != "fp8"
        launch_config(job, plan, LaunchModel.of(catalogue.architecture("llama-3.1-8b")))


@pytest.mark.parametrize(("args", "feature"), [
    (["--zero", "3", "--cp", "2", "--ep", "2", "--num-gpus", "32"], "ZeRO-3 beside Ulysses (CP) under AutoEP"),
    (["--zero", "3", "--tp", "2", "--ep", "4", "--num-gpus", "8"], "ZeRO-3 beside AutoTP (TP) under AutoEP"),
    (["--zero", "2", "--tp", "2", "--ep", "2", "--cp", "2", "--num-gpus", "32"], "Ulysses (CP) beside AutoTP"),
    (["--zero", "2", "--tp", "2", "--ep", "4", "--offload", "optimizer", "--num-gpus", "8"], "ZeRO offload beside AutoTP"),
])
def test_deepspeeds_autoep_folding_rules(args, feature) -> None:
    """DeepSpeed v0.19.5 raises for these (auto_ep_folding.py validate_folding_global, engine.py
    L1851-1856); estimate accepted them and solve planned the first two (a stack review's finding)."""
    for stack in ("hf", "deepspeed") if "--cp" not in args else ("hf",):  # the deepspeed stack has no CP at all
        line = one_line_error(invoke("estimate", "--model", "qwen3-30b-a3b", "--seq-len", "32768", "--gpu",
                                     "h100-sxm-80gb", "--recompute", "full", "--stack", stack, *args))
        assert f"stack='{stack}'" in line and f"does not run {feature}" in line


def test_deepspeeds_moe_plans_have_its_launch_config(catalogue) -> None:
    from vramplan.launch.configs import LaunchModel, launch_config

    for stack in ("hf", "deepspeed"):
        job = job_from_fields({"model": "qwen3-30b-a3b", "seq_len": 32768, "stack": stack})
        result = solve(catalogue, SolveQuery(model="qwen3-30b-a3b", job=job, gpus=("h100-sxm-80gb",), max_gpus=32,
                                             objective="time", top_k=8))
        assert result.plans
        for solved in result.plans:
            plan = Plan(**{k: v for k, v in solved.plan.model_dump().items() if k in Plan.model_fields})
            launch_config(job, plan, LaunchModel.of(catalogue.architecture("qwen3-30b-a3b")))


def test_torchtitan_runs_model_parallelism_only_beside_fsdp(catalogue) -> None:
    """torchtitan v0.2.2 refuses DDP beside TP/PP/EP and, without an FSDP shard group of more than one
    rank (dp x cp), turns mixed precision off (float32 throughout): the search planned TP 8 x PP 4 x DP 1
    under ZeRO-0 for Llama 3.1 70B, which torchtitan cannot run as planned (SHARDED_MODEL_PARALLEL_STACKS)."""
    job = Job(seq_len=8192, stack="torchtitan")
    query = SolveQuery(model="llama-3.1-70b", job=job, global_batch=64, tokens=1e9, gpus=("h100-sxm-80gb",),
                       max_gpus=64, top_k=5)
    plans = [p.plan for p in solve(catalogue, query).plans]
    assert plans
    for plan in plans:
        if plan.tp * plan.pp * plan.cp * plan.ep > 1:
            assert plan.zero >= 2 and plan.dp * plan.cp > 1, plan
    refused = one_line_error(invoke("estimate", "--model", "llama-3.1-70b", "--seq-len", "8192", "--gpu", "h100-sxm-80gb",
                                    "--num-gpus", "32", "--tp", "8", "--pp", "4", "--zero", "3", "--stack", "torchtitan"))
    assert "stack='torchtitan'" in refused and "without a data-parallel rank to shard over" in refused
    assert "without FSDP" in one_line_error(invoke("solve", "--model", "llama-3.1-70b", "--seq-len", "8192", "--stack",
                                                   "torchtitan", "--zero", "0", "--tp", "8", "--gpu", "h100-sxm-80gb"))
    # both engines search the same space: the rule is a constraint of the unit models and of the points
    small = SolveQuery(model="llama-3.1-8b", job=Job(seq_len=8192, stack="torchtitan"), global_batch=8, tokens=1e9,
                       gpus=("h100-sxm-80gb",), max_gpus=8, objective="time")
    cpsat, brute = solve(catalogue, small), solve(catalogue, small.model_copy(update={"engine": "brute"}))
    assert cpsat.status == brute.status == "optimal"
    assert cpsat.objective.value == pytest.approx(brute.objective.value, rel=1e-12)


def test_megatrons_activation_offload_runs_without_pipeline_or_recompute(catalogue) -> None:
    """Megatron's activation offload is its layer-level cpu_offloading, which transformer_config.py
    refuses with pipeline parallelism and with any recompute (NVIDIA/Megatron-LM@d98e8a64 L1891-1899;
    catalogues/stack_capabilities.csv activation_offload_excludes): estimate names the feature, solve
    plans neither, and the launch configuration offloads all but the last layer (at most
    num_layers - 1, L1884-1889). Other stacks' offload keeps its recompute (hf's offloads the
    checkpointed inputs)."""
    base = ["estimate", "--model", "llama-3.1-8b", "--seq-len", "4096", "--gpu", "h100-sxm-80gb", "--num-gpus", "8",
            "--stack", "megatron", "--activation-offload"]
    refused = one_line_error(invoke(*base, "--pp", "2", "--grad-accum", "4"))
    assert "stack='megatron'" in refused and "pipeline parallelism with activation offload" in refused
    refused = one_line_error(invoke(*base, "--recompute", "full"))
    assert "full recompute with activation offload" in refused
    assert invoke(*base).exit_code in (0, 3)
    job = Job(seq_len=8192, stack="megatron", activation_offload=True)
    result = solve(catalogue, SolveQuery(model="llama-3.1-70b", job=job, global_batch=64, tokens=2e9,
                                         gpus=("h100-sxm-80gb",), max_gpus=64, top_k=5))
    assert result.plans
    assert all(p.plan.pp == 1 and p.plan.recompute == "none" for p in result.plans)
    without = solve(catalogue, SolveQuery(model="llama-3.1-70b", job=job.model_copy(update={"activation_offload": False}),
                                          global_batch=64, tokens=2e9, gpus=("h100-sxm-80gb",), max_gpus=64, top_k=5))
    assert any(p.plan.pp > 1 or p.plan.recompute != "none" for p in without.plans)  # the rule is what removed them
    from vramplan.launch.configs import LaunchModel, launch_config
    text = launch_config(job, Plan(gpu="h100-sxm-80gb", num_gpus=8, tp=8, zero=1), LaunchModel(80)).text
    assert "--cpu-offloading-num-layers 79" in text
    assert "--cpu-offloading-num-layers" not in launch_config(job.model_copy(update={"activation_offload": False}),
                                                               Plan(gpu="h100-sxm-80gb", num_gpus=8, tp=8, zero=1), LaunchModel(80)).text
    # torchtune's offload needs its activation checkpointing (every recipe raises without it), nothing else
    assert CAPS["torchtune"].activation_offload_excludes == frozenset({"recompute=none"})


@pytest.mark.parametrize("stack", ["torchtune", "litgpt"])
def test_stacks_that_shard_every_multi_gpu_run_get_no_unsharded_replicas(catalogue, stack) -> None:
    """torchtune's distributed recipes and litgpt's scripts on several devices always shard (FSDP2 /
    FSDP): ZeRO-0 runs on one GPU only (catalogues/stack_capabilities.csv single_gpu_only zero=0).
    Before 2026-12-06 both were offered plain replicas, which hold more per GPU and which neither
    launches (their launch configs only noted the mismatch). The hf stack still runs DDP replicas."""
    base = ["estimate", "--model", "llama-3.1-8b", "--seq-len", "4096", "--gpu", "h100-sxm-80gb", "--method", "lora"]
    refused = one_line_error(invoke(*base, "--stack", "torchtune", "--num-gpus", "2", "--zero", "0"))
    assert "stack='torchtune'" in refused and "does not run ZeRO-0 on more than one GPU" in refused
    assert invoke(*base, "--stack", "torchtune", "--num-gpus", "1", "--zero", "0").exit_code in (0, 3)
    query = SolveQuery(model="llama-3.1-8b", job=job_from_fields({"model": "llama-3.1-8b", "method": "lora",
                                                                  "seq_len": 8192, "stack": stack}),
                       global_batch=64, tokens=1e9, gpus=("h100-sxm-80gb", "a10g-24gb"), max_gpus=16, top_k=10,
                       objective="time")
    plans = solve(catalogue, query).plans
    assert plans and any(p.plan.num_gpus > 1 for p in plans)
    assert all(p.plan.zero > 0 for p in plans if p.plan.num_gpus > 1), [(p.plan.num_gpus, p.plan.zero) for p in plans]
    assert CAPS["hf"].single_gpu_only == frozenset() and 0 in CAPS["hf"].zero_stages


def test_estimates_defaults_are_what_the_stack_runs_on_that_many_gpus() -> None:
    """`estimate` without --zero / --recompute takes what the stack runs on --num-gpus: torchtune and
    litgpt shard every multi-GPU run (ZeRO-3, their default FULL_SHARD) and litgpt checkpoints every
    block there; on one GPU, or on a stack running replicas, ZeRO-0 and the preset's recompute."""
    base = ["estimate", "--model", "llama-3.1-8b", "--seq-len", "4096", "--gpu", "h100-sxm-80gb", "--method", "lora",
            "--format", "json"]
    for stack, gpus, zero, recompute in (("torchtune", 2, 3, "full"), ("litgpt", 2, 3, "full"), ("litgpt", 1, 0, "none"),
                                         ("unsloth", 2, 0, "full"), ("hf", 2, 0, "none")):
        result = invoke(*base, "--stack", stack, "--num-gpus", str(gpus))
        assert result.exit_code in (0, 3), (stack, result.output)
        plan = json.loads(result.output)["plan"]
        assert (plan["zero"], plan["recompute"]) == (zero, recompute), stack
    pinned = json.loads(invoke(*base, "--stack", "torchtune", "--num-gpus", "2", "--zero", "2").output)["plan"]
    assert pinned["zero"] == 2


def test_unsloth_plans_offload_on_several_gpus_only_where_it_keeps_it():
    """Unsloth drops its offloaded checkpointing under DDP on its FastModel path (full fine-tuning,
    8-bit loading, families without their own classes: unsloth/models/vision.py post_patch_model,
    loader.py @ 015bdef); its own classes (Llama, Mistral, Gemma, Qwen2/3 LoRA and 4-bit QLoRA) keep
    it. A plan counting the inputs on the host there would hold them on the GPU (the launch audit of
    2026-12-06): such counts leave the search, a pinned one is one line, estimate refuses it."""
    catalogue = load_catalogue()

    def query(model, method, **extra):
        fields = {"model": model, "method": method, "seq_len": 4096, "stack": "unsloth", **extra}
        return SolveQuery(model=model, job=job_from_fields(fields), global_batch=16, tokens=1e8,
                          gpus=("h200-sxm-141gb",), max_gpus=8, top_k=5, objective="time")

    full = solve(catalogue, query("qwen2.5-7b", "full"), explain_infeasible=False)
    assert full.plans and all(p.plan.num_gpus == 1 for p in full.plans)  # the offload keeps it on one GPU
    free = solve(catalogue, query("qwen2.5-7b", "full", activation_offload=False), explain_infeasible=False)
    assert any(p.plan.num_gpus > 1 for p in free.plans)  # without it, DDP is planned
    lora = solve(catalogue, query("llama-3.1-8b", "lora"), explain_infeasible=False)
    assert any(p.plan.num_gpus > 1 for p in lora.plans)  # FastLlamaModel keeps the offload under DDP
    with pytest.raises(VramplanError, match="FastModel path drops it under DDP"):
        solve(catalogue, query("qwen2.5-7b", "full").model_copy(update={"pins": Pins(num_gpus=2)}))
    result = invoke("estimate", "--model", "phi-4", "--method", "lora", "--stack", "unsloth", "--seq-len", "4096",
                    "--gpu", "h100-sxm-80gb", "--num-gpus", "2")
    assert "activation offload on more than one GPU for a phi3 lora job" in one_line_error(result)


def test_unsloth_offloads_only_what_its_checkpointing_saves(tmp_path):
    """Unsloth's activation offload is its checkpointing's ("unsloth": the checkpointed layer inputs
    go to host RAM), so the preset's offload comes with full recompute: solve planned recompute none
    beside it (QLoRA Llama 3.2 3B on one V100), which the launch file then refused. The contract says
    so (activation_offload_excludes recompute=none), and the plan's launch file is written."""
    path = tmp_path / "unsloth.json"
    result = invoke("solve", "--model", "llama-3.2-3b", "--method", "qlora", "--seq-len", "4096", "--global-batch", "16",
                    "--tokens", "1e9", "--stack", "unsloth", "--format", "json", "--launch-config", str(path))
    assert result.exit_code == 0, result.stderr
    assert all(p["plan"]["recompute"] == "full" for p in json.loads(result.stdout)["plans"])
    assert json.loads(path.read_text(encoding="utf-8"))["from_pretrained"]["use_gradient_checkpointing"] == "unsloth"


def test_unsloth_offloads_nothing_below_512_tokens():
    """Unsloth's "unsloth" checkpointing is plain below 512 tokens (_utils.py
    apply_unsloth_gradient_checkpointing): its preset's offload is off there (before, the plan
    counted the checkpointed inputs on the host and the launch file refused it), and asking for it
    is one line."""
    from vramplan.solver.query_fields import job_from_fields

    assert not job_from_fields({"stack": "unsloth", "method": "qlora", "seq_len": 256}).activation_offload
    assert job_from_fields({"stack": "unsloth", "method": "qlora", "seq_len": 512}).activation_offload
    args = ("solve", "--model", "llama-3.2-1b", "--method", "qlora", "--seq-len", "256", "--global-batch", "16",
            "--stack", "unsloth")
    assert invoke(*args).exit_code == 0
    assert "activation offload below 512 tokens" in one_line_error(invoke(*args, "--activation-offload"))


def test_a_capabilities_row_reads_back_what_it_dumps_and_names_an_unknown_word_by_its_column():
    """Every row validated from its own model_dump (zero stages as ints failed: 'unknown 0'), and a word
    no column knows is refused naming that column."""
    from vramplan.models.catalogue.catalogue import load_stack_capabilities
    from vramplan.models.catalogue.stack_capabilities import StackCapabilities
    for caps in load_stack_capabilities().values():
        assert StackCapabilities(**caps.model_dump()) == caps
    row = load_stack_capabilities()["megatron"].model_dump() | {"cuda_graphs": "none bogus"}
    with pytest.raises(ValueError, match="cuda_graphs: unknown 'bogus'"):
        StackCapabilities(**row)
