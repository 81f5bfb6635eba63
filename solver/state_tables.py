"""The model-states side of the solver's Tables (solver/tables.py): each pipeline rank's weights,
gradients, optimizer states and host RAM for every (ZeRO stage, offload) of a layout and count, in
one models/ call per rank (models.model_states model_states_over_zero), what gradient accumulation
adds to them, the optimizer step's gradient copies, and the overhead beside them. Mixed into
Tables, whose memo (and its evaluation count) every value goes through; what it reads of Tables is
declared below."""

from __future__ import annotations

from functools import lru_cache

from vramplan.models.architecture.parallel import stage_layer_kinds
from vramplan.models.core.layout import Layout
from vramplan.models.core.setup import Plan
from vramplan.models.core.units import bytes_to_mib_ceil, ceil_div
from vramplan.models.memory.model_states import ModelStates, model_states_over_zero, unsharded_accumulation_bytes
from vramplan.models.memory.overhead import overhead
from vramplan.solver.choice_keys import NO_RECOMPUTE
from vramplan.solver.layouts import layout_plan
from vramplan.solver.table_reads import TableReads


@lru_cache(maxsize=1 << 16)
def _states_plan(layout: Layout, n: int, zero: int, offload: str, precision: str, grad_accum: int) -> Plan:
    """The one-micro-batch plan of the model states with `grad_accum` steps (1: what model_states
    keeps; 2: what accumulation adds), made once (a Plan's copy costs more than the states' terms)."""
    return layout_plan(layout, gpu="", num_gpus=n, zero=zero, recompute=NO_RECOMPUTE.mode,
                       recompute_layers=NO_RECOMPUTE.layers, precision=precision, micro_batch=1,
                       grad_accum=grad_accum, offload=offload)


