"""DeepSpeed ZeRO-1/2 on CPU (gloo, 2 ranks): which gradients a rank holds after each micro-batch's
backward, with the overlap_comm + contiguous_gradients that launch/deepspeed.py writes (a smaller
reduce bucket than its 5e8 default, which the hooks' behaviour does not depend on). Checks
models/core/stack_behaviour.py HOOK_REDUCED_ZERO1_STACKS against the real implementation; not part
of the test suite (it needs deepspeed and torch, which the project does not install):

    python3 -m venv /tmp/dsvenv && /tmp/dsvenv/bin/pip install torch==2.13.0 deepspeed==0.19.8
    DS_ACCELERATOR=cpu /tmp/dsvenv/bin/torchrun --nproc_per_node 2 tests/tools/deepspeed_zero1_probe.py STAGE ACCUM no|offload

Measured (deepspeed 0.19.8, torch 2.13.0+cpu, 8 Linear(256, 256) = 526,336 parameters, 2 ranks):
stage 1, accumulation 1: no param.grad held after the backward, the partition's reduced gradients
263,168 elements (P / 2); accumulation 3: all 526,336 held after micro-batches 0 and 1, none and the
partition after micro-batch 2; with offload "optimizer": none on the device at accumulation 1, all
526,336 after the accumulating micro-batches.
"""
import sys

import deepspeed
import torch

stage, ga, offload = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "offload"
deepspeed.init_distributed(dist_backend="gloo")
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)])
params = sum(p.numel() for p in model.parameters())
zero = {"stage": stage, "overlap_comm": True, "contiguous_gradients": True, "reduce_bucket_size": 100_000}
if offload:
    zero["offload_optimizer"] = {"device": "cpu"}
cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": ga, "zero_optimization": zero,
       "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}}}
engine, opt, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
rank = torch.distributed.get_rank()
for step in range(2):
    for micro in range(ga):
        loss = engine(torch.randn(2, 256)).float().sum()
        engine.backward(loss)
        held = sum(p.grad.numel() for p in engine.module.parameters() if p.grad is not None)
        averaged = getattr(opt, "averaged_gradients", {}) or {}
        storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() // t.element_size()
                    for group in averaged.values() if group for t in group if t is not None}
        part = sum(storages.values())  # elements of the storage the partition's reduced gradients live in
        if rank == 0:
            print(f"stage {stage} ga {ga} offload {offload} step {step} micro {micro}: params {params}, "
                  f"param.grad held {held}, partition gradient storage {part} (P/2 = {params // 2})", flush=True)
        engine.step()
