"""The integer step time's three forms (solver/step_time.py) are one definition: a point's sum, the
CP-SAT model's variables and the bounds' array relaxation give the same integers (the relaxation at
most them), on random terms including traffic wholly hidden, wholly exposed and zero."""

from __future__ import annotations

import random

import numpy as np
from ortools.sat.python import cp_model

from vramplan.solver.space_tables import StepTables
from vramplan.solver.step_time import add_step, exposed_lower_us, exposed_us, point_step_us, tail_us

LAYERS = 32


def _random_terms(rng: random.Random) -> dict[str, int]:
    compute = rng.randrange(1, 10**6)
    forward_window = rng.randrange(0, compute // 3 + 1)
    return {
        "compute": compute, "parallel": rng.randrange(0, 10**5), "bubble": rng.randrange(0, 10**5),
        "forward": rng.choice([0, rng.randrange(0, 2 * 10**6)]), "backward": rng.choice([0, rng.randrange(0, 2 * 10**6)]),
        "forward_window": forward_window, "backward_window": compute - forward_window - rng.randrange(0, 3),
        "optimizer": rng.randrange(0, 10**5),
    }


def _tables(terms: dict[str, int]) -> StepTables:
    t = StepTables()
    t.compute_us[0, 0, 0] = terms["compute"]
    t.windows_us[0, 0, 0] = (terms["forward_window"], max(0, terms["backward_window"]))
    t.parallel_us[0, 0, 0] = terms["parallel"]
    t.bubble_us[0, 0, 0, 0] = terms["bubble"]
    t.comm_us[2, 0, 0, 0] = (terms["forward"], terms["backward"])
    t.optimizer_us[0, 0, 0, 0] = terms["optimizer"]
    return t


def _cpsat_step(terms: dict[str, int]) -> int:
    """add_step's variable with every term fixed to its value, solved."""
    model = cp_model.CpModel()

    def const(name: str, value: int) -> cp_model.IntVar:
        return model.new_int_var(value, value, name)

    forward, backward = terms["forward"], terms["backward"]
    tail = tail_us(forward + backward, LAYERS)
    uppers = {"compute_parallel_bubble_us": terms["compute"] + terms["parallel"] + terms["bubble"],
              "fwd_comm_us": forward, "bwd_comm_us": backward, "tail_us": tail, "optimizer_us": terms["optimizer"]}
    step, _ = add_step(model, const("base", uppers["compute_parallel_bubble_us"]),
                       (const("fwd", forward), const("bwd", backward)),
                       (const("fwd_window", terms["forward_window"]), const("bwd_window", max(0, terms["backward_window"]))),
                       const("tail", tail), const("opt", terms["optimizer"]), uppers, None)
    solver = cp_model.CpSolver()
    assert solver.solve(model) == cp_model.OPTIMAL
    return solver.value(step)


def test_the_point_and_the_cpsat_model_state_the_same_step() -> None:
    rng = random.Random(7)
    for _ in range(200):
        terms = _random_terms(rng)
        point = point_step_us(_tables(terms), 2, 0, 0, 0, 0, 0, LAYERS)
        comm = (terms["forward"], terms["backward"])
        window = (terms["forward_window"], max(0, terms["backward_window"]))
        assert point == (terms["compute"] + terms["parallel"] + terms["bubble"] + exposed_us(comm, window, LAYERS)
                         + terms["optimizer"])
        assert _cpsat_step(terms) == point


def test_the_bounds_relaxation_is_at_most_the_exposed_traffic() -> None:
    """exposed_lower_us never exceeds exposed_us for any split of the traffic between the phases
    whose windows sum to at most the compute, and equals it when nothing can be hidden."""
    rng = random.Random(11)
    for _ in range(500):
        terms = _random_terms(rng)
        comm = (terms["forward"], terms["backward"])
        window = (terms["forward_window"], max(0, terms["backward_window"]))
        bound = exposed_lower_us(np.array([sum(comm)]), np.array([terms["compute"]]), LAYERS)[0]
        assert bound <= exposed_us(comm, window, LAYERS)
    assert exposed_lower_us(np.array([5_000]), np.array([0]), LAYERS)[0] == exposed_us((2_000, 3_000), (0, 0), LAYERS)


def test_a_cap_below_every_step_leaves_no_model() -> None:
    model = cp_model.CpModel()
    one = model.new_int_var(1, 1, "one")
    uppers = {"compute_parallel_bubble_us": 1, "fwd_comm_us": 1, "bwd_comm_us": 1, "tail_us": 1, "optimizer_us": 1}
    assert add_step(model, one, (one, one), (one, one), one, one, uppers, step_cap=-1) is None
