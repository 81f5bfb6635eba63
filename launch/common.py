"""What every launch-config writer shares: the result type, the recompute a plan asks
for in the terms the stacks offer, the optimizer names and the shell-array form.

A plan's recompute as the stacks run it (`checkpointing`):
- "selective" with `--selective attention` recomputes the attention core (models/memory/recompute.py);
  under FlashAttention there is none to drop, so the stacks without that mode run it as "none";
- "op" (and "selective" with `--selective op`) is torchtitan's per-op selective checkpointing;
- "full" with a layer count below the model's is a partial recompute, which HF and torchtune
  express as "every n-th layer" (`every_nth`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Literal

from vramplan.models.architecture.lora import adapted_modules, layer_groups
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan

Checkpointing = Literal["none", "full", "op"]


@dataclass(frozen=True)
class LaunchModel:
    """What the writers read of the model (`of` an Architecture): its decoder layers (recompute
    counts, virtual stages), routed experts (1: dense), HF model_type, the leaf names of the linear
    modules a LoRA job adapts by default (models/architecture/lora.py adapted_modules: the plan's
    adapter count), and the name to load it by where the user gave one (a hub id or a config
    path; "" for a catalogue name, which names no checkpoint)."""

    num_layers: int
    num_experts: int = 1
    model_type: str = ""
    lora_modules: tuple[str, ...] = ()
    checkpoint: str = ""

    @classmethod
    def of(cls, arch: Architecture, checkpoint: str = "") -> LaunchModel:
        names: dict[str, None] = {}
        for group in layer_groups(arch):
            for module in adapted_modules(arch, None, group.modules):
                names.setdefault(module.name.rsplit(".", 1)[-1], None)  # PEFT matches a target by the name's last part
        return cls(arch.num_layers, arch.num_experts, arch.model_type, tuple(names), checkpoint)


@dataclass(frozen=True)
class LaunchConfig:
    stack: str
    text: str
    extension: str  # the file type the text is: .json, .toml, .sh


def checkpointing(job: Job, plan: Plan, num_layers: int, stack: str) -> tuple[Checkpointing, int | None]:
    """(mode, layers): the recompute the plan asks for; `layers` is set only for a partial full
    recompute (fewer layers than the model has, at least one)."""
    if plan.recompute == "selective" and job.selective == "attention":
        if job.attention != "flash":
            raise VramplanError("recompute", "selective", f"{stack} has no attention-core recompute "
                                                          "(with --attention flash there is none to recompute)")
        return "none", None
    if plan.recompute in ("selective", "op"):
        return "op", None
    if plan.recompute == "full":
        layers = plan.recompute_layers if plan.recompute_layers is not None else job.recompute_layers
        if layers == 0:
            return "none", None
        return "full", layers if layers is not None and layers < num_layers else None
    return "none", None


def every_nth(num_layers: int, layers: int, *, first: bool) -> int | None:
    """The stride n whose "every n-th layer" checkpoints exactly `layers` of `num_layers` (None: no
    stride does). first=True counts layers 0, n, 2n, ... (ceil(L/n)); False counts n, 2n, ... (floor(L/n))."""
    for n in range(1, num_layers + 1):
        count = -(-num_layers // n) if first else num_layers // n
        if count == layers:
            return n
    return None


# Job.optimizer as Hugging Face TrainingArguments.optim (transformers training_args.py OptimizerNames)
HF_OPTIM = {"adamw": "adamw_torch", "adamw-8bit": "adamw_bnb_8bit", "adamw-8bit-paged": "paged_adamw_8bit",
            "sgd": "sgd"}
# ... and as the optimizer class torchtune instantiates and litgpt imports
OPTIMIZER_CLASS = {"adamw": "torch.optim.AdamW", "adamw-8bit": "bitsandbytes.optim.AdamW8bit",
                   "adamw-8bit-paged": "bitsandbytes.optim.PagedAdamW8bit", "sgd": "torch.optim.SGD"}
# Job.precision as a torch dtype name (from_pretrained dtype, bnb_4bit_compute_dtype)
TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "bfloat16"}


def shell_array(comments: list[str], name: str, args: list[str], prelude: tuple[str, ...] = ()) -> str:
    """A bash file: comment lines, optional assignments, and one array of (already quoted) arguments."""
    return "".join(f"# {line}\n" for line in comments) + "".join(f"{line}\n" for line in prelude) + \
        f"{name}=(\n" + "".join(f"  {arg}\n" for arg in args) + ")\n"


def quote(value: object) -> str:
    """A value as one shell word (booleans and None in the spelling YAML and jsonargparse read)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return shlex.quote(str(value))
