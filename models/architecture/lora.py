"""LoRA adapters: which modules are adapted and how many parameters train.

A LoRA adapter on a linear d_in -> d_out adds A (r x d_in) and B (d_out x r), no bias
(Hu et al., arXiv:2106.09685; PEFT `LoraLayer`): r * (d_in + d_out) trainable parameters.
Targets are PEFT `target_modules` names matched as PEFT matches them (exact name or a
`.name` suffix of the module path); the default adapts every linear module of the decoder
layers, as PEFT's "all-linear" does, except the MoE router (`gate`), which stays frozen.
"""

from __future__ import annotations

from functools import lru_cache

from vramplan.models.architecture.params import LinearModule, count_params, layer_groups, layer_linear_modules
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job

_NOT_ADAPTED_BY_DEFAULT = frozenset({"gate", "router"})  # MoE routers: PEFT recipes leave them frozen


def _matches(module_name: str, target: str) -> bool:
    return module_name == target or module_name.endswith("." + target)


def adapted_modules(
    arch: Architecture, targets: tuple[str, ...] | None, modules: tuple[LinearModule, ...] | None = None
) -> tuple[LinearModule, ...]:
    """The linear modules of one layer (the last one, or `modules`) that carry an adapter.
    A target that names no linear module of any layer is an error."""
    modules = layer_linear_modules(arch) if modules is None else modules
    if targets is None:
        return tuple(m for m in modules if m.name not in _NOT_ADAPTED_BY_DEFAULT)
    every = {m.name for g in layer_groups(arch) for m in g.modules}
    for target in targets:
        if not any(_matches(name, target) for name in every):
            known = ", ".join(sorted(every))
            raise VramplanError("lora_targets", target, f"no such linear module in {arch.model_type}; known: {known}")
    return tuple(m for m in modules if any(_matches(m.name, t) for t in targets))


def lora_params_per_layer(arch: Architecture, job: Job, modules: tuple[LinearModule, ...] | None = None) -> int:
    r = job.lora_rank
    adapted = adapted_modules(arch, job.lora_targets, modules)
    return sum(m.copies_per_layer * r * (m.in_features + m.out_features) for m in adapted)


@lru_cache(maxsize=1024)
def trainable_params(arch: Architecture, job: Job) -> int:
    """Parameters that receive gradients and optimizer states."""
    if job.method == "full":
        return count_params(arch).total
    return sum(g.count * lora_params_per_layer(arch, job, g.modules) for g in layer_groups(arch))
