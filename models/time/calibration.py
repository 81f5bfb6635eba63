"""Efficiency assumptions of the performance model: data with their sources, never magic numbers.

COMPUTE_EFFICIENCY is the fraction of the dense datasheet peak that training matmuls achieve
(hardware FLOPs, recompute included), per GPU generation, calibrated against published runs:

| run (source)                                               | GPUs     | MFU    | HFU    |
|------------------------------------------------------------|----------|--------|--------|
| GPT 175B, TP8 PP8, SP + selective (Korthikanti, Table 5)   | 64 A100  | 51.4%  | 52.8%  |
| GPT 530B, TP8 PP35, SP + selective (Korthikanti, Table 5)  | 280 A100 | 56.0%  | 57.0%  |
| MPT-7B, seq 2048, FSDP, mb 6, no ckpt (llm-foundry)        | 8 H100   | 46.44% | 46.44% |
| MPT-13B, seq 2048, FSDP, mb 2, no ckpt (llm-foundry)       | 8 H100   | 39.79% | 39.79% |
| MPT-30B, seq 2048, FSDP, mb 3 x 21, ckpt (llm-foundry)     | 8 H100   | 38.11% | 50.82% |
| MPT-70B, seq 2048, FSDP, mb 8 x 4, ckpt (llm-foundry)      | 64 H100  | 42.57% | 56.76% |

llm-foundry: mosaicml/llm-foundry `scripts/train/benchmarking/README.md` at commit 061f2c7,
"H100 80GB BF16" table. Hopper takes the mean HFU of the four MPT runs (their data-parallel
traffic is modelled separately and mostly hidden). Ampere is fitted to the two Korthikanti runs
with their TP/PP layouts, now that the pipeline bubble and the TP collectives are modelled
(models/time/parallel_time.py): the published iteration times (13.75 s and 37.83 s with SP +
selective) leave 0.6215 and 0.7018 of dense peak for the matmuls once the bubble (7/64, 34/280) of
the slowest stage's time (its compute and the collectives and p2p its micro-batches wait on,
pipeline_schedule.stage_time_s), what that stage adds to the mean (the output layer on the last of
12 and of 3 layers a stage: 1.025x and 1.066x, pipeline_schedule.stage_imbalance), the forward's TP
collectives (the backward's overlap the backward GEMMs) and the p2p traffic are taken out; their
mean is 0.662 (0.658 while the bubble counted the compute alone, 0.63 before the slowest stage was
modelled, 0.65 while every TP collective was charged; the earlier 0.549 was their raw HFU, which
already contained the bubble). The wider GEMMs of the 530B
(h 20480 against 12288) run closer to peak. tests/models/time/test_parallel_calibration.py reproduces
both runs. tests/models/time/test_performance.py reproduces every row.

Blackwell is fitted against Hopper on pairs of runs NVIDIA published from one release of one stack
(Megatron-Bridge docs/performance-summary-archive.md, "25.11 NeMo Container", FP8 current scaling,
seq 8192; settings from scripts/performance/configs/llama/*_workload_base_configs.py at 97ad8cc6f):

| model       | Hopper run (tokens/s/GPU)                            | Blackwell run (tokens/s/GPU)                        |
|-------------|------------------------------------------------------|-----------------------------------------------------|
| Llama 3 8B  | 8 H100, DDP, mb 1 x 16, 5 layers recomputed: 14,451  | 8 B200, DDP, mb 2 x 8: 30,624; 8 GB200: 31,508      |
| Llama 3.1 405B | 1024 H100, TP8 PP8 CP2 VP8, batch 512: 292         | 128 B200, TP4 PP8 CP2 VP8, batch 64: 661            |

vramplan predicts both Hopper runs 0.91x and 0.97x of what Megatron reaches (with the fp8 model
of models/time/fp8.py, Transformer Engine's casts included, its cuDNN attention,
models/time/attention_kernel.py, and Megatron's dense-layer kernel speed, STACK_KERNEL_SPEED below;
0.77x and 0.81x without that speed), so a Blackwell run is fitted to the same relative error as its
Hopper pair: the efficiency at which vramplan predicts the B200 / GB200 run that fraction of its
measurement, 0.443 (B200 8B), 0.419 (GB200 8B, its data-parallel traffic on the NVL72's NVLink),
0.479 (B200 405B): mean 0.447, since ZeRO-1's traffic hides only behind the last micro-batch and the
parameter all-gather behind the first forward (models/time/performance.py dp_windows_s; 0.443 /
0.422 / 0.469, mean 0.445, before, the GB200 run's traffic then timed over the network; 0.442 / 0.419 /
0.472, mean 0.444, before the kernel speed; 0.448 while the 405B pair gave 0.483, before Megatron's
interleaved p2p ran beside the compute, OVERLAPPED_P2P_STACKS)
(tests/models/time/test_generation_calibration.py reproduces the fit; 0.441 / 0.417 / 0.483, mean
0.447, before the attention kernel, which both runs of a pair share; 0.431 / 0.402 / 0.486, mean
0.44, under the former fitted fp8 speedup). GB300 lists GB200's peaks but runs faster: its own
speed (GPU_SPEED below) is fitted against GB200 the same way. Fitted to the fp8 runs alone
(ignoring that Hopper's are under-predicted too) Blackwell would read 0.56-0.59. A B200 run
under a power cap (torchao's mx_formats README: Llama 3 8B, 8 power-limited B200, bf16, FSDP2,
per-op SAC: 8,307.5 tokens/s/GPU) is 1.8x below the prediction and calibrates nothing: the cap is
not stated.

CDNA3 (MI300X / MI325X) is fitted to the one published training run with every setting stated in
text: pytorch/ao torchao/float8/README.md @ 853f87d1, torchtitan 2c8b594 on torch
2.9.0.dev20250811+rocm6.4, Llama 3.1 8B on 8 MI300X, FSDP 8, local batch 1 x 8192, per-op SAC,
torch.compile of blocks and loss: 5,376.5 tokens/s/GPU in bf16, 6,166 with Float8 tensorwise.
vramplan reproduces the bf16 run at 0.2685 (it read 1.80x fast at Hopper's borrowed 0.4845); the
Float8 twin, not fitted, then reads 0.99 (tests/models/time/test_generation_calibration.py). AMD
publishes its Megatron / MaxText throughput as charts and MLPerf time-to-train, so there is no
second point; the value is the ROCm nightly's eager-plus-compile torch stack of that run, and a
better-tuned stack (AMD's Megatron fork) may run faster.

Generations with no published calibration point reuse a calibrated one and say so
(`calibrated=False`, `borrowed_from`).
"""

