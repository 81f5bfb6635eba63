"""A stack behaviour: what a training stack's implementation does that no recipe option changes,
read in its code (the entries: memory_behaviours.py, time_behaviours.py, layout_behaviours.py; the
registry: stack_behaviour.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Behaviour:
    """A behaviour, the stacks that show it, and where it is modelled."""

    summary: str
    stacks: frozenset[str]
    modelled_in: str

    def __contains__(self, stack: object) -> bool:
        return stack in self.stacks
