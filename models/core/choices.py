"""The value domains of the job and plan fields (choices and limits), as plain constants.

The pydantic models (models/core/setup.py) and the command line's options (commands/options.py) both
read them from here: `--help` builds its choices without importing pydantic.
"""

from __future__ import annotations

from typing import Literal

Method = Literal["full", "lora", "qlora"]
Precision = Literal["bf16", "fp16", "fp32", "fp8"]
Optimizer = Literal["adamw", "adamw-8bit", "sgd", "adamw-8bit-paged"]
Accounting = Literal["zero", "hf"]
Attention = Literal["flash", "eager"]
Kernels = Literal["eager", "fused"]
Recompute = Literal["none", "selective", "op", "full"]
Offload = Literal["none", "optimizer", "optimizer+params"]
ZeroStage = Literal[0, 1, 2, 3]
# Training-stack recipes (models/memory/recipe.py, loss.py, recompute.py, fragmentation.py; presets in
# catalogues/stacks.csv, read by models/catalogue/stack.py).
Stack = Literal["hf", "deepspeed", "megatron", "torchtitan", "torchtitan-root-fsdp", "torchtune", "litgpt", "litgpt-fsdp1",
                "unsloth", "custom"]
MasterWeights = Literal["fp32", "none"]
Loss = Literal["eager", "chunked", "fused"]
Selective = Literal["attention", "op"]
# Which partial full recompute a stack can run (catalogues/stacks.csv `partial_recompute`): none; any
# number of layers (Megatron --recompute-num-layers); every N-th layer (torchtitan selective_ac_option).
PartialRecompute = Literal["none", "any", "every-nth"]
QloraPrep = Literal["16bit", "peft"]
# torch.compile (models/memory/loss.py, activation_terms.py, models/time/compile_speed.py): none; the
# decoder blocks only (torchtitan apply_compile, torchtune compile_model: one torch.compile per block);
# the blocks and the loss (torchtitan's CompileConfig.components default ["model", "loss"], torchtune's
# `compile: True`, which also runs training.compile_loss).
Compile = Literal["none", "model", "model+loss"]
# The EP token dispatcher (models/time/moe_dispatch.py): Megatron's all-to-all of one copy per chosen
# expert (--moe-token-dispatcher-type alltoall; torchtitan's standard all-to-all), or its flex
# dispatcher on DeepEP or HybridEP (--moe-flex-dispatcher-backend deepep | hybridep: a token once
# per remote node over the network, then once per rank over NVLink).
MoeDispatcher = Literal["alltoall", "deepep", "hybridep"]
# CUDA graphs of the training step (models/time/moe_host.py): none; Transformer Engine's per-layer
# graphs of each layer's attention, MoE router and preprocess (Megatron --cuda-graph-impl
# transformer_engine --cuda-graph-modules attn moe_router moe_preprocess, the scope of
# Megatron-Bridge's MoE performance recipes); or the whole forward-backward as one graph
# (--cuda-graph-impl full_iteration).
CudaGraphs = Literal["none", "attn", "full-iteration"]
# The frozen base of a LoRA job as loaded: in the training precision, or fp32 (a model loaded in
# fp32 and kept so by FSDP's flat parameters, casting only the gathered copy: PEFT's examples/sft).
BaseDtype = Literal["16bit", "fp32"]
# What GPU memory is planned against: the estimate, or the top of its range (models/core/fidelity_ranges.py).
MemoryBound = Literal["estimate", "upper"]

METHODS: tuple[Method, ...] = ("full", "lora", "qlora")
PRECISIONS: tuple[Precision, ...] = ("bf16", "fp16", "fp32", "fp8")
OPTIMIZERS: tuple[Optimizer, ...] = ("adamw", "adamw-8bit", "sgd", "adamw-8bit-paged")
RECOMPUTES: tuple[Recompute, ...] = ("none", "selective", "op", "full")
OFFLOADS: tuple[Offload, ...] = ("none", "optimizer", "optimizer+params")
ZERO_STAGES: tuple[ZeroStage, ...] = (0, 1, 2, 3)
STACKS: tuple[Stack, ...] = ("hf", "deepspeed", "megatron", "torchtitan", "torchtitan-root-fsdp", "torchtune", "litgpt",
                              "litgpt-fsdp1", "unsloth", "custom")
