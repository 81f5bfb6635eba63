"""Launch configurations from a plan (launch/configs.py) for deepspeed, megatron and torchtitan:
every key or flag is one the stack publishes, every value inside its domain, and the values are the
plan's (hf, unsloth, torchtune, litgpt: test_<stack>_config.py beside this file).

The published names and domains, copied from the stacks' code at the releases the contracts
cite (catalogues/stack_capabilities.csv):
- DeepSpeed v0.19.5 (cf44300): the DEEPSPEED table and its sources in tests/launch/published.py.
- Megatron-LM core_v0.19.0 (5be9626): megatron/training/arguments.py and the flags it generates
  from ModelParallelConfig / TransformerConfig / OptimizerConfig fields (underscores become
  hyphens; fp8 becomes --fp8-format; tp_comm_overlap --tp-comm-overlap; moe_token_dispatcher_type
  --moe-token-dispatcher-type, moe_flex_dispatcher_backend --moe-flex-dispatcher-backend);
  --optimizer-cpu-offload requires --use-precision-aware-optimizer (argument validation).
- torchtitan v0.2.2 (73a0e69): torchtitan/config/job_config.py Parallelism, Training,
  ActivationCheckpoint (mode: selective, full, memory_budget, none; selective_ac_option 'op' or
  digits; fsdp_reshard_after_forward: default, always, never; enable_async_tensor_parallel;
  expert_parallel_comm_backend: standard, deepep), Compile
  (enable, components: model, loss).
"""

from __future__ import annotations

import json
import shlex
import tomllib

import pytest
from helpers.cli import invoke, one_line_error
from published import BOOL, FLAG, FLOAT, INT, STR, check_deepspeed, in_domain, job

from vramplan.launch.configs import WRITERS, LaunchModel, check_writer, launch_config
from vramplan.launch.deepspeed import deepspeed_dict
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import STACKS, Job, Plan

MEGATRON = {"--tensor-model-parallel-size": INT, "--pipeline-model-parallel-size": INT, "--context-parallel-size": INT,
            "--expert-model-parallel-size": INT, "--sequence-parallel": FLAG, "--num-layers-per-virtual-pipeline-stage": INT,
            "--num-virtual-stages-per-pipeline-rank": INT, "--micro-batch-size": INT, "--global-batch-size": INT,
            "--seq-length": INT, "--bf16": FLAG, "--fp16": FLAG, "--fp8-format": ("e4m3", "hybrid"),
            "--use-distributed-optimizer": FLAG, "--recompute-granularity": ("full", "selective"),
            "--recompute-method": ("uniform", "block"), "--recompute-num-layers": INT, "--optimizer-cpu-offload": FLAG,
            "--optimizer-offload-fraction": FLOAT, "--use-precision-aware-optimizer": FLAG,
            # megatron/training/arguments.py: the uneven split and the layout string (launch/pipeline.py)
            "--decoder-first-pipeline-num-layers": INT, "--decoder-last-pipeline-num-layers": INT,
            "--pipeline-model-parallel-layout": STR,
            # megatron/core/model_parallel_config.py ModelParallelConfig.tp_comm_overlap (bool: a flag); arguments.py
            # asserts --sequence-parallel with it
            "--tp-comm-overlap": FLAG,
            # megatron/training/arguments.py _add_distributed_args: store_true flags (DistributedDataParallelConfig
            # overlap_grad_reduce, overlap_param_gather: "overlap param all-gather in distributed optimizer")
            "--overlap-grad-reduce": FLAG, "--overlap-param-gather": FLAG,
            # megatron/core/model_parallel_config.py ModelParallelConfig.cpu_offloading_num_layers (int, default 0);
            # arguments.py L1950-1951 (d98e8a64) sets cpu_offloading when it is > 0
            "--cpu-offloading-num-layers": INT,
            # core_v0.19.0 transformer_config.py TransformerConfig.moe_token_dispatcher_type (Literal, default
            # allgather) and moe_flex_dispatcher_backend (Literal, default deepep)
            "--moe-token-dispatcher-type": ("allgather", "alltoall", "flex"),
            "--moe-flex-dispatcher-backend": ("deepep", "hybridep", "ncclep"),
            # NVIDIA/Megatron-LM@d98e8a64 megatron/training/arguments.py _add_mixed_precision_args: store_true
            # flags (L3053, L3069); the gradient buffer's dtype (param_and_grad_buffer.py L924)
            "--grad-reduce-in-bf16": FLAG, "--accumulate-allreduce-grads-in-fp32": FLAG,
            # d98e8a64 transformer_config.py TransformerConfig.fp8_recipe (Literal, default delayed: L594) and
            # moe_grouped_gemm (bool, default False: L850), both arguments through the config's dataclass;
            # arguments.py L2913 --optimizer (choices adam, sgd, muon, ...; default adam)
            "--fp8-recipe": ("tensorwise", "delayed", "mxfp8", "blockwise", "custom"), "--moe-grouped-gemm": FLAG,
            "--optimizer": ("adam", "sgd", "muon", "dist_muon", "lion", "soap", "adaptive_muon")}
