"""What torch.distributed.pipelining keeps on a pipeline rank beside the activations the schedule's
in-flight micro-batches save (models/core/stack_behaviour.py TORCH_PIPELINING_STACKS: torchtitan).

Each unit is one micro-batch's hidden state at a stage boundary on the rank: micro-batch x s / cp
tokens (/ tp under sequence parallelism: torchtitan's blocks hand on their RowwiseParallel output's
local sequence shard) x hidden, in the residual stream's dtype (models/memory/activations.py
layer_input). For m micro-batches a step, w of them in flight on the rank (inflight_chunks), and a
rank holding vpp stages (interleaved schedules):

- activation receive buffers: m per stage that is not the pipeline's first, all step
  (_prepare_forward_infra); the in-flight micro-batches' buffers are the stage input its first
  layer saves, already among the activations, so those in flight on a receiving stage are not
  counted again;
- gradient receive buffers: m per stage that is not the pipeline's last, all step
  (_prepare_backward_infra);
- the stage outputs fwd_cache keeps from forward to backward: one per micro-batch in flight on a
  stage that sends its output on (the last stage's output is the loss, counted with the output layer);
- RETAINED_INPUT_GRAD_STACKS (torch before pytorch/pytorch#164329): each stage input's gradient,
  m per stage that is not the first, until the next step.

This replaces the two p2p buffers models/memory/parallel_overhead.py counts for Megatron's
schedule. With one virtual stage a middle rank holds 2 m units (3 m with retained gradients), the
first m + w, the last m - w. With vpp stages a rank holds vpp of each kind but the pipeline's ends,
and only the ends depend on which of their stages the w micro-batches are on. vramplan launches
torchtitan with Interleaved1F1B for vpp > 1 (launch/configs.py), whose order (torch 2.13.0
torch/distributed/pipelining/schedules.py ScheduleInterleaved1F1B) runs the forwards in rounds of
r = m // max(1, m // pp) micro-batches per stage (microbatches_per_round; __init__ refuses m that
is not a multiple of the rounds), stage after stage (forward_stage_index), then one forward and
one backward a slot (_get_1f1b_rank_ops), the backwards from the last stage back. At the rank's
activation peak (the ops holding the most in flight, the whole 1F1B phase):

- the first rank holds up to min(m, 2 r) micro-batches on the pipeline's first stage (its first
  round, then its next round's forwards fill in before that stage's first backward): the moment
  the most of its in-flight inputs are not receive buffers, and the most embedding outputs live;
- the last rank holds at most one on the pipeline's last stage, exactly one while that stage runs
  (its forward, loss, backward: the moment its activations include the output layer), so its
  fwd_cache keeps w - 1 outputs then.

Both counted from the schedule's own order for pp 2-8, vpp 2-4, m up to 3 pp + 1, every rank
(tests/models/memory/interleaved_orders.py, interleaved_1f1b_inflight.csv).
"""

from __future__ import annotations

from vramplan.models.core.setup import Job
from vramplan.models.core.stack_behaviour import RETAINED_INPUT_GRAD_STACKS, TORCH_PIPELINING_STACKS


def keeps_receive_buffers(job: Job) -> bool:
    """Whether the job's pipeline keeps receive buffers per micro-batch (TORCH_PIPELINING_STACKS)."""
    return job.stack in TORCH_PIPELINING_STACKS


def retains_input_grads(job: Job) -> bool:
    return job.stack in RETAINED_INPUT_GRAD_STACKS


def pipeline_buffer_units(micro_batches: int, chunks: int, vpp: int, first: bool, last: bool,
                          input_grads: bool, on_first_stage: int = 0) -> int:
    """Stage-boundary units a rank keeps at its peak (module docstring): m = micro_batches a step,
    `chunks` micro-batch chunks in flight, vpp stages on the rank, whether it holds the pipeline's
    first and last stage, whether input gradients stay until the next step, and, on the first
    rank, the micro-batches in flight on the pipeline's first stage
    (parallel_activations.first_stage_inflight)."""
    if micro_batches <= 0:
        return 0
    receiving = vpp * micro_batches - (micro_batches if first else 0)  # stages fed by a previous stage
    sending = vpp * micro_batches - (micro_batches if last else 0)  # stages whose output goes on
    # in flight on the pipeline's first stage: their inputs are no receive buffers
    on_first = min(chunks, on_first_stage) if first else 0
    on_last = min(chunks, 1 if vpp > 1 else chunks) if last else 0  # their output is the loss, not kept
    counted = chunks - on_first  # in-flight inputs the activations hold
    grads = receiving if input_grads else 0
    return max(0, receiving - counted) + sending + (chunks - on_last) + grads