# Stacks a search of `--stack any` leaves out: custom (no limits) and the releases a current stack
# replaced (litgpt-fsdp1: lit-gpt up to v0.5.7, today's litgpt runs FSDP2; torchtitan-root-fsdp:
# torchtitan before 83e6941 (#1094, 2025-07-28), whose FSDP root unit held the embedding, final norm
# and output; today's torchtitan shards them as units of their own).
NOT_IN_ANY: frozenset[Stack] = frozenset({"custom", "litgpt-fsdp1", "torchtitan-root-fsdp"})
MASTER_WEIGHTS: tuple[MasterWeights, ...] = ("fp32", "none")
LOSSES: tuple[Loss, ...] = ("eager", "chunked", "fused")
SELECTIVES: tuple[Selective, ...] = ("attention", "op")
MEMORY_BOUNDS: tuple[MemoryBound, ...] = ("estimate", "upper")
BASE_DTYPES: tuple[BaseDtype, ...] = ("16bit", "fp32")
QLORA_PREPS: tuple[QloraPrep, ...] = ("16bit", "peft")
COMPILES: tuple[Compile, ...] = ("none", "model", "model+loss")
MOE_DISPATCHERS: tuple[MoeDispatcher, ...] = ("alltoall", "deepep", "hybridep")
CUDA_GRAPHS: tuple[CudaGraphs, ...] = ("none", "attn", "full-iteration")

# Domains shared by estimate, solve and batch (docs/input-rules.md#domains).
MAX_GPUS = 16_384  # GPUs the solver searches up to (max_gpus, max_nodes): Llama 3 405B trained on 16,384 H100
MAX_PLAN_GPUS = 65_536  # GPUs in one given plan (Llama 3 405B trained on 16,384 H100)
MAX_GLOBAL_BATCH = 65_536  # sequences per optimizer step (also micro-batch and accumulation)
MAX_RESTART_OVERHEAD = 10.0  # on spot, the share of the work preemptions make a run do again: at most 10x more
MAX_TOKENS = 1e14  # tokens to train on; Llama 3 pre-trained on about 1.5e13 (Meta, 'The Llama 3 Herd of Models', 2024)
MIN_TOKENS = 1  # at least one token: with 1e-300 tokens a job takes 1e-300 steps, and the step time a budget or
# a deadline allows (SearchSpace.deadline_bound_us, budget_bound_cost_units) is float infinity
# A plan nobody would run (issue 31: the team sheet's 512 x 1-GPU VMs at 1.4% MFU, plans over a
# year): below MFU_FLOOR its GPUs mostly wait. Plans get a warning (models/estimate.py), and
# `solve` leaves them out unless --min-mfu / --max-days say otherwise (solver/query.py).
MFU_FLOOR = 0.05
# --jurisdiction eu: the 27 member states of the European Union (ISO 3166-1 alpha-2; Greece is GR,
# not the EU's own EL), as listed by europa.eu/principles-countries-history/eu-countries (2026).
JURISDICTIONS = {"eu": frozenset({"AT", "BE", "BG", "HR", "CY", "CZ", "DK", "EE", "FI", "FR", "DE", "GR", "HU", "IE",
                                  "IT", "LV", "LT", "LU", "MT", "NL", "PL", "PT", "RO", "SK", "SI", "ES", "SE"})}
Jurisdiction = Literal["eu"]
DAYS_PER_YEAR = 365

# The runtime reserve's defaults (models/core/setup.py RuntimeReserve; sources in models/memory/overhead.py).
CUDA_CONTEXT_MIB = 600
CUBLAS_WORKSPACE_MIB = 64
NCCL_MIB = 512