TORCHTITAN = {
    "parallelism": {"data_parallel_replicate_degree": INT, "data_parallel_shard_degree": INT, "tensor_parallel_degree": INT,
                    "pipeline_parallel_degree": INT, "context_parallel_degree": INT, "expert_parallel_degree": INT,
                    "pipeline_parallel_schedule": ("1F1B", "Interleaved1F1B", "GPipe", "LoopedBFS", "InterleavedZeroBubble"),
                    "fsdp_reshard_after_forward": ("default", "always", "never"),
                    # v0.2.2 job_config.py Parallelism.enable_async_tensor_parallel (default False)
                    "enable_async_tensor_parallel": BOOL,
                    # v0.2.2 job_config.py Parallelism.expert_parallel_comm_backend (default standard)
                    "expert_parallel_comm_backend": ("standard", "deepep"),
                    # v0.2.2 job_config.py Parallelism.pipeline_parallel_microbatch_size (int, default 1: L412) and
                    # expert_tensor_parallel_degree (int, default 1; 1 or tp: L464)
                    "pipeline_parallel_microbatch_size": INT, "expert_tensor_parallel_degree": INT,
                    # torchtitan config/configs.py ParallelismConfig.module_fqns_per_model_part
                    "module_fqns_per_model_part": lambda v: isinstance(v, list) and all(
                        isinstance(part, list) and all(isinstance(name, str) for name in part) for part in v)},
    "training": {"local_batch_size": INT, "global_batch_size": INT, "seq_len": INT,
                 "mixed_precision_param": ("bfloat16", "float32"), "enable_cpu_offload": BOOL},
    "activation_checkpoint": {"mode": ("selective", "full", "memory_budget", "none"), "selective_ac_option": STR},
    "compile": {"enable": BOOL, "components": lambda v: isinstance(v, list) and set(v) <= {"model", "loss"}},
    # v0.2.2 job_config.py Model.converters (list[str]); components/quantization/float8.py L238-239 registers
    # "quantize.linear.float8" and "quantize.grouped_mm.float8"
    "model": {"converters": lambda v: isinstance(v, list) and set(v) <= {"quantize.linear.float8", "quantize.grouped_mm.float8"}},
}


def _megatron_args(text: str) -> dict[str, str | None]:
    lines = [line.strip() for line in text.splitlines() if line.startswith("  ")]
    parsed: dict[str, str | None] = {}
    for line in lines:
        flag, *value = shlex.split(line)
        assert flag in MEGATRON, flag
        domain = MEGATRON[flag]
        if domain == FLAG:
            assert not value, flag
            parsed[flag] = None
        else:
            (text_value,) = value
            typed = int(text_value) if domain == INT else float(text_value) if domain == FLOAT else text_value
            assert in_domain(typed, domain), (flag, text_value)
            parsed[flag] = text_value
    return parsed


