"""The CP-SAT model of one cluster: the inner decisions as integer variables, the pillars as
constraints over them, the step time as a sum of tabulated terms.

Variables: zf (ZeRO x offload), r (recompute), p (precision), b (micro-batch), each a domain index;
the accumulation follows from global batch = micro-batch x accumulation x dp, which the micro-batch
domain (divisors of global batch / dp) keeps exact. Every pillar is a term over at most three
decisions, tabulated by models/ in space.py and linked to the variables by element constraints
on mixed-radix indices:

    static_mib[zf, p] + activation_mib[r, b, p] <= limit_mib          (GPU memory, MiB)
    host_mib[zf, p] <= host budget of the instance                   (ZeRO-Offload host RAM)
    step_us = compute_us[r, p] + max(comm_us[z, b, p] - window_us[z3, r, p], tail_us[z, b, p])
              + optimizer_us[zf, b, p]                                 (candidates.inner_metrics)

No product of two variables appears (cost = price x step is left to the branch-and-bound in
cpsat_engine.py, where the price is a constant per cluster), and no enforced linear constraint
carries a large coefficient (ortools#5293), so every coefficient stays far inside int64.
The objective is step_us x radix + inner tie (candidates.inner_tie): one integer that orders the
points of a cluster exactly as the brute-force oracle does; when step_ub x radix would not keep
2^62 of room, the model minimises step time and then the tie in two stages instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product

from ortools.sat.python import cp_model

from vramplan.solver.candidates import Inner, inner_tie_radix, tail_us, window_us
from vramplan.solver.space import SearchSpace, to_us

INT64_ROOM = 2**62


@dataclass
class ClusterModel:
    """One cluster's model; `exclude` are (host budget, step cap) of same-hardware clusters that
    come first (cheaper): a point they accept is theirs, so the same plan is never listed twice."""

    model: cp_model.CpModel
    zf: cp_model.IntVar
    r: cp_model.IntVar
    p: cp_model.IntVar
    b: cp_model.IntVar
    step: cp_model.IntVar
    key: cp_model.LinearExpr
    radix: int
    single_objective: bool
    points: list[tuple[Inner, int]] = field(default_factory=list)  # found so far, best first: (inner, step)
    exhausted_at_cap: int | None = None  # no further point has step <= this

    def inner(self, solver: cp_model.CpSolver) -> Inner:
        return Inner(solver.value(self.zf), solver.value(self.r), solver.value(self.p), solver.value(self.b))


def _var(model: cp_model.CpModel, values: list[int], name: str) -> cp_model.IntVar:
    return model.new_int_var_from_domain(cp_model.Domain.from_values(values), name)


def _element(model: cp_model.CpModel, index: cp_model.LinearExpr, table: list[int], name: str) -> cp_model.IntVar:
    target = model.new_int_var(min(table), max(table), name)
    model.add_element(index, table, target)
    return target


def build_cluster_model(space: SearchSpace, cluster_index: int, step_cap: int | None,
                        exclude: list[tuple[int, int | None]]) -> ClusterModel | None:
    """None when the cluster's domains are empty (no precision its GPU runs, no micro-batch)."""
    cluster = space.clusters[cluster_index]
    g, n, crossing = cluster.shape
    nz, nr, np_, nb = len(space.zero_offloads), len(space.recomputes), len(space.precisions), len(space.micro_batches)
    precisions = [p for p in range(np_) if (g, p) in space.valid_gpu_precision]
    batches = [b for b in range(nb) if (n, b) in space.valid_count_batch]
    if not precisions or not batches:
        return None
    zeros = sorted({z for z, _ in space.zero_offloads})
    space.ensure_timed(cluster.shape)
    model = cp_model.CpModel()
    zf, r = model.new_int_var(0, nz - 1, "zf"), model.new_int_var(0, nr - 1, "r")
    p, b = _var(model, precisions, "p"), _var(model, batches, "b")
    zero_of = [zeros.index(z) for z, _ in space.zero_offloads]
    z = _element(model, zf, zero_of, "zero")
    z3 = _element(model, zf, [int(zero == 3) for zero, _ in space.zero_offloads], "zero3")

    def tab(fn, dims):  # a table over decision domains, flattened row-major (the element index)
        return [fn(*idx) for idx in product(*(range(d) for d in dims))]

    valid_p = set(precisions)
    valid_b = set(batches)
    static = tab(lambda i, j: space.static_mib[i, n, j], (nz, np_))
    host = tab(lambda i, j: space.host_mib_per_gpu[i, n, j], (nz, np_))
    acts = tab(lambda i, k, j: space.activation_mib[i, k, j], (nr, nb, np_))
    compute_s = {(i, j): space.compute_s[g, n, i, j] for i in range(nr) for j in precisions}
    compute = tab(lambda i, j: to_us(compute_s[i, j]) if j in valid_p else 0, (nr, np_))
    window = tab(lambda t, i, j: window_us(compute_s[i, j], 3 if t else 0) if j in valid_p else 0, (2, nr, np_))
    comm_of = {(zi, k, j): to_us(space.comm_s[zero, n, k, j, g, crossing])
               for zi, zero in enumerate(zeros) for k in batches for j in precisions}
    comm = tab(lambda zi, k, j: comm_of.get((zi, k, j), 0), (len(zeros), nb, np_))
    tail = [tail_us(c, space.arch.num_layers) for c in comm]
    opt = tab(lambda i, k, j: space.optimizer_us[i, n, k, j, g] if j in valid_p and k in valid_b else 0, (nz, nb, np_))

    static_v = _element(model, zf * np_ + p, static, "static_mib")
    acts_v = _element(model, (r * nb + b) * np_ + p, acts, "activation_mib")
    model.add(static_v + acts_v <= space.limit_mib[g])
    host_v = _element(model, zf * np_ + p, host, "host_mib")
    model.add(host_v <= space.host_budget_mib_per_gpu[cluster_index])
    compute_v = _element(model, r * np_ + p, compute, "compute_us")
    window_v = _element(model, (z3 * nr + r) * np_ + p, window, "window_us")
    comm_index = (z * nb + b) * np_ + p
    comm_v, tail_v = _element(model, comm_index, comm, "comm_us"), _element(model, comm_index, tail, "tail_us")
    exposed = model.new_int_var(min(tail), max(comm), "exposed_us")
    model.add_max_equality(exposed, [comm_v - window_v, tail_v])
    opt_v = _element(model, (zf * nb + b) * np_ + p, opt, "optimizer_us")
    step_ub = max(compute) + max(comm) + max(opt)
    if step_cap is not None:
        step_ub = min(step_ub, step_cap)
    if step_ub < 0:
        return None
    step = model.new_int_var(0, step_ub, "step_us")
    model.add(step == compute_v + exposed + opt_v)
    for other_host, other_cap in exclude:  # not (host <= other's budget and step <= other's cap)
        taken = model.new_bool_var("taken")
        model.add(host_v <= other_host).only_enforce_if(taken)
        model.add(host_v >= other_host + 1).only_enforce_if(taken.Not())
        if other_cap is None:
            model.add(taken == 0)
        else:
            model.add(step >= other_cap + 1).only_enforce_if(taken)
    tie = ((zf * nr + r) * nb + (nb - 1 - b)) * np_ + p  # candidates.inner_tie
    radix = inner_tie_radix(space)
    single = (step_ub + 1) * radix < INT64_ROOM
    return ClusterModel(model, zf, r, p, b, step, step * radix + tie if single else tie, radix, single)

