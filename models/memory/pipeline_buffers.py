"""What torch.distributed.pipelining keeps on a pipeline rank beside the activations the schedule's
in-flight micro-batches save (models/core/stack_behaviour.py TORCH_PIPELINING_STACKS: torchtitan).

Each unit is one micro-batch's hidden state at a stage boundary on the rank: micro-batch x s / cp
tokens (/ tp under sequence parallelism: torchtitan's blocks hand on their RowwiseParallel output's
local sequence shard) x hidden, in the residual stream's dtype (models/memory/activations.py
layer_input). For m micro-batches a step, w of them in flight on the rank (inflight_chunks), and a
rank holding vpp stages (interleaved schedules):

- activation receive buffers: m per stage that is not the pipeline's first, all step
  (_prepare_forward_infra); the in-flight micro-batches' buffers are the stage input its first
  layer saves, already among the activations, so w of them are not counted again;
- gradient receive buffers: m per stage that is not the pipeline's last, all step
  (_prepare_backward_infra);
- the stage outputs fwd_cache keeps from forward to backward: w, on stages that send theirs on (the
  last stage's output is the loss, counted with the output layer);
- RETAINED_INPUT_GRAD_STACKS (torch before pytorch/pytorch#164329): each stage input's gradient,
  m per stage that is not the first, until the next step.

This replaces the two p2p buffers models/memory/parallel_overhead.py counts for Megatron's
schedule. With one virtual stage a middle rank holds 2 m units (3 m with retained gradients), the
first m + w, the last m - w. With vpp stages a rank holds vpp of each kind but the pipeline's ends;
what of them is in flight is not split by stage here, so the first rank's overlap and the last
rank's outputs drop only the share that is surely not theirs (ceil / floor of w / vpp): never less
than what is held.
"""

from __future__ import annotations

from vramplan.models.core.setup import Job
from vramplan.models.core.stack_behaviour import RETAINED_INPUT_GRAD_STACKS, TORCH_PIPELINING_STACKS
from vramplan.models.core.units import ceil_div


def keeps_receive_buffers(job: Job) -> bool:
    """Whether the job's pipeline keeps receive buffers per micro-batch (TORCH_PIPELINING_STACKS)."""
    return job.stack in TORCH_PIPELINING_STACKS


def retains_input_grads(job: Job) -> bool:
    return job.stack in RETAINED_INPUT_GRAD_STACKS


def pipeline_buffer_units(micro_batches: int, chunks: int, vpp: int, first: bool, last: bool,
                          input_grads: bool) -> int:
    """Stage-boundary units a rank keeps at its peak (module docstring): m = micro_batches a step,
    `chunks` micro-batch chunks in flight, vpp stages on the rank, whether it holds the pipeline's
    first and last stage, and whether input gradients stay until the next step."""
    if micro_batches <= 0:
        return 0
    receiving = vpp * micro_batches - (micro_batches if first else 0)  # stages fed by a previous stage
    sending = vpp * micro_batches - (micro_batches if last else 0)  # stages whose output goes on
    outputs = chunks - (chunks // vpp if last else 0)
    counted = chunks - (ceil_div(chunks, vpp) if first else 0)  # in-flight inputs the activations hold
    grads = receiving if input_grads else 0
    return max(0, receiving - counted) + sending + outputs + grads
