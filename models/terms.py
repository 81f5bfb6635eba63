"""The term registry: the models/ functions whose values the solver keeps and shares between jobs
(solver/tables.py, solver/table_memo.py), each with the Job and Plan fields it reads, declared here
beside it. The declared Job fields are the memo's keys: solver/table_memo.py shares a term's values
between the jobs that agree on them (a batch's rows that differ in sequence length share model
states; an explanation's 8-bit-optimizer mitigation shares every time term), so an undeclared read
would hand one job another's value. tests/models/test_term_reads.py runs each function over a grid
of architectures (dense, MoE, MLA, local/global attention), stacks, methods, kernels, layouts, ZeRO
x offload, recompute and precisions with a Job and a Plan that record every field read, and fails
when a read field is not declared here. Plan fields are the decisions the solver's own keys carry
(solver/tables.py keys each term by the plan's decisions it reads, derived ones included:
zero_group = dp x cp, expert_dp; the split, stage_layers, is part of the solver's Layout).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vramplan.models.core.setup import Job
from vramplan.models.memory.model_states import model_states
from vramplan.models.time.flops import plan_flops_per_token
from vramplan.models.time.parallel_time import parallel_traffic
from vramplan.models.time.performance import compute_time_s, dp_traffic


@dataclass(frozen=True)
class Term:
    name: str
    function: Callable
    job_fields: frozenset[str]  # the Job fields the function reads
    plan_fields: frozenset[str]  # the Plan fields and properties it reads


_LORA = ("lora_rank", "lora_targets")  # which parameters train, and how many (models/architecture/lora.py)
_RECOMPUTE = ("recompute_layers", "selective")  # what the recompute decision re-runs (models/memory/recompute.py)

MODEL_STATES = Term(
    "model_states", model_states,
    frozenset({"method", *_LORA, "qlora_bits", "qlora_prep", "base_dtype", "optimizer", "optimizer_in_backward",
               "accounting", "master_weights", "stack"}),
    frozenset({"tp", "pp", "ep", "zero", "offload", "precision", "zero_group", "expert_dp", "grad_accum", "stage_layers"}))
COMPUTE_TIME = Term(
    "compute_time_s", compute_time_s,
    frozenset({"method", "seq_len", "kernels", "loss", "compile", "stack", "attention", *_RECOMPUTE}),
    frozenset({"tp", "pp", "cp", "ep", "vpp", "sequence_parallel", "recompute", "recompute_layers", "precision",
               "micro_batch", "grad_accum", "stage_layers"}))
DP_TRAFFIC = Term(
    "dp_traffic", dp_traffic,
    frozenset({"method", *_LORA, "accounting"}),
    frozenset({"tp", "pp", "ep", "zero", "zero_group", "precision", "grad_accum", "stage_layers"}))
FLOPS = Term(
    "plan_flops_per_token", plan_flops_per_token,
    frozenset({"method", "seq_len", *_RECOMPUTE}),
    frozenset({"pp", "vpp", "recompute", "recompute_layers", "stage_layers"}))
PARALLEL_TRAFFIC = Term(
    "parallel_traffic", parallel_traffic,
    frozenset({"method", "seq_len", "stack", "tp_overlap", "moe_dispatcher", "moe_a2a_overlap", "compile", *_RECOMPUTE}),
    frozenset({"tp", "pp", "cp", "ep", "vpp", "sequence_parallel", "layout", "recompute", "recompute_layers",
               "precision", "micro_batch", "grad_accum", "stage_layers"}))

TERMS = (MODEL_STATES, COMPUTE_TIME, DP_TRAFFIC, FLOPS, PARALLEL_TRAFFIC)
STATES_TERMS = (MODEL_STATES,)  # solver/tables.py states_memo
TIME_TERMS = (COMPUTE_TIME, DP_TRAFFIC, FLOPS, PARALLEL_TRAFFIC)  # solver/tables.py time_memo


def job_fields(terms: tuple[Term, ...]) -> tuple[str, ...]:
    """The Job fields any of these terms reads, in a fixed order."""
    return tuple(sorted(set().union(*(term.job_fields for term in terms))))


def job_values(job: Job, fields: tuple[str, ...]) -> tuple:
    """A memo key: the job's values of these fields (every Job field is hashable)."""
    return tuple(getattr(job, name) for name in fields)