PLANS = [
    ("deepspeed", Plan(gpu="h100-sxm-80gb", num_gpus=16, zero=3, offload="optimizer+params", micro_batch=2, grad_accum=4,
                       tp=2, recompute="full")),
    ("deepspeed", Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=1, offload="optimizer", precision="fp16")),
    ("deepspeed", Plan(gpu="h100-sxm-80gb", num_gpus=16, zero=2, ep=2, grad_accum=2)),
    ("megatron", Plan(gpu="h100-sxm-80gb", num_gpus=64, zero=1, tp=8, pp=4, vpp=2, sequence_parallel=True, micro_batch=1,
                      grad_accum=16, recompute="full", recompute_layers=5)),
    ("megatron", Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=1, offload="optimizer", precision="fp8", recompute="selective")),
    ("megatron", Plan(gpu="h100-sxm-80gb", num_gpus=16, zero=1, ep=16, grad_accum=4)),
    ("torchtitan", Plan(gpu="h100-sxm-80gb", num_gpus=64, zero=3, tp=4, pp=2, vpp=2, sequence_parallel=True, grad_accum=2,
                        recompute="op", offload="optimizer+params")),
    ("torchtitan", Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=2, recompute="full", recompute_layers=16)),
    ("torchtitan", Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=0, recompute="none")),
]


@pytest.mark.parametrize(("stack", "plan"), PLANS, ids=[f"{s}-{i}" for i, (s, _) in enumerate(PLANS)])
def test_every_key_is_published_and_every_value_is_the_plans(stack, plan):
    job = Job(seq_len=8192, stack=stack)
    config = launch_config(job, plan, LaunchModel(80))
    assert config.stack == stack
    if stack == "deepspeed":
        data = json.loads(config.text)
        check_deepspeed(data, plan)
    elif stack == "megatron":
        args = _megatron_args(config.text)
        assert int(args["--tensor-model-parallel-size"]) * int(args["--pipeline-model-parallel-size"]) \
            * int(args["--context-parallel-size"]) * plan.dp == plan.num_gpus
        assert int(args["--global-batch-size"]) == plan.global_batch and int(args["--seq-length"]) == 8192
        assert ("--sequence-parallel" in args) == (plan.sequence_parallel and plan.tp > 1)
        assert "--tp-comm-overlap" not in args  # Megatron-LM's tp_comm_overlap defaults to False, as the preset
        # the all-to-all dispatcher the time model charges (Megatron-Core's own default is allgather), with EP
        assert args.get("--moe-token-dispatcher-type") == ("alltoall" if plan.ep > 1 else None)
        assert "--moe-flex-dispatcher-backend" not in args
        if plan.vpp > 1 and "--pipeline-model-parallel-layout" not in args:
            assert int(args["--num-layers-per-virtual-pipeline-stage"]) * plan.pp * plan.vpp == 80
        if "--optimizer-cpu-offload" in args:
            assert "--use-precision-aware-optimizer" in args
        if plan.recompute_layers is not None:
            assert args["--recompute-num-layers"] == str(plan.recompute_layers)
    else:
        data = tomllib.loads(config.text)
        for section, body in data.items():
            for key, value in body.items():
                assert key in TORCHTITAN[section], (section, key)
                assert in_domain(value, TORCHTITAN[section][key]), (section, key, value)
        par = data["parallelism"]
        assert par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"] == plan.dp
        assert par["tensor_parallel_degree"] * par["pipeline_parallel_degree"] * plan.dp * plan.cp == plan.num_gpus
        assert (par["data_parallel_shard_degree"] > 1) == (plan.zero >= 2 and plan.dp > 1)
        assert "compile" not in data  # torchtitan's Compile.enable defaults to False, as the job's compile
        assert "enable_async_tensor_parallel" not in par  # off by default, as the preset's tp_overlap
        assert "expert_parallel_comm_backend" not in par  # standard by default, as the preset's moe_dispatcher
        option = data["activation_checkpoint"].get("selective_ac_option", "op")
        assert option == "op" or option.isdigit()
        assert data["training"].get("enable_cpu_offload", False) == (plan.offload == "optimizer+params")