from __future__ import annotations

from dataclasses import dataclass

from vramplan.models.core.catalogue_schema import GpuSpec


@dataclass(frozen=True)
class Efficiency:
    value: float
    calibrated: bool
    source: str
    borrowed_from: str | None = None  # the calibrated generation whose value this one reuses


_KORTHIKANTI = (
    "Korthikanti et al. arXiv:2205.05198 Table 5 (175B TP8 PP8, 530B TP8 PP35 on A100, 13.75 / 37.83 s per iteration):"
    " matmul efficiency 0.6215 / 0.7018 after the modelled bubble, stage imbalance, forward TP collectives and p2p time"
)
_LLM_FOUNDRY = "llm-foundry benchmarking README (061f2c7): MPT-7B/13B/30B/70B HFU 46.44/39.79/50.82/56.76% on H100"

_MEGATRON_BRIDGE = (
    "Megatron-Bridge performance summary, 25.11 NeMo container, FP8-CS, fitted against the paired H100 runs: "
    "Llama 3 8B on 8 B200 30,624 / 8 GB200 31,508 vs 8 H100 14,451 tokens/s/GPU; Llama 3.1 405B on 128 B200 661 vs "
    "1024 H100 292 (paired efficiencies 0.443 / 0.419 / 0.479)"
)

_TORCHAO_MI300X = (
    "torchao float8 README (853f87d1), torchtitan 2c8b594 on ROCm 6.4: Llama 3.1 8B, 8 MI300X, FSDP 8, 1 x 8192, "
    "per-op SAC, compiled: 5,376.5 tokens/s/GPU bf16 (the fit), 6,166 Float8 (the check: 0.99)"
)

_CALIBRATED: dict[str, Efficiency] = {
    "ampere": Efficiency(0.662, True, _KORTHIKANTI),
    "hopper": Efficiency(0.4845, True, _LLM_FOUNDRY),
    "blackwell": Efficiency(0.447, True, _MEGATRON_BRIDGE),
    "cdna3": Efficiency(0.2685, True, _TORCHAO_MI300X),
}


