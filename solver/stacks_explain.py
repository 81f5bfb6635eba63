"""The explanation of a search over several stacks (`--stack any` or a list) that none answers.

Each searched stack's own explanation (solver/explain.py) answers for that stack alone: its
conflicting restrictions are those whose lifting gives that stack a plan, its mitigations fit or
not on that stack. Over several stacks a restriction set whose lifting gives any of them a plan is
a conflict of the query, and a change fits when it fits on any of them. So:

- the conflict named is the smallest of the stacks' (the first stack's on a tie), with that
  stack's summary, closest miss and smallest change (where that stack has none, or it is a switch
  to a stack already searched: the first change that fits on any), and the summary says which
  stack it is;
- a change fits when it fits on any stack, with the best of its plans (by the objective); a change
  to a stack already searched is no change and is dropped.

Before, the first stack's explanation answered alone: `--stack any` on RTX 4090s named
`--gpu rtx4090-24gb, --max-days 365` (lifting them gives Megatron a plan, 48 days on 128 GPUs) and
priced its LoRA fix on the hf stack, where torchtitan's is cheaper.
"""

from __future__ import annotations

from collections.abc import Sequence

from vramplan.solver.explain import stack_mitigation
from vramplan.solver.query import Explanation, Mitigation


def stack_change(change: str, stacks: tuple[str, ...]) -> bool:
    """Whether a mitigation is a switch to one of these stacks."""
    return change in {stack_mitigation(stack) for stack in stacks}


def _better(a: Mitigation, b: Mitigation, objective: str) -> Mitigation:
    """The fitting mitigation with the better objective value (throughput: higher), a on a tie."""
    if not b.fits or b.objective_value is None:
        return a
    if not a.fits or a.objective_value is None:
        return b
    if objective == "throughput":
        return b if b.objective_value > a.objective_value else a
    return b if b.objective_value < a.objective_value else a


def merged_explanation(stacks: tuple[str, ...], explained: Sequence[tuple[str, Explanation | None]], objective: str,
                       searched: tuple[str, ...] | None = None) -> Explanation | None:
    """One explanation of the stacks' own (`explained`: (stack, its explanation), in search order;
    `searched`: every stack the search had, default the explained ones: where the limits ran out
    before some explained themselves, the summary says so)."""
    own = [(stack, explanation) for stack, explanation in explained if explanation is not None]
    if not own:
        return None
    named = [(stack, e) for stack, e in own if e.conflicting_restrictions]
    stack, chosen = min(named, key=lambda se: len(se[1].conflicting_restrictions)) if named else own[0]
    merged: dict[str, Mitigation] = {}
    for _, explanation in own:
        for m in explanation.mitigations:
            if stack_change(m.change, stacks):
                continue
            known = merged.get(m.change)
            merged[m.change] = m if known is None else _better(known, m, objective).model_copy(
                update={"tried": known.tried or m.tried})
    smallest = chosen.smallest_change
    if smallest is None or stack_change(smallest, stacks):  # none on that stack, or a stack already searched
        smallest = next((m.change for m in merged.values() if m.fits), None)
    searched = tuple(s for s, _ in explained) if searched is None else searched
    if len(searched) == 1:
        summary = chosen.summary
    else:
        unexplained = [s for s in searched if s not in {s for s, _ in explained}]
        left = f" (the limits ran out before {', '.join(unexplained)} explained)" if unexplained else ""
        summary = (f"no plan on any of the {len(searched)} stacks searched ({', '.join(searched)}); the smallest "
                   f"conflict is {stack}'s{left}: {chosen.summary}")
    return chosen.model_copy(update={"summary": summary, "mitigations": list(merged.values()),
                                     "smallest_change": smallest})
