"""DeepSpeed's optimizer step on CPU (gloo): the bytes the step allocates above what is live when it
starts, per element of its step unit (a ZeRO-1/2 partition, a ZeRO-3 sub-group). Checks
models/core/stack_behaviour.py DEEPSPEED_STEP_COPY_STACKS against the real implementation; not part of
the test suite (it needs deepspeed and torch, which the project does not install):

    python3 -m venv /tmp/dsvenv && /tmp/dsvenv/bin/pip install torch==2.13.0 deepspeed==0.19.8
    DS_ACCELERATOR=cpu /tmp/dsvenv/bin/torchrun --nproc_per_node RANKS tests/tools/deepspeed_step_probe.py STAGE SUB_GROUP adamw|sgd

Measured 2026-12-07 (deepspeed 0.19.8, torch 2.13.0+cpu, 8 Linear(512, 512) = 2,097,152 parameters,
bf16 with fp32 master, torch AdamW on the host, the second step), bytes above the step's start:
stage 1 and stage 2 on 2 ranks: 12 a partition element (1,048,576 elements); stage 3 on 1 and 2 ranks
with sub_group_size 1e9: 12 a partition element; with sub_group_size 100,000: 12 an element of one
262,144-element parameter (sub-groups are whole parameters), 1.5 a partition element. Of the 12: the
16-bit flat copy (2) and its fp32 cast (4) at the cast, then the fp32 gradient (4) and torch's
single-tensor Adam denominator, `exp_avg_sq.sqrt() / bias_correction2_sqrt`, two fp32 temporaries (8)
at once; DeepSpeed's FusedAdam on CUDA makes none, so there the cast's 6 is the peak. With SGD (no
temporaries, zero_allow_untested_optimizer): 6.00 a partition element, stage 2 on 2 ranks and stage 3
on 1 rank: the cast alone.
"""
import sys

import deepspeed
import torch
from torch.profiler import ProfilerActivity, profile
from torch.profiler._memory_profiler import MemoryProfileTimeline

stage, sub_group, sgd = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "sgd"
deepspeed.init_distributed(dist_backend="gloo")
torch.manual_seed(0)
width, layers = 512, 8
model = torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False) for _ in range(layers)])
params = sum(p.numel() for p in model.parameters())
zero = {"stage": stage, "overlap_comm": True, "contiguous_gradients": True, "reduce_bucket_size": 50_000}
if stage == 3:
    zero.update({"sub_group_size": sub_group, "stage3_param_persistence_threshold": 0})
optimizer = {"type": "SGD", "params": {"lr": 1e-3}} if sgd else {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}}
cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "zero_optimization": zero,
       "bf16": {"enabled": True}, "optimizer": optimizer, "zero_allow_untested_optimizer": sgd}
engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
for step in range(2):
    engine.backward(engine(torch.randn(2, width, dtype=torch.bfloat16)).float().sum())
    if step == 0:  # the first step also creates the Adam states
        engine.step()
        continue
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        engine.step()
    _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline(torch.device("cpu"))
    totals = [sum(size) for size in sizes]
    if rank == 0:
        above = max(totals) - totals[0]
        print(f"stage {stage}, {world} rank(s), sub_group_size {sub_group}: the step allocates {above:,} bytes above "
              f"its start, {above / (params // world):.2f} a partition element", flush=True)