def test_solve_writes_the_best_plans_config_for_its_stack(tmp_path):
    path = tmp_path / "launch.sh"
    result = invoke("solve", "--model", "llama-3.1-70b", "--seq-len", "8192", "--global-batch", "64", "--tokens", "2e9",
                    "--stack", "megatron", "--gpu", "h100-sxm-80gb", "--launch-config", str(path), "--format", "json")
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)["plans"][0]["plan"]
    args = _megatron_args(path.read_text(encoding="utf-8"))
    assert int(args["--tensor-model-parallel-size"]) == plan["tp"] and int(args["--micro-batch-size"]) == plan["micro_batch"]


@pytest.mark.parametrize(("compile_", "components"), [("model", ["model"]), ("model+loss", ["model", "loss"])])
def test_torchtitan_compiles_what_the_job_compiles(compile_, components):
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=3, recompute="op")
    data = tomllib.loads(launch_config(Job(seq_len=8192, stack="torchtitan", compile=compile_), plan, LaunchModel(32)).text)
    assert data["compile"] == {"enable": True, "components": components}
    assert all(in_domain(value, TORCHTITAN["compile"][key]) for key, value in data["compile"].items())


def test_deepspeeds_json_cannot_hold_the_trainers_compile_switch():
    with pytest.raises(VramplanError, match="compile"):
        launch_config(Job(stack="deepspeed", compile=True), Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=3), LaunchModel(32))


def test_every_stack_but_custom_has_a_writer():
    # litgpt-fsdp1: lit-gpt up to v0.5.7 kept its hyperparameters in the scripts (finetune/lora.py
    # module constants at 8641822), no configuration file to write; torchtitan-root-fsdp: torchtitan
    # before 83e6941 named its options otherwise (9dec370 config_manager.py: the degrees under
    # [training] and [experimental]; up to f26179e `training.compile`, not v0.2.2's [compile]), which
    # the torchtitan writer (v0.2.2's JobConfig) does not write
    assert set(WRITERS) == set(STACKS) - {"custom", "litgpt-fsdp1", "torchtitan-root-fsdp"}
    for stack in WRITERS:
        check_writer(stack)
    for stack in ("custom", "litgpt-fsdp1", "torchtitan-root-fsdp"):
        with pytest.raises(VramplanError, match="no launch-config writer"):
            check_writer(stack)


def test_deepspeeds_json_cannot_set_up_ulysses():
    """DeepSpeed's sequence parallelism (CP) is set up by accelerate's ParallelismConfig(sp_backend=
    "deepspeed") (accelerator.py L2386-2421); the JSON's sequence_parallel_size alone divided the
    data-parallel world and split no sequence. hf's writer carries it."""
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=16, zero=2, cp=4)
    with pytest.raises(VramplanError, match="cp=4: DeepSpeed's Ulysses"):
        launch_config(Job(stack="deepspeed"), plan, LaunchModel(32))
    with pytest.raises(VramplanError, match="precision='fp8'"):  # the JSON ran it in bf16
        launch_config(Job(stack="deepspeed"), Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=2, precision="fp8"), LaunchModel(32))
    sections = json.loads(launch_config(Job(stack="hf"), plan.model_copy(update={"zero": 1}), LaunchModel(32)).text)
    assert sections["parallelism_config"] == {"sp_size": 4, "sp_backend": "deepspeed"}  # ZeRO-1: the DeepSpeed path


def test_megatron_overlaps_the_data_parallel_traffic_the_time_model_hides():
    """Megatron-LM's --overlap-grad-reduce and --overlap-param-gather are off by default (arguments.py
    store_true); the time model hides ZeRO-0/1's reduction behind the last micro-batch's backward and
    ZeRO-1's parameter all-gather behind the first forward (models/time/performance.py dp_windows_s),
    so the configuration asks for both. Megatron-FSDP (ZeRO-2/3) keeps its own."""
    def flags(zero: int) -> set[str]:
        text = launch_config(Job(seq_len=4096, stack="megatron"), Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=zero),
                             LaunchModel(32)).text
        return {flag for flag in ("--overlap-grad-reduce", "--overlap-param-gather") if flag in text}

    assert flags(0) == {"--overlap-grad-reduce"}
    assert flags(1) == {"--overlap-grad-reduce", "--overlap-param-gather"}
    assert flags(3) == set()