def _borrowed(generation: str, reason: str) -> Efficiency:
    return Efficiency(_CALIBRATED[generation].value, False, f"{reason}; {generation.capitalize()}'s value", generation)


COMPUTE_EFFICIENCY: dict[str, Efficiency] = {
    **_CALIBRATED,
    "volta": _borrowed("ampere", "no published point"),
    "turing": _borrowed("ampere", "no published point"),
    "ada": _borrowed("hopper", "no published point (same fp8 tensor-core generation as Hopper)"),
    "cdna4": _borrowed("hopper", "no published point"),
}

# A GPU's own speed against the GPUs its generation is calibrated on, where runs of one stack's
# release on one configuration on both isolate it (compute_efficiency multiplies it in): how fast its
# dense layers run under load against its datasheet peak, GEMMs and the rest alike (so the fp8 GEMMs'
# share, fp8.fp8_gemm_time_ratio, keeps the generation's). The routed experts keep the generation's
# speed, as with STACK_KERNEL_SPEED: the twins are dense, and Megatron's Qwen3 and DeepSeek-V3 runs on
# GB300 read 0.94-1.23 with it on the dense layers alone (Qwen3-30B-A3B's the highest, 1.17-1.23; with it
# on the experts too 1.2-1.4). GB300 (Blackwell Ultra,
# 1.4 kW) lists GB200's dense peaks (2.5 PF bf16, 5 PF fp8 per GPU) but ran Megatron-Bridge's dense
# Llama runs 1.20-1.27x faster on the same configuration in every release that published both
# (tests/data/measured_throughput.csv: Llama 3 8B MXFP8 DP 8, Llama 3 70B LoRA PP 2, Llama 3 70B
# Megatron FSDP 64 in 26.02, 26.02.01, 26.04, 26.04.01); the speed is the mean of the six that put
# each GB300 run at its GB200 twin's predicted / measured (1.214-1.281;
# tests/models/time/test_generation_calibration.py reproduces it). B300 keeps Blackwell's: its only
# twins are DeepSeek-V3 MoE runs that wait for the host, which cannot separate the GPU from the host
# (they would need x1.71-1.75 on the dense layers).
_GB300_PAIRS = ("Megatron-Bridge performance summaries 26.02-26.04.01: six dense Llama runs on GB300 and GB200 on one "
                "configuration each, GB300 1.20-1.27x faster; the mean speed that reads each GB300 run as its GB200 twin")
GPU_SPEED: dict[str, Efficiency] = {"gb300-288gb": Efficiency(1.24, True, _GB300_PAIRS)}

# A stack's dense layers' kernels against those of the stacks the generations are calibrated on
# (llm-foundry on Hopper): Megatron-Core's Transformer Engine layers (the norm fused into the QKV and
# FC1 GEMMs, fused SwiGLU, RoPE and cross-entropy, gradient-accumulation fusion into main_grad) ran
# the four Megatron-Core bf16 dense runs on H100 the table holds (Qwen3 8B DP 16; Llama 3.1 8B CP 2,
# 70B TP 4 PP 4 CP 2 and 405B TP 8 PP 8 CP 2 on NeMo 25.02) 1.09-1.18x faster than Hopper's
# efficiency reads them (tests/data/measured_throughput.csv); the speed is their mean, 1.14 (1.13
# before ZeRO-1's traffic hid only behind the last micro-batch: performance.py dp_windows_s)
# (tests/models/time/test_megatron_fp8_pairs.py reproduces it). Nothing fp8 is fitted: the fp8 gain
# follows from it (fp8.fp8_gemm_time_ratio), and the fp8 runs on H100, B200, GB200 and GB300 are the
# check. The routed experts' grouped GEMMs keep the generation's speed (compute_efficiency with stack
# None): Megatron's MoE runs, timed by their shape (moe_gemm.py) and the host wait (moe_host.py), read
# within 20% without it.
_MEGATRON_BF16 = ("Megatron-Core bf16 dense runs on H100 (Megatron-Bridge Qwen3 8B verification card; NeMo 25.02 "
                  "Llama 3.1 8B / 70B / 405B): 1.12 / 1.18 / 1.12 / 1.13x Hopper's efficiency, mean 1.14")
