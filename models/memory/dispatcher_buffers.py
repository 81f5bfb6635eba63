"""The communication buffers of Megatron's flex token dispatcher (Job.moe_dispatcher deepep /
hybridep, models/time/moe_dispatch.py) and of torchtitan's DeepEP backend (v0.2.2's get_buffer is
Megatron's, line for line: FLEX_DISPATCHER_BUFFER_STACKS): allocated once per process beside the model, outside
torch's caching allocator (cudaMalloc, cuMemCreate or NVSHMEM), so they count in the device's
memory, not in torch.cuda.max_memory_allocated or max_memory_reserved (tests/measured_peaks.py
compares those without them, as without the CUDA context). Megatron's alltoall dispatcher sends
through NCCL and holds no buffer of its own. The dispatcher's group is the expert-TP x EP group
(NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/moe/token_dispatcher.py L1835-1841,
tp_ep_group): R = tp x ep ranks, vramplan's expert TP being tp (models/time/moe_gemm.py).

DeepEP (`--moe-flex-dispatcher-backend deepep`): Megatron builds one `deep_ep.Buffer(group,
num_nvl_bytes, num_rdma_bytes)` (megatron/core/transformer/moe/fused_a2a.py get_buffer L36-69),
the larger of DeepEP's dispatch and combine configs' size hints for `get_hidden_bytes` = h x
max(element bytes, 2) (L24-33), never in low-latency mode; num_sms 20 (token_dispatcher.py
L1287-1292, moe_flex_dispatcher_num_sms unset), so C = 10 channels. DeepEP (deepseek-ai/DeepEP@dd758caf
deep_ep/buffers/legacy.py L245-258 and L275-288 the configs per rank count, csrc/legacy/config.hpp
L53-99 the hints, kernels/legacy/compiled.cuh L5-9 the constants), with L = min(R, 8) NVLink peers,
M = max(R / 8, 1) RDMA ranks, Nn the config's nvl_recv and Nr its rdma_recv (aligned up to rdma_send):

    nvl  = up128(C L (2M + 3) 4 + C L Nn (hb + 2056))
    rdma = up128(144 C M + 2 C M Nr (hb + 2072))         only when R > 8, from NVSHMEM's heap

plus a 32 MiB workspace always. The RDMA buffer comes from NVSHMEM's symmetric heap, which DeepEP
maps in 512 MiB granules (legacy.py L116-122 NVSHMEM_CUMEM_GRANULARITY = 2**29): counted rounded
up to one (NVSHMEM's own bookkeeping is not in these sources). DeepEP refuses rank counts outside
its table (legacy.py L259 "Unsupported number of EP ranks"): a count between two of its entries
takes the larger, and one beyond its largest, 160, that one (not refused here).

HybridEP (`--moe-flex-dispatcher-backend hybridep`, DeepEP's hybrid-ep branch @ 94a9f8f6): Megatron
sizes `HybridEPBuffer` from the first dispatch's tokens on the rank (fused_a2a.py
init_hybrid_ep_buffer L340-347, L400-414: x.shape[-2], the micro-batch's s / cp tokens, / tp under
sequence parallelism), padded to T = up64(max(tokens, 512)) (csrc/hybrid_ep/config.cuh L385-387);
the intra-node buffers are sized for every token of the R ranks landing on one (buffer/intranode.cu
L127-129, L255-261: the token buffer T R h 2 bytes, bf16 whatever the training precision, fused_a2a.py
L327 refuses fp8 dispatch; the probabilities T R E_l L 4, shared with the dispatch's: use_shared_buffer
True, hybrid_ep_buffer.py L51; the scaling factors T R (h / 128) 4, allocated for bf16 too), the
routing-map all-gather E T R bytes (extension/allgather.cu L142-147), and across N = R / L NVLink
domains the inter-node dispatch and combine buffers (buffer/internode_doca.cu L388-428, L559-588):
T (2h + 4E + h/32) + (N - 1) T (6h + 12 E_l L + h/32), E_l the rank's local experts (E / ep). L,
the group's ranks in one NVLink domain, is HybridEP's detected domain (hybrid_ep_buffer.py L61-83):
taken as an 8-GPU node (L = min(R, 8)); an NVL72 rack holds up to 72, where N = 1 and the estimate
keeps (N - 1) T (6h + ...) bytes HybridEP does not allocate (1.2 GB for DeepSeek-V3 at EP 64).
Flags and scratch (under 0.1 MiB) are left out.

Derived from the sources, not measured (no GPU was lent): DeepSeek-V3 (h 7168, 256 experts) at EP
64 over 8-GPU nodes, 4096 tokens a rank: DeepEP 360 MiB NVLink + 512 MiB NVSHMEM + 32 MiB, HybridEP
4.87 GiB; Qwen3-30B-A3B (h 2048, 128 experts) at EP 16 over two nodes: DeepEP 135 + 512 + 32 MiB,
HybridEP 354 MiB (tests/models/memory/test_dispatcher_buffers.py).
"""

