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
selective) leave 0.604 and 0.655 of dense peak for the matmuls once the bubble (7/64, 34/280),
the forward's TP collectives (the backward's overlap the backward GEMMs) and the p2p traffic are
taken out; their mean is 0.63 (0.65 while every TP collective was charged; the earlier 0.549 was
their raw HFU, which already contained the bubble). tests/models/time/test_parallel_calibration.py reproduces
both runs. Generations with no published calibration point reuse the nearest calibrated one and
say so (`calibrated=False`). tests/models/time/test_performance.py reproduces every row.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Efficiency:
    value: float
    calibrated: bool
    source: str
    borrowed_from: str | None = None  # the calibrated generation whose value this one reuses


_KORTHIKANTI = (
    "Korthikanti et al. arXiv:2205.05198 Table 5 (175B TP8 PP8, 530B TP8 PP35 on A100, 13.75 / 37.83 s per iteration):"
    " matmul efficiency 0.604 / 0.655 after the modelled bubble, forward TP collectives and p2p time"
)
_LLM_FOUNDRY = "llm-foundry benchmarking README (061f2c7): MPT-7B/13B/30B/70B HFU 46.44/39.79/50.82/56.76% on H100"

COMPUTE_EFFICIENCY: dict[str, Efficiency] = {
    "ampere": Efficiency(0.63, True, _KORTHIKANTI),
    "hopper": Efficiency(0.4845, True, _LLM_FOUNDRY),
    "volta": Efficiency(0.549, False, "no published point; Ampere's value", "ampere"),
    "ada": Efficiency(0.4845, False, "no published point; Hopper's value (same fp8 tensor-core generation)", "hopper"),
    "blackwell": Efficiency(0.4845, False, "no published point; Hopper's value", "hopper"),
    "cdna3": Efficiency(0.4845, False, "no published point; Hopper's value", "hopper"),
    "cdna4": Efficiency(0.4845, False, "no published point; Hopper's value", "hopper"),
    "turing": Efficiency(0.549, False, "no published point; Ampere's value", "ampere"),
}

# FP8 training (Transformer Engine, torchao float8): only the decoder's linear GEMMs run in fp8;
# attention, the output layer, norms and element-wise ops stay in bf16, and every fp8 GEMM pays the
# casts and scaling of its inputs. This is the speedup of those GEMMs, casts included, over bf16,
# fitted to torchtitan's own benchmark (benchmarks/llama3_h100_202412_torchtitan.md, Tables 1 and
# 3: Llama 3.1 8B, seq 8192, FSDP, selective AC, torch.compile: 6,667 -> 8,532 and 6,514 -> 8,380
# tokens/s/GPU with Float8 on 8 and 128 H100 = 1.28x): the linears hold 75.4% of that run's
# executed FLOPs (output layer excluded, torchtitan's float8 filter_fqns default), so
# 1 / (0.754 / g + 0.246) = 1.28 gives g = 1.41. The datasheet says 2.0x; the difference is the casts.
FP8_LINEAR_SPEEDUP = Efficiency(1.41, True, "torchtitan benchmarks/llama3_h100_202412_torchtitan.md Tables 1, 3 "
                                            "(Llama 3.1 8B, Float8 1.28x tokens/s over bf16)")

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


def compute_efficiency(architecture: str) -> Efficiency:
    return COMPUTE_EFFICIENCY.get(
        architecture, Efficiency(0.5, False, f"no data for architecture {architecture!r}; 0.5 assumed")
    )
