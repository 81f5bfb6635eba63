"""Stack behaviours that decide which layouts and micro-batch counts a stack's pipeline schedule
runs (models/architecture/parallel.py), each read in the stack's code and cited where it is
defined; registered in stack_behaviour.py."""

from __future__ import annotations

from vramplan.models.core.behaviour import Behaviour

# Stacks whose interleaved schedule needs each rank's layers in vpp equal chunks: Megatron-LM
# (arguments.py 'number of layers per pipeline stage must be divisible by number of layers per
# virtual pipeline stage', TransformerConfig for the first/last/middle ranks; only an explicit
# --pipeline-model-parallel-layout splits a rank's chunks unevenly, and the one vramplan writes for
# an uneven split keeps each rank's chunks equal: launch/pipeline.py).
# torchtitan splits the model into pp x vpp stages of layers / stages each, the remainder spread
# (pipeline_module_split), so its chunks may differ by one layer.
EVEN_VIRTUAL_STAGES = Behaviour(
    "interleaved stages of equal layers on each rank", frozenset({"megatron"}), "models/architecture/parallel.py")

# Stacks whose interleaved schedule runs the micro-batches in groups of pp per virtual stage and
# refuses a step whose micro-batches are not whole groups: Megatron-LM (NVIDIA/Megatron-LM@d98e8a64
# megatron/core/model_parallel_config.py L567-568: microbatch_group_size_per_vp_stage defaults to
# pipeline_model_parallel_size, which vramplan's launch never overrides;
# megatron/core/pipeline_parallel/schedules.py L1160-1180 forward_backward_pipelining_with_interleaving
# raises a ValueError when the group is larger than the step's micro-batches and a RuntimeError when
# `num_microbatches % microbatch_group_size_per_vp_stage` is neither 0 nor at least pp).
PP_GROUPED_INTERLEAVING_STACKS = Behaviour(
    "the interleaved schedule runs whole groups of pp micro-batches per virtual stage", frozenset({"megatron"}),
    "models/architecture/parallel.py")

# Stacks whose DeepEP backend only some model families route through: torchtitan v0.2.2 (73a0e69)
# builds DeepEPMoE from `--parallelism.expert_parallel_comm_backend` in its DeepSeek-V3 model alone
# (torchtitan/models/deepseek_v3/model/args.py L116 moe_impl, model.py L358-362, models/moe/moe.py
# L578-587; its "16B" flavour is DeepSeek-V2-Lite's shape); Qwen3 builds a plain MoE and
# parallelizes it without DeepEP (qwen3/model/model.py L368, qwen3/infra/parallelize.py L111-119),
# so the flag is ignored and the all-to-all runs; Llama 4's model builds a plain MoE too
# (llama4/model/model.py L404). models/architecture/parallel.py dispatcher_refusal.
DEEPEP_DEEPSEEK_ONLY_STACKS = Behaviour(
    "the DeepEP backend runs for DeepSeek models only (others fall back to the all-to-all)",
    frozenset({"torchtitan"}), "models/architecture/parallel.py")

# Stacks that run model parallelism only beside FSDP: torchtitan v0.2.2 (73a0e69) refuses DDP beside
# any other dimension (models/llama3/infra/parallelize.py L148-151: "DDP has not supported > 1D
# parallelism", the same in its 2024-12 release), turns mixed precision off under TP or PP without
# FSDP or CP (distributed/utils.py L246-256 maybe_enable_amp: the run is training.dtype, float32 by
# default, job_config.py L275), and shards over the CP ranks whenever CP is on (its mesh's
# dp_shard_cp): a plan without sharding (ZeRO-0) runs data parallelism alone or one GPU.
# models/catalogue/stack_contract.py zero_layout_refusal.
SHARDED_MODEL_PARALLEL_STACKS = Behaviour(
    "model parallelism (TP, PP, CP, EP) only beside FSDP: without sharding, DDP or one GPU",
    frozenset({"torchtitan", "torchtitan-root-fsdp"}), "models/catalogue/stack_contract.py")

# Stacks whose expert parallelism is DeepSpeed's AutoEP (hf and deepspeed: the HF Trainer with a
# DeepSpeed config; the hf writer inlines it for EP), whose folding of EP with AutoTP and Ulysses
# DeepSpeed v0.19.5 validates: module_inject/auto_ep_folding.py validate_folding_global raises for
# AutoTP beside Ulysses (L210-212), AutoTP beside ZeRO-3 (L248-250: "reserved for the separate ZeRO-3
# composition lane") and AutoTP beside any ZeRO offload (L252-254), and runtime/engine.py L1851-1856
# asserts that AutoEP with ZeRO-3 runs neither AutoTP nor sequence parallelism. TP x EP runs at ZeRO
# 0-2 without offload or Ulysses. models/catalogue/stack_contract.py zero_layout_refusal.
AUTOEP_FOLDING_STACKS = Behaviour(
    "expert parallelism (DeepSpeed AutoEP) beside TP only at ZeRO 0-2 without offload or CP; with ZeRO-3 not beside CP",
    frozenset({"hf", "deepspeed"}), "models/catalogue/stack_contract.py")
