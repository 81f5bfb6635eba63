"""What the EP dispatcher sends per routed token over NVLink and over the network (the job's
`moe_dispatcher`, models/core/choices.py MoeDispatcher), as shares of the all-to-all dispatcher's
routed bytes (models/time/ep_time.py EpTraffic.routed_bytes: top-k copies of every token).

- alltoall (Megatron-LM core_v0.19.0 token_dispatcher.py MoEAlltoAllTokenDispatcher; torchtitan's
  "standard" expert-parallel all-to-all; every stack's default here): the tokens are permuted into
  one row per (token, chosen expert) and all-to-all'd, top-k copies per token, each to its
  expert's rank: ep_time.all_to_all_seconds' (inside - 1) / ep and (ep - inside) / ep shares.
- deepep, hybridep (Megatron's flex dispatcher, --moe-token-dispatcher-type flex with
  --moe-flex-dispatcher-backend deepep | hybridep, token_dispatcher.py MoEFlexTokenDispatcher over
  the expert-TP x EP group, its routing map expanded to every TP rank of an expert's EP rank:
  _initialize_metadata): a token crosses the network once per remote node that holds any of its
  experts, to the same local rank there, which forwards it over NVLink once to every rank of its
  node that holds any of them; inside the source node NVLink carries one copy per other rank that
  needs it. DeepEP (deepseek-ai/DeepEP dd758ca csrc/kernels/legacy/layout.cu get_dispatch_layout:
  is_token_in_rank = is_in_rank > 0, num_tokens_per_rdma_rank += is_in_rdma_rank > 0, the RDMA
  ranks LEGACY_NUM_MAX_NVL_PEERS = 8 GPUs each); HybridEP (DeepEP hybrid-ep 94a9f8f
  csrc/hybrid_ep/backend/hybrid_ep_backend.cuh scan: attn_to_rdma_map[token, remote node] = any
  expert of the node chosen; the RDMA warp group (N2N_warp_group_device_function) puts one
  HIDDEN_DIM row per token and remote node; sparse_to_dense_map one row per token and rank;
  docs/Hybrid-EP_Implementation.md 8: "first performs IB communication between peer GPUs, then
  each rank distributes the received inter-node data locally"; rdma_token_buffer
  max_tokens_per_rank x (num_nodes - 1) x hidden). The combine is the mirror (HybridEP pre-reduces
  inside the node before the RDMA send; the combine is the dispatch's backward and vice versa:
  Megatron fused_a2a.py FusedDispatch / HybridEPDispatch), so all four passes move the same.
  Balanced routing (Megatron-Bridge's runs force it: moe_router_force_load_balancing): a token's
  top-k experts are k of the E drawn without replacement, so a set of m experts is missed with
  probability C(E - m, k) / C(E, k) (hypergeometric); the EP ranks hold E / ep experts each, a
  node its ranks' (_node_ranks). Not modelled: the routing probabilities sent beside the tokens
  (HybridEP's forward dispatch sends experts-per-node float32 per token and node, 1/16 of a
  Qwen3-30B-A3B token row), and group-limited routing (DeepSeek-V3's topk_group: at most 4 nodes
  a token), which the architecture catalogue does not hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vramplan.models.core.choices import MoeDispatcher
from vramplan.models.core.setup import Job, Plan

# Dispatchers that send a token once per node over the network and once per rank over NVLink.
NODE_DEDUPLICATING: frozenset[MoeDispatcher] = frozenset({"deepep", "hybridep"})


@dataclass(frozen=True)
class Dispatch:
    """What the all-to-all's shares depend on besides the layout: the job's dispatcher and the
    model's routed experts and top-k (GPU- and instance-independent: EpTraffic carries it)."""

    dispatcher: MoeDispatcher
    experts: int
    topk: int

    @property
    def deduplicates(self) -> bool:
        return self.dispatcher in NODE_DEDUPLICATING


def routed_tokens(job: Job, plan: Plan) -> float:
    """The tokens of one micro-batch a rank routes to the experts: micro-batch x s / cp, / tp under
    sequence parallelism (each TP rank dispatches its sequence shard; the all-to-all's rows in
    ep_time.ep_traffic, the permutations' in moe_permute.py)."""
    tokens: float = plan.micro_batch * (job.seq_len // plan.cp)
    return tokens / plan.tp if plan.sequence_parallel and plan.tp > 1 else tokens


def miss_probability(experts: int, held: int, topk: int) -> float:
    """P(none of a token's top-k experts is among `held` given ones): C(E - m, k) / C(E, k), each of
    the C(E, k) expert sets equally likely (balanced routing); exact integers, one rounding."""
    return math.comb(experts - held, topk) / math.comb(experts, topk)


def _node_ranks(ep: int, inside: int) -> list[int]:
    """EP ranks of each node the group spans, the source's node first: `inside` each, the last the
    rest (ep_time._ep_members_inside)."""
    return [inside] * (ep // inside) + ([ep % inside] if ep % inside else [])


def expected_copies(dispatch: Dispatch, tp: int, ep: int, inside: int) -> tuple[float, float]:
    """(NVLink copies, network copies) of one token a node-deduplicating dispatcher sends, expected
    under balanced routing: over the network one per remote node holding any of its experts; over
    NVLink, in every node it reaches, one per rank holding any of them (each of an EP rank's tp
    expert-TP ranks: the flex dispatcher's expanded routing map) but the one it arrives on (the
    source rank in its node, the same local rank in a remote one, itself hit only with its EP rank)."""
    per_rank = dispatch.experts // ep
    rank_hit = 1 - miss_probability(dispatch.experts, per_rank, dispatch.topk)
    nodes = _node_ranks(ep, inside)
    network = sum(1 - miss_probability(dispatch.experts, per_rank * ranks, dispatch.topk) for ranks in nodes[1:])
    nvlink = sum((tp * ranks - 1) * rank_hit for ranks in nodes)
    return nvlink, network


def dispatch_shares(dispatch: Dispatch, tp: int, ep: int, inside: int) -> tuple[float, float]:
    """(NVLink, network) share of the routed bytes (top-k copies a token) a node-deduplicating
    dispatcher sends: expected_copies / top-k. The solver's grid (solver/bound_arrays.py) reads
    the same floats per layout."""
    nvlink, network = expected_copies(dispatch, tp, ep, inside)
    return nvlink / dispatch.topk, network / dispatch.topk