STACK_KERNEL_SPEED: dict[str, Efficiency] = {"megatron": Efficiency(1.14, True, _MEGATRON_BF16)}
# The generations each speed holds on: those its runs fit or check (Megatron's: Hopper, fitted; Blackwell,
# 50 dense runs checked), and those borrowing their value. Not Ampere, fitted to Megatron-LM's own runs
# (Korthikanti et al.), which carry its speed already, nor CDNA3, whose one calibrating run is
# torchtitan's on ROCm, where no Megatron run is published.
STACK_KERNEL_SPEED_GENERATIONS: dict[str, frozenset[str]] = {"megatron": frozenset({"hopper", "blackwell"})}

# FP8 training (models/time/fp8.py): only the decoder's linear GEMMs run in fp8, their operands
# quantized by the stack's recipe (catalogues/stacks.csv `fp8_recipe`). The casts are element-wise
# kernels streaming through HBM at this fraction of its bandwidth: torchao's own roofline
# (torchao/testing/training/roofline_utils.py @ 0598012, pct_achievable_mem_bw: "pointwise triton
# kernels with large inputs" on an H100). The GEMMs gain at GEMM_PLATEAU below (fp8.fp8_gemm_time_ratio).
FP8_CAST_HBM_EFFICIENCY = Efficiency(0.92, False, "torchao roofline_utils.py pct_achievable_mem_bw (H100 pointwise kernels)")

# Expert GEMMs (models/time/moe_gemm.py): fitted to DeepGEMM's FP8 GEMM table on H800
# (deepseek-ai/DeepGEMM README at a6d97a1, 2025-02-25: 18 dense shapes, M = 64 / 128 / 4096, and
# 10 grouped ones, 256-8192 tokens per group, N x K of DeepSeek-V3) by least squares in log space
# (tests/models/time/test_moe_kernels.py reproduces it: rms log error 0.118, 24 of 28 within 15%; the
# misses are the three N = 2112 shapes, where too few output tiles fill the SMs, and 128 x 7168 x
# 16384): operands at 1 byte, fitted values 0.71, 650 and 0.70: the plateau rate at large shapes,
# the reduction length over which a tile's fixed cost halves the rate, and the fraction of HBM
# bandwidth at which a GEMM streams its operands (time = quadrature of compute and memory).
_DEEPGEMM = "DeepGEMM README (a6d97a1) FP8 GEMM table, H800: 28 shapes fitted, rms log error 0.118"
GEMM_PLATEAU = Efficiency(0.71, True, _DEEPGEMM)
GEMM_K_HALF = Efficiency(650.0, True, _DEEPGEMM)
GEMM_HBM_EFFICIENCY = Efficiency(0.70, True, _DEEPGEMM)

# A loop over experts (litgpt LLaMAMoE, transformers < 5 `for expert_idx in expert_hit`) launches per
# expert and micro-batch about 9 kernels forward (a nonzero that syncs the host, the gather, gate,
# up, activation, down, the routing-weight multiply, index_add_) and 18 backward; at ~4 us of CUDA
# launch latency each that is 0.1 ms the GPU waits. No published end-to-end run isolates it.
LOOP_EXPERT_OVERHEAD_S = Efficiency(1.0e-4, False, "27 kernel launches per expert and micro-batch at ~4 us each; not fitted")

# A dropless MoE layer that waits for the host (models/time/moe_host.py, HOST_SYNCED_MOE_STACKS:
# Megatron-Core): the host's seconds to launch one layer's interval after the sync, a fixed part
# (smaller where Transformer Engine's per-layer CUDA graphs replay the attention, router and
# preprocess: Job.cuda_graphs "attn") and one per local expert (Transformer Engine launches each
# expert's GEMMs on its own). Fitted by least absolute log error on a 0.25 ms x 0.25 ms x 0.025 ms
# grid to Megatron-Bridge's published Qwen3-30B-A3B and Qwen3-235B-A22B runs without a
# full-iteration graph (tests/data/measured_throughput.csv, 42 runs of 25.09-26.06 on H100, B200,
# GB200, B300 and GB300, micro-batch 1-8, EP 8-32: within 20% on 37, 12 without the host time);
# DeepSeek-V3's 20 such runs (4-32 local experts, MLA) are the check: 20 within 20%, 15 without
# (tests/models/time/test_moe_host.py reproduces both). The 42nd run (Qwen3-235B-A22B BF16 on 256
# GB300, 25.11) moved the fixed part from 3.25 to 3.0 ms: the log errors summed 4.78 against 4.79.
# ZeRO-1's traffic hiding only behind the last micro-batch (performance.py dp_windows_s) moved it to
# 2.75 ms and the per-expert part from 0.275 to 0.3 ms (36 -> 37 within 20%).
_MOE_HOST_FIT = ("Megatron-Bridge performance summaries (25.09-26.06): Qwen3-30B-A3B and Qwen3-235B-A22B runs "
                 "without full-iteration CUDA graphs, least absolute log error over 42 runs")