from __future__ import annotations

from vramplan.models.architecture.parallel import sequence_parallel_active
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.stack_behaviour import FLEX_DISPATCHER_BUFFER_STACKS
from vramplan.models.core.units import BYTES_PER_MIB, ceil_div
from vramplan.models.memory.precision import activation_bytes

DEEPEP_NUM_SMS = 20  # Megatron's default (token_dispatcher.py L1287-1292)
DEEPEP_NVL_PEERS = 8  # LEGACY_NUM_MAX_NVL_PEERS (kernels/legacy/compiled.cuh L5)
DEEPEP_WORKSPACE_BYTES = 32 * BYTES_PER_MIB  # compiled.cuh L7
NVSHMEM_GRANULE_BYTES = 512 * BYTES_PER_MIB  # legacy.py L116-122
# DeepEP's (nvl_recv, rdma_recv aligned to rdma_send) per rank count, the larger of its dispatch and
# combine configs (legacy.py L245-258, L275-288; config.hpp L47 align_up)
DEEPEP_CONFIGS = {2: (256, 0), 4: (256, 0), 8: (256, 0), 16: (288, 140), 24: (288, 128), 32: (288, 128),
                  48: (288, 128), 64: (288, 128), 96: (480, 132), 128: (560, 132), 144: (720, 132), 160: (720, 132)}
HYBRIDEP_DOMAIN = 8  # the group's ranks in one NVLink domain: an 8-GPU node (module docstring)
HYBRIDEP_TOKEN_BYTES = 2  # bf16 tokens: fp8 dispatch is refused (fused_a2a.py L327)


def _up(value: int, multiple: int) -> int:
    return ceil_div(value, multiple) * multiple


def deepep_bytes(hidden_size: int, element_bytes: int, ranks: int) -> int:
    """DeepEP's NVLink buffer, NVSHMEM heap share and workspace for a group of `ranks`."""
    nvl_recv, rdma_recv = DEEPEP_CONFIGS[min((r for r in DEEPEP_CONFIGS if r >= ranks), default=160)]
    hb = hidden_size * max(element_bytes, 2)
    channels = DEEPEP_NUM_SMS // 2
    peers, rdma_ranks = min(ranks, DEEPEP_NVL_PEERS), max(ranks // DEEPEP_NVL_PEERS, 1)
    nvl = _up(channels * peers * (2 * rdma_ranks + 3) * 4 + channels * peers * nvl_recv * (hb + 2056), 128)
    rdma = 0
    if ranks > DEEPEP_NVL_PEERS:
        rdma = _up(_up(144 * channels * rdma_ranks + 2 * channels * rdma_ranks * rdma_recv * (hb + 2072), 128),
                   NVSHMEM_GRANULE_BYTES)
    return nvl + rdma + DEEPEP_WORKSPACE_BYTES


def hybridep_bytes(hidden_size: int, tokens: int, ranks: int, local_experts: int, experts: int) -> int:
    """HybridEP's intra- and inter-domain buffers for `tokens` on each of `ranks`."""
    t = _up(max(tokens, 512), 64)
    domain = min(ranks, HYBRIDEP_DOMAIN)
    domains = ceil_div(ranks, domain)
    h, s = hidden_size, HYBRIDEP_TOKEN_BYTES
    scales = h // 128 * 4
    total = t * ranks * (h * s + 4 * local_experts * domain + scales + experts)
    if domains > 1:
        total += (t * (h * s + 4 * experts + scales)
                  + (domains - 1) * t * (h * s + 4 * local_experts * domain + scales)  # the dispatch's
                  + 2 * (domains - 1) * t * (2 * h + 4 * local_experts * domain))  # the combine's
    return total


def holds_dispatcher_buffers(arch: Architecture, job: Job) -> bool:
    """Whether the job's plans with EP hold a flex dispatcher's buffers: a MoE model, a DeepEP or
    HybridEP dispatcher, a stack in FLEX_DISPATCHER_BUFFER_STACKS."""
    return arch.is_moe and job.moe_dispatcher in ("deepep", "hybridep") and job.stack in FLEX_DISPATCHER_BUFFER_STACKS


def dispatcher_buffer_bytes(arch: Architecture, job: Job, plan: Plan) -> int:
    """What the plan's flex dispatcher allocates on each rank (0 without EP or holds_dispatcher_buffers)."""
    if plan.ep == 1 or not holds_dispatcher_buffers(arch, job):
        return 0
    ranks = plan.tp * plan.ep
    if job.moe_dispatcher == "deepep":
        return deepep_bytes(arch.hidden_size, activation_bytes(plan.precision), ranks)
    tokens = plan.micro_batch * (job.seq_len // plan.cp)  # hybridep: the micro-batch's tokens on the rank
    tokens = ceil_div(tokens, plan.tp) if sequence_parallel_active(plan) else tokens
    return hybridep_bytes(arch.hidden_size, tokens, ranks, arch.num_experts // plan.ep, arch.num_experts)
