"""Every offloaded byte is held against the instance's host RAM, per node, under the same
fraction rule as GPU memory: optimizer states (with DeepSpeed's host buffers), parameters, and
activations (issue 31)."""

from __future__ import annotations

from helpers.cli import invoke

from vramplan.models.architecture.params import count_params
from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.catalogue.stack import with_preset
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.units import BYTES_PER_GIB
from vramplan.models.memory.activations import offload_transfer_bytes
from vramplan.models.memory.memory import memory_per_gpu
from vramplan.models.memory.model_states import model_states

# The job as `--stack unsloth` makes it: Unsloth's recipe (fused kernels, 8-bit AdamW, ...).
UNSLOTH_32K = Job(**with_preset({"method": "qlora", "seq_len": 32768, "stack": "unsloth", "activation_offload": True},
                                load_stacks()))
# Offloading every saved activation with no recompute (torchtune's OffloadActivations) on Unsloth's
# recipe: a what-if (--stack custom). Unsloth itself offloads only what its checkpointing saves
# (catalogues/stack_capabilities.csv refuses its offload without full recompute since 2026-12-06).
EVERY_32K = UNSLOTH_32K.model_copy(update={"stack": "custom"})


def test_offloading_every_activation_does_not_fit_a_24_gib_pod(catalogue) -> None:
    """The issue's case: 8B QLoRA at 32k on an RTX 4090 pod with 24 GiB of RAM, no recompute,
    activation offload. Every saved tensor but two layers' goes to the host: ~128 GiB, which the
    pod's 21.6 GiB (90% of 24) cannot hold. Before, host_bytes was 0 and the plan 'fit'."""
    arch, gpu = catalogue.architecture("llama-3.1-8b"), catalogue.gpu("rtx4090-24gb")
    pod = catalogue.offering("runpod/1x_RTX4090_SECURE")
    memory = memory_per_gpu(arch, EVERY_32K, Plan(gpu=gpu.name, recompute="none"), gpu, pod)
    assert memory.gpu_fits and not memory.host_fits and not memory.fits
    assert memory.host_bytes == memory.activations.offloaded_bytes  # one GPU on the node, nothing else offloaded
    assert 120 * BYTES_PER_GIB < memory.host_bytes < 135 * BYTES_PER_GIB


def test_unsloths_own_recipe_offloads_the_checkpointed_layer_inputs_only(catalogue) -> None:
    """Unsloth checkpoints every layer and offloads the layer inputs: 30 of 32 layers x s x h x 2
    bytes = 30 x 32768 x 4096 x 2 = 7.5 GiB at 32k for 8B (the issue: 'about 8 GiB'), which fits."""
    arch, gpu = catalogue.architecture("llama-3.1-8b"), catalogue.gpu("rtx4090-24gb")
    pod = catalogue.offering("runpod/1x_RTX4090_SECURE")
    memory = memory_per_gpu(arch, UNSLOTH_32K, Plan(gpu=gpu.name, recompute="full"), gpu, pod)
    assert memory.activations.offloaded_bytes == 30 * 32768 * 4096 * 2
    assert memory.host_bytes == memory.activations.offloaded_bytes and memory.fits


def test_the_cli_says_host_ram_is_what_does_not_fit(catalogue) -> None:
    result = invoke("estimate", "--model", "llama-3.1-8b", "--method", "qlora", "--seq-len", "32768", "--gpu",
                    "rtx4090-24gb", "--stack", "custom", "--recompute", "none", "--activation-offload",
                    "--kernels", "fused", "--loss", "fused", "--optimizer", "adamw-8bit",
                    "--offering", "runpod/1x_RTX4090_SECURE")  # unpinned, estimate takes a pod whose RAM holds it
    assert result.exit_code == 3
    assert "DOES NOT FIT in host RAM" in result.output


def test_offloaded_activations_add_to_offloaded_states_per_node(catalogue) -> None:
    """ZeRO-Offload and activation offload together: the node holds both, times its GPUs."""
    arch, gpu = catalogue.architecture("llama-3.1-8b"), catalogue.gpu("h100-sxm-80gb")
    node = catalogue.offering("aws/p5.48xlarge")
    job = Job(seq_len=16384, activation_offload=True, stack="custom")
    plan = Plan(gpu=gpu.name, num_gpus=8, zero=3, offload="optimizer", recompute="full")
    memory = memory_per_gpu(arch, job, plan, gpu, node)
    states = model_states(arch, job, plan)
    assert memory.activations.offloaded_bytes > 0 and states.host_bytes_per_gpu > 0
    assert memory.host_bytes == 8 * (states.host_bytes_per_gpu + memory.activations.offloaded_bytes)


def test_parameter_offload_adds_the_16_bit_partition(catalogue) -> None:
    """optimizer+params (ZeRO-3): the host also holds the bf16 parameter partition
    (stage3.py `param_groups_fp16_flat_cpu_memory`): 18 + 2 bytes per parameter of the partition."""
    arch = catalogue.architecture("llama-3.1-70b")
    shard = -(-count_params(arch).total // 8)
    optimizer = model_states(arch, Job(), Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=3, offload="optimizer"))
    params = model_states(arch, Job(), Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=3, offload="optimizer+params"))
    assert optimizer.host_bytes_per_gpu == 18 * shard
    assert params.host_bytes_per_gpu == 20 * shard and params.weights_bytes == 0


def test_a_node_short_of_host_ram_for_zero_offload_does_not_fit(catalogue) -> None:
    """70B ZeRO-3 optimizer offload on 8 GPUs needs 1,183 GiB per node (18 bytes/param): an
    8 x RTX 4090 pod with 192 GiB of RAM cannot hold it, a p5.48xlarge (2,048 GiB) can."""
    arch = catalogue.architecture("llama-3.1-70b")
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=3, offload="optimizer", recompute="full")
    big = memory_per_gpu(arch, Job(seq_len=2048), plan, catalogue.gpu("h100-sxm-80gb"), catalogue.offering("aws/p5.48xlarge"))
    assert big.host_fits
    small_plan = plan.model_copy(update={"gpu": "rtx4090-24gb"})
    small = memory_per_gpu(arch, Job(seq_len=2048), small_plan, catalogue.gpu("rtx4090-24gb"),
                           catalogue.offering("runpod/8x_RTX4090_SECURE"))
    assert small.host_bytes == big.host_bytes and not small.host_fits


def test_the_transfer_is_charged_where_compute_cannot_hide_it(catalogue) -> None:
    """Each micro-batch's offloaded activations go out and come back over the host link:
    2 x accumulation x the offloaded bytes; the step pays what exceeds its compute."""
    from vramplan.models.estimate import estimate_plan

    arch, gpu = catalogue.architecture("llama-3.1-8b"), catalogue.gpu("rtx4090-24gb")
    plan = Plan(gpu=gpu.name, recompute="none", grad_accum=4)
    assert offload_transfer_bytes(arch, EVERY_32K, plan) == 2 * 4 * memory_per_gpu(
        arch, EVERY_32K, plan, gpu).activations.offloaded_bytes
    assert offload_transfer_bytes(arch, EVERY_32K.model_copy(update={"activation_offload": False}), plan) == 0
    result = estimate_plan(arch, EVERY_32K, plan, gpu, catalogue.offering("runpod/1x_RTX4090_SECURE"), 1e9)
    perf = result.performance
    assert perf.offload_exposed_s >= 0
    assert perf.step_time_s >= perf.compute_time_s + perf.offload_exposed_s - 1e-9