MOE_HOST_SYNC_S = Efficiency(2.75e-3, True, _MOE_HOST_FIT)
MOE_HOST_SYNC_GRAPHED_S = Efficiency(2.0e-3, True, _MOE_HOST_FIT)  # the attention, router and preprocess graphed
MOE_HOST_EXPERT_S = Efficiency(3.0e-4, True, _MOE_HOST_FIT)

# Achievable fraction of link bandwidth for NCCL collectives (bus bandwidth / link bandwidth):
# nccl-tests all_reduce_perf on NVLink and InfiniBand systems typically reaches about 80% of the
# one-direction link rate for large messages (NVIDIA nccl-tests PERFORMANCE.md defines busbw so it
# is comparable with link bandwidth).
COMMUNICATION_EFFICIENCY = Efficiency(0.8, False, "nccl-tests busbw vs link rate, typical large-message figure")

# GPU optimizer step: memory bound. AdamW reads param, grad, master, m, v and writes param,
# master, m, v: bytes moved per trainable parameter of the rank's partition.
OPTIMIZER_STEP_BYTES_PER_PARAM = 2 + 2 + 12 + 2 + 12

# ZeRO-Offload CPU optimizer: DeepSpeed CPU-Adam (ZeRO-Offload, arXiv:2101.06840, sec. 5) is
# memory-bandwidth bound on the host; we assume 10 GB/s of host memory bandwidth per GPU process
# and PCIe Gen4 x16 (25 GB/s achievable) for the gradient and parameter transfers.
HOST_OPTIMIZER_BANDWIDTH_GB_PER_S = 10.0
PCIE_BANDWIDTH_GB_PER_S = 25.0


def generation_efficiency(architecture: str) -> Efficiency:
    """The GPU generation's calibrated efficiency (COMPUTE_EFFICIENCY), or 0.5 marked uncalibrated."""
    return COMPUTE_EFFICIENCY.get(
        architecture, Efficiency(0.5, False, f"no data for architecture {architecture!r}; 0.5 assumed")
    )


def _scaled(base: Efficiency, factor: Efficiency | None) -> Efficiency:
    if factor is None:
        return base
    return Efficiency(base.value * factor.value, base.calibrated, f"{base.source}; x{factor.value:g}: {factor.source}",
                      base.borrowed_from)


def expert_efficiency(gpu: GpuSpec) -> Efficiency:
    """The routed experts' efficiency: the generation's alone, at which their grouped GEMMs are timed
    by their shape (models/time/moe_gemm.py); the stack's and the GPU's speeds are measured on dense
    layers (STACK_KERNEL_SPEED, GPU_SPEED)."""
    return generation_efficiency(gpu.architecture)


def stack_efficiency(gpu: GpuSpec, stack: str) -> Efficiency:
    """The generation's efficiency times the stack's dense layers' kernel speed (STACK_KERNEL_SPEED)
    on the generations it holds on (STACK_KERNEL_SPEED_GENERATIONS). Its ratio to GEMM_PLATEAU is the
    GEMMs' share of a dense linear's time (models/time/fp8.py)."""
    base = generation_efficiency(gpu.architecture)
    if (base.borrowed_from or gpu.architecture) not in STACK_KERNEL_SPEED_GENERATIONS.get(stack, ()):
        return base
    return _scaled(base, STACK_KERNEL_SPEED.get(stack))


def compute_efficiency(gpu: GpuSpec, stack: str) -> Efficiency:
    """The fraction of the GPU's dense peak the stack's dense layers' matmuls reach: stack_efficiency
    times the GPU's own speed (GPU_SPEED), both calibrated on dense runs. Calibrated where the
    generation is."""
    return _scaled(stack_efficiency(gpu, stack), GPU_SPEED.get(gpu.name))
