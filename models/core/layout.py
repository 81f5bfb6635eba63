"""The parallel degrees of a plan, one type for all of vramplan: Plan.layout, the pins' layout,
the solver's search domain and the traffic of models/time/parallel_time.py.

Megatron-Core's rank layout: num_gpus = tp x pp x cp x dp; expert parallelism (ep) is carved from
the dp x cp ranks; vpp virtual pipeline stages per rank (interleaved 1F1B); sp = Megatron sequence
parallelism with TP. The JSON of a Plan keeps its flat fields (tp, pp, cp, ep, vpp,
sequence_parallel): PLAN_FIELDS maps them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

# The Plan (and Pins) field each Layout field is stored in, in Layout's order.
PLAN_FIELDS = ("tp", "pp", "cp", "ep", "vpp", "sequence_parallel")


class Layout(NamedTuple):
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    vpp: int = 1
    sp: bool = False

    @classmethod
    def of(cls, plan: Any) -> Layout:
        """The layout of anything that stores it in the flat PLAN_FIELDS (Plan, PlanChoice)."""
        return cls(*(getattr(plan, name) for name in PLAN_FIELDS))

    @property
    def model_parallel(self) -> int:
        """GPUs of one model replica: num_gpus = model_parallel x dp."""
        return self.tp * self.pp * self.cp

    def preference(self) -> tuple:
        """Among equal objectives: the least model parallelism, then no interleaving, SP on."""
        return (self.model_parallel * self.ep, self.tp, self.pp, self.cp, self.ep, self.vpp, not self.sp)

    def plan_fields(self) -> dict[str, int | bool]:
        """The layout as a Plan's flat fields (Plan(**layout.plan_fields(), ...))."""
        return dict(zip(PLAN_FIELDS, self))

    def label(self, dp: int | None = None) -> str:
        """The layout in Megatron's terms, degrees of 1 left out: 'TP8+SP x PP16/v2 x CP2 x DP8 x EP4';
        DP only when given (then always, 'DP64' for pure data parallelism)."""
        parts = [f"TP{self.tp}{'+SP' if self.sp else ''}" if self.tp > 1 else "",
                 f"PP{self.pp}" + (f"/v{self.vpp}" if self.vpp > 1 else "") if self.pp > 1 else "",
                 f"CP{self.cp}" if self.cp > 1 else "", f"DP{dp}" if dp is not None else "",
                 f"EP{self.ep}" if self.ep > 1 else ""]
        return " x ".join(part for part in parts if part)
