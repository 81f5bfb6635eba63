"""The screen before any bound tier (solver/cpsat_bounds.py UnitBounds): whether a cluster's GPU
count can hold the job's model states at all, in its GPU's memory and its host RAM, whatever the
layout. Per (GPU, count) one number decides it for every host budget: the least host RAM of a least
share that fits the GPU (docs/solver.md#the-branch-and-bound)."""

from __future__ import annotations

from vramplan.models.core.units import BYTES_PER_MIB
from vramplan.solver.space import SearchSpace


class ClusterScreen:
    """may_fit and may_fit_each, mixed into UnitBounds, which holds their per-cluster answers."""

    space: SearchSpace
    _fits: dict[int, bool]
    _fit_each: list[bool] | None

    def may_fit(self, c: int) -> bool:
        """False when no plan of the cluster's GPU count can fit its GPU and host memory, whatever
        the layout (Tables.least_share_bytes: the most loaded rank holds at least 1/n of the
        single-GPU plan's states). One check per (count, GPU limit), no layout tabulated."""
        fits = self._fits.get(c)
        if fits is None:
            g, n, _, _ = self.space.placement.tier0_fields[c]
            fits = self._fits[c] = self._fits_host(self._least_host_bytes(g, n), c)
        return fits

    def may_fit_each(self) -> list[bool]:
        """may_fit of every cluster, its (GPU, count)'s host need taken once, kept."""
        if self._fit_each is None:
            needs: dict[tuple[int, int], int | None] = {}
            each = []
            for c, (g, n, _, _) in enumerate(self.space.placement.tier0_fields):
                if (g, n) not in needs:
                    needs[g, n] = self._least_host_bytes(g, n)
                each.append(self._fits_host(needs[g, n], c))
            self._fit_each = each
        return self._fit_each

    def _fits_host(self, need_bytes: int | None, c: int) -> bool:
        """Whether the cluster's host RAM budget holds a share's need (None: no share fits the GPU)."""
        return need_bytes is not None and need_bytes <= self.space.host_budget_mib_per_gpu[c] * BYTES_PER_MIB

    def _least_host_bytes(self, g: int, n: int) -> int | None:
        """The least host RAM of the count's least shares (_least_shares) that fit GPU g's memory
        limit (None: none does): a host budget holds some fitting share exactly when it holds this
        one. Kept in the family's UnitMemo by (count, limit, precisions), which is what it reads."""
        space = self.space
        limit, precisions = space.limit_mib[g], space.gpu_precisions[g]
        key = (space.counts[n], limit, precisions)
        memo = space.shared.count_fits
        if key not in memo:
            memo[key] = min((host for gpu, host in self._least_shares(n, precisions) if gpu <= limit * BYTES_PER_MIB),
                            default=None)
        return memo[key]

    def _least_shares(self, n: int, precisions: tuple[int, ...]) -> list[tuple[int, int]]:
        """(GPU, host) bytes the most loaded of a count's ranks holds at least, per ZeRO x offload
        and precision (Tables.least_share_bytes); kept in the family's UnitMemo by the count and
        precisions, as may_fit asks them again for every GPU limit."""
        space, tables = self.space, self.space.tables
        assert tables is not None, "a built space has its job's tables"
        key = (space.counts[n], precisions)
        memo = space.shared.count_shares
        if key not in memo:
            memo[key] = [tables.least_share_bytes(zero, offload, space.precisions[p], space.counts[n])
                         for zero, offload in space.zero_offloads for p in precisions]
        return memo[key]