def test_megatron_and_torchtitan_write_what_their_entry_points_run():
    """What the audit of 2026-12-06 found the writers dropped: Megatron's MoE grouped GEMM (default off:
    a loop), its current-scaling fp8 recipe (default delayed), SGD; torchtitan's pipeline micro-batches
    (local_batch_size was one micro-batch: every micro-batch ran as a pipeline flush of its own), its
    expert TP, its fp8 converter; LoRA, 8-bit states and torchtitan without FSDP refused by name."""
    moe = Plan(gpu="h100-sxm-80gb", num_gpus=8, ep=8, zero=1, precision="fp8")
    text = launch_config(Job(seq_len=4096, stack="megatron", optimizer="sgd"), moe, LaunchModel(48, 128)).text
    assert all(f in text for f in ("--moe-grouped-gemm", "--fp8-recipe tensorwise", "--optimizer sgd"))
    assert "--moe-grouped-gemm" not in launch_config(Job(seq_len=4096, stack="megatron"), moe, LaunchModel(48)).text  # dense
    refused = (("method", Job(method="lora", stack="megatron")), ("optimizer", Job(optimizer="adamw-8bit", stack="megatron")),
               ("master_weights", Job(master_weights="none", stack="megatron")),
               ("method", Job(method="lora", stack="torchtitan")), ("optimizer", Job(optimizer="sgd", stack="torchtitan")))
    for field, the_job in refused:
        with pytest.raises(VramplanError, match=f"^{field}="):
            launch_config(the_job, Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=3 if the_job.stack == "torchtitan" else 1), LaunchModel(32))
    pipeline = Plan(gpu="h100-sxm-80gb", num_gpus=32, tp=4, pp=4, zero=3, micro_batch=1, grad_accum=8, precision="fp8")
    data = tomllib.loads(launch_config(Job(seq_len=8192, stack="torchtitan"), pipeline, LaunchModel(80)).text)
    assert data["training"]["local_batch_size"] == 8 and data["parallelism"]["pipeline_parallel_microbatch_size"] == 1
    assert data["training"]["global_batch_size"] == 16 and data["model"] == {"converters": ["quantize.linear.float8"]}
    expert = tomllib.loads(launch_config(Job(seq_len=4096, stack="torchtitan"),
                                         Plan(gpu="h100-sxm-80gb", num_gpus=16, tp=2, ep=8, zero=3), LaunchModel(48)).text)
    assert expert["parallelism"]["expert_tensor_parallel_degree"] == 2
    # torchtitan's every-n-th block counts per process (activation_checkpoint.py L37-40: the counter is
    # incremented, then a block is checkpointed when it divides by n): every rank must checkpoint at least
    # the 5 layers a chunk the memory counts (the stride of the largest chunk left the 19-layer rank 4)
    split = (19, 20, 20, 21)
    partial = Plan(gpu="h100-sxm-80gb", num_gpus=32, tp=4, pp=4, zero=3, stage_layers=split, recompute="full",
                   recompute_layers=5, grad_accum=8)
    stride = int(tomllib.loads(launch_config(Job(seq_len=8192, stack="torchtitan"), partial, LaunchModel(80)).text)
                 ["activation_checkpoint"]["selective_ac_option"])
    assert all(sum(1 for count in range(1, layers + 1) if count % stride == 0) >= 5 for layers in split)
    with pytest.raises(VramplanError, match="^zero=3: torchtitan runs TP"):  # one data-parallel rank: nothing to shard
        launch_config(Job(stack="torchtitan"), Plan(gpu="h100-sxm-80gb", num_gpus=8, tp=8, zero=3), LaunchModel(32))