class StateTables(TableReads):
    """Tables' model-state terms (module docstring)."""

    states_memo: dict[tuple, ModelStates] | None

    def states_grid(self, layout: Layout, n: int, precision: str, zero_offloads: tuple[tuple[int, str], ...],
                    stages: tuple[int, ...]) -> list[list[tuple[int, int, int]]]:
        """Per (ZeRO stage, offload) of zero_offloads and pipeline rank of stages: (weights +
        gradients + optimizer states + overhead without the micro-batch buffers, host RAM per GPU,
        what accumulation adds: accumulation_mib), each rounded up to MiB. Each rank's states over
        the ZeRO x offload choices are one models/ call (rank_states_over_zero)."""
        return self._called(("states-grid", layout, n, precision, zero_offloads, stages),
                            lambda: self._states_grid(layout, n, precision, zero_offloads, stages))

    def _states_grid(self, layout: Layout, n: int, precision: str, zero_offloads: tuple[tuple[int, str], ...],
                     stages: tuple[int, ...]) -> list[list[tuple[int, int, int]]]:
        by_stage = [self.rank_states_over_zero(layout, zero_offloads, n, precision, stage) for stage in stages]
        grid = []
        for zf, (zero, offload) in enumerate(zero_offloads):
            mib = self._states_mib(layout, zero, offload, n, precision, [states[zf] for states in by_stage])
            grid.append([(static, host, self.accumulation_mib(layout, zero, offload, n, precision, stage))
                         for (static, host), stage in zip(mib, stages)])
        return grid

    def step_copy_grid(self, layout: Layout, n: int, precision: str, zero_offloads: tuple[tuple[int, str], ...],
                       stages: tuple[int, ...]) -> list[list[int]]:
        """Per (ZeRO stage, offload) of zero_offloads and pipeline rank of stages: the fp32 gradient
        copies the optimizer step holds beside the states (models.model_states
        ModelStates.step_grad_copy_bytes: Megatron with a 16-bit gradient buffer; 0 elsewhere),
        rounded up to MiB; read off the rank states states_grid made (no models/ evaluation)."""
        def compute() -> list[list[int]]:
            by_stage = [self.rank_states_over_zero(layout, zero_offloads, n, precision, stage) for stage in stages]
            return [[bytes_to_mib_ceil(states[zf].step_grad_copy_bytes) for states in by_stage]
                    for zf in range(len(zero_offloads))]
        return self._called(("step-copy-grid", layout, n, precision, zero_offloads, stages), compute)

    def states_mib(self, layout: Layout, zero: int, offload: str, n: int, precision: str, stage: int) -> tuple[int, int]:
        """(weights + gradients + optimizer states + overhead without the micro-batch buffers,
        host RAM per GPU) on pipeline rank `stage`, each rounded up to MiB (states_grid's one cell)."""
        static, host, _ = self.states_grid(layout, n, precision, ((zero, offload),), (stage,))[0][0]
        return static, host

    def _states_mib(self, layout: Layout, zero: int, offload: str, n: int, precision: str,
                    states: list[ModelStates]) -> list[tuple[int, int]]:
        """states_mib of one ZeRO stage and offload's rank states (each a pipeline rank's)."""
        zero_group, _, communicators = self._groups(layout, n)
        # The overhead without buffers: reserve, NCCL per communicator, DP buckets (zero, dp x cp > 1),
        # the ZeRO-3 live module (tp; on one rank too where the parameters are offloaded:
        # models/memory/overhead.py): models/memory/memory_terms.py's table of what each term depends on.
        # pp > 1: torchtitan's stage stays gathered, so its FSDP working set is one unit's gradient
        # (models/memory/fsdp.py working_set_bytes, model_states.keeps_stage_gathered)
        base = self._get(("overhead", zero, precision, layout.tp, communicators, zero_group > 1,
                          offload == "optimizer+params", layout.pp > 1),
                         lambda: self._overhead_base_bytes(self._plan(layout, n, zero, offload, NO_RECOMPUTE, precision, 1)))
        base_mib = bytes_to_mib_ceil(base)
        return [(bytes_to_mib_ceil(rank.weights_bytes) + bytes_to_mib_ceil(rank.gradients_bytes)
                 + bytes_to_mib_ceil(rank.optimizer_states_bytes) + base_mib, bytes_to_mib_ceil(rank.host_bytes_per_gpu))
                for rank in states]

    def rank_states(self, layout: Layout, zero: int, offload: str, n: int, precision: str, stage: int) -> ModelStates:
        """Model states of pipeline rank `stage` (models.model_states) without gradient accumulation,
        memoised on what they depend on; what accumulation adds is accumulation_mib."""
        return self.rank_states_over_zero(layout, ((zero, offload),), n, precision, stage)[0]

    def rank_states_over_zero(self, layout: Layout, zero_offloads: tuple[tuple[int, str], ...], n: int, precision: str,
                              stage: int) -> list[ModelStates]:
        """rank_states of each (ZeRO stage, offload), those not kept yet made in one models/ call
        (models.model_states model_states_over_zero), one evaluation each."""
        zero_group, expert_dp, _ = self._groups(layout, n)
        # a split enters through the rank's own layers (its first/last place is the stage number)
        kinds = stage_layer_kinds(self.arch, layout.pipeline, stage)
        keys = [("states", layout.tp, layout.pp, kinds, layout.ep, zero_group, expert_dp, zero, offload, precision, stage)
                for zero, offload in zero_offloads]
        memo = self.states_memo
        assert memo is not None  # __post_init__ sets it
        missing = {key: choice for key, choice in zip(keys, zero_offloads) if key not in memo}
        if missing:
            self.evaluations += len(missing)
            plans = [self._states_plan(layout, n, zero, offload, precision) for zero, offload in missing.values()]
            memo.update(zip(missing, model_states_over_zero(self.arch, self.job, plans, stage)))
        return [memo[key] for key in keys]

    def accumulation_mib(self, layout: Layout, zero: int, offload: str, n: int, precision: str, stage: int) -> int:
        """What a step of more than one micro-batch adds to rank `stage`'s model states, MiB
        (models.model_states unsharded_accumulation_bytes: a stack that keeps unsharded gradients
        until the last micro-batch, under ZeRO-3 or DeepSpeed's ZeRO-1; 0 for every other)."""
        if zero not in (1, 3):  # unsharded_accumulation_bytes: ZeRO-1 and ZeRO-3 only
            return 0
        plan = _states_plan(layout, n, zero, offload, precision, 2)
        return bytes_to_mib_ceil(unsharded_accumulation_bytes(self.arch, self.job, plan, stage))

    def _states_plan(self, layout: Layout, n: int, zero: int, offload: str, precision: str) -> Plan:
        return _states_plan(layout, n, zero, offload, precision, 1)

    def least_share_bytes(self, zero: int, offload: str, precision: str, n: int) -> tuple[int, int]:
        """(GPU, host) bytes of model states that the most loaded of n ranks holds at least, whatever
        the layout: 1/n of the single-GPU plan's (rounded up). States are never held less than once
        between the ranks (models.model_states shards every tensor with a ceiling; TP, PP and EP
        only add replicas), so the ranks hold them all and the most loaded at least the average."""
        states = self.rank_states(Layout(), zero, offload, 1, precision, 0)
        return ceil_div(states.gpu_bytes, n), ceil_div(states.host_bytes_per_gpu, n)

    def _overhead_base_bytes(self, plan: Plan) -> int:
        over = overhead(self.arch, self.job, plan)
        return (over.total_bytes - over.tp_buffers_bytes - over.pp_p2p_bytes - over.cp_buffers_bytes
                - over.dispatcher_buffers_bytes)
