"""The parallel degrees of a plan, one type for all of vramplan: Plan.layout, the pins' layout,
the solver's search domain and the traffic of models/time/parallel_time.py.

Megatron-Core's rank layout: num_gpus = tp x pp x cp x dp; expert parallelism (ep) is carved from
the dp x cp ranks; vpp virtual pipeline stages per rank (interleaved 1F1B); sp = Megatron sequence
parallelism with TP. The JSON of a Plan keeps its flat fields (tp, pp, cp, ep, vpp,
sequence_parallel, stage_layers): PLAN_FIELDS maps them. `split` is the decoder layers of each
pipeline rank (Plan.stage_layers); None is the default split (models/architecture/parallel.py
stage_layers), which every layout without a split of its own has.
"""

from __future__ import annotations

from typing import Any, NamedTuple

# The Plan (and Pins) field each Layout field is stored in, in Layout's order.
PLAN_FIELDS = ("tp", "pp", "cp", "ep", "vpp", "sequence_parallel", "stage_layers")


class Layout(NamedTuple):
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    vpp: int = 1
    sp: bool = False
    split: tuple[int, ...] | None = None  # layers per pipeline rank; None: the default split

    @classmethod
    def of(cls, plan: Any) -> Layout:
        """The layout of anything that stores it in the flat PLAN_FIELDS (Plan, PlanChoice)."""
        return cls(*(getattr(plan, name) for name in PLAN_FIELDS))

    @property
    def model_parallel(self) -> int:
        """GPUs of one model replica: num_gpus = model_parallel x dp."""
        return self.tp * self.pp * self.cp

    @property
    def pipeline(self) -> int | tuple[int, ...]:
        """What models/architecture/parallel.py's split functions take: the split, or the depth
        (its default split)."""
        return self.pp if self.split is None else self.split

    def preference(self) -> tuple:
        """Among equal objectives: the least model parallelism, then no interleaving, SP on, the
        default split, then splits in order."""
        return (self.model_parallel * self.ep, self.tp, self.pp, self.cp, self.ep, self.vpp, not self.sp,
                self.split is not None, self.split or ())

    def plan_fields(self) -> dict[str, int | bool | tuple[int, ...] | None]:
        """The layout as a Plan's flat fields (Plan(**layout.plan_fields(), ...))."""
        values: tuple[int | bool | tuple[int, ...] | None, ...] = tuple(self)
        return dict(zip(PLAN_FIELDS, values))

    def label(self, dp: int | None = None) -> str:
        """The layout in Megatron's terms, degrees of 1 left out: 'TP8+SP x PP16/v2 x CP2 x DP8 x EP4';
        DP only when given (then always, 'DP64' for pure data parallelism); a split of its own
        after the depth: 'PP16[6,8*14,8]'."""
        parts = [f"TP{self.tp}{'+SP' if self.sp else ''}" if self.tp > 1 else "",
                 f"PP{self.pp}" + (f"/v{self.vpp}" if self.vpp > 1 else "")
                 + (f"[{split_label(self.split)}]" if self.split is not None else "") if self.pp > 1 else "",
                 f"CP{self.cp}" if self.cp > 1 else "", f"DP{dp}" if dp is not None else "",
                 f"EP{self.ep}" if self.ep > 1 else ""]
        return " x ".join(part for part in parts if part)


def split_label(split: tuple[int, ...]) -> str:
    """A split as Megatron's layout strings repeat a stage: '7,8*14,7'."""
    runs: list[list[int]] = []
    for count in split:
        if runs and runs[-1][0] == count:
            runs[-1][1] += 1
        else:
            runs.append([count, 1])
    return ",".join(f"{count}*{times}" if times > 1 else str(count) for count, times in runs)