def test_deepspeed_writes_autoep_beside_autotp_where_its_folding_runs_it():
    """DeepSpeed v0.19.5 folds AutoEP with AutoTP at ZeRO 0-2 without offload or Ulysses
    (module_inject/auto_ep_folding.py validate_folding_global); the writer refused every TP x EP plan,
    citing an older documentation line, and solve planned them (a stack review's finding)."""
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=16, zero=1, tp=2, ep=2)
    config = json.loads(launch_config(Job(stack="deepspeed"), plan, LaunchModel(32)).text)
    assert config["tensor_parallel"] == {"autotp_size": 2} and config["expert_parallel"]["autoep_size"] == 2
    for refused, field in ((plan.model_copy(update={"zero": 3}), "zero"),
                           (plan.model_copy(update={"offload": "optimizer", "zero": 2}), "offload"),
                           (plan.model_copy(update={"cp": 2, "num_gpus": 32}), "cp"),
                           (plan.model_copy(update={"tp": 1, "cp": 2, "zero": 3}), "zero")):
        with pytest.raises(VramplanError, match=rf"^{field}=.*DeepSpeed v0.19.5 does not run"):
            deepspeed_dict(refused)  # what both writers write (hf inlines it; the deepspeed stack has no CP)


def test_a_stack_without_a_writer_is_refused_before_any_work(tmp_path):
    path = tmp_path / "launch.json"
    result = invoke("estimate", "--model", "llama-3.1-8b", "--seq-len", "4096", "--gpu", "h100-sxm-80gb",
                    "--stack", "custom", "--launch-config", str(path))
    assert "has no launch-config writer yet" in one_line_error(result) and result.stdout == "" and not path.exists()
    twin = one_line_error(invoke("estimate", "--model", "llama-3.1-8b", "--seq-len", "4096", "--gpu", "h100-sxm-80gb",
                                 "--stack", "deepspeed", "-o", str(path), "--launch-config", str(path)))
    assert "is also this run's --output file" in twin


def _megatron_of(job: Job, plan: Plan) -> dict[str, str | None]:
    return _megatron_args(launch_config(job, plan, LaunchModel(126)).text)


def test_megatron_recomputes_the_plans_layers_per_stage_and_carries_the_split():
    """--recompute-num-layers is per model chunk (megatron/core/recompute.py, block method): the
    plan's count as it is, the job's when the plan has none, every layer of the largest chunk for
    full recompute; an uneven split goes out as the first and the last rank's counts."""
    job = Job(seq_len=8192, stack="megatron")
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=8192, tp=8, pp=16, recompute="full", recompute_layers=3,
                stage_layers=(6,) + (8,) * 15)
    args = _megatron_of(job, plan)
    assert args["--recompute-num-layers"] == "3" and args["--recompute-method"] == "block"
    assert args["--decoder-first-pipeline-num-layers"] == "6"
    assert _megatron_of(job.model_copy(update={"recompute_layers": 2}),
                          plan.model_copy(update={"recompute_layers": None}))["--recompute-num-layers"] == "2"
    assert _megatron_of(job, plan.model_copy(update={"recompute_layers": None}))["--recompute-num-layers"] == "8"


@pytest.mark.parametrize(("precision", "accounting", "flags"), [
    ("bf16", "hf", ()),  # the preset: bf16's default accumulate_allreduce_grads_in_fp32 (arguments.py L1204-1217)
    ("fp8", "hf", ()),
    ("fp16", "hf", ("--accumulate-allreduce-grads-in-fp32",)),  # off for --fp16 unless given (arguments.py L3069)
    ("bf16", "zero", ("--grad-reduce-in-bf16",)),  # a bf16 buffer, as "zero" counts 2 bytes
    ("fp8", "zero", ("--grad-reduce-in-bf16",)),
    ("fp16", "zero", ()),  # --fp16 alone: an fp16 buffer
    ("fp32", "zero", ()),
    ("fp32", "hf", ()),
])
def test_megatron_gradient_buffer_dtype_matches_the_accounting(precision, accounting, flags):
    """The launched run keeps the gradient buffer the estimate counts (models/memory/precision.py
    gradient_bytes_per_param: "hf" 4 bytes, "zero" 2): Megatron's grad_dtype is fp32 exactly when
    accumulate_allreduce_grads_in_fp32 is on (NVIDIA/Megatron-LM@d98e8a64 param_and_grad_buffer.py L924,
    training.py L2635)."""
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=1, precision=precision)
    args = _megatron_of(job("megatron", accounting=accounting), plan)
    written = tuple(flag for flag in ("--accumulate-allreduce-grads-in-fp32", "--grad-reduce-in-bf16") if flag in args)
    assert written == flags
