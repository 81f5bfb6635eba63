"""Property tests of the memory model over the catalogue (hypothesis)."""

from __future__ import annotations

from helpers.catalogue import packaged_catalogue
from hypothesis import given, settings
from hypothesis import strategies as st

from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.activations import activations
from vramplan.models.memory.memory import memory_per_gpu
from vramplan.models.memory.model_states import model_states

ARCHS = st.sampled_from(sorted(packaged_catalogue().architectures))
METHODS = st.sampled_from(["full", "lora", "qlora"])
OPTIMIZERS = st.sampled_from(["adamw", "adamw-8bit", "sgd"])
PRECISIONS = st.sampled_from(["bf16", "fp16", "fp32"])
ACCOUNTING = st.sampled_from(["zero", "hf"])


def _states_bytes(arch_name: str, job: Job, plan: Plan) -> int:
    states = model_states(packaged_catalogue().architecture(arch_name), job, plan)
    return states.weights_bytes + states.gradients_bytes + states.optimizer_states_bytes


@settings(max_examples=150, deadline=None)
@given(ARCHS, METHODS, OPTIMIZERS, PRECISIONS, ACCOUNTING, st.integers(1, 3), st.integers(1, 512), st.integers(1, 512))
def test_more_gpus_never_raise_per_gpu_model_states(arch, method, optimizer, precision, accounting, zero, n1, n2) -> None:
    job = Job(method=method, optimizer=optimizer, accounting=accounting)
    few, many = sorted((n1, n2))
    assert _states_bytes(arch, job, Plan(gpu="x", num_gpus=many, zero=zero, precision=precision)) <= _states_bytes(
        arch, job, Plan(gpu="x", num_gpus=few, zero=zero, precision=precision)
    )


@settings(max_examples=150, deadline=None)
@given(ARCHS, METHODS, OPTIMIZERS, PRECISIONS, ACCOUNTING, st.integers(1, 1024), st.integers(0, 2))
def test_higher_zero_stage_never_needs_more_model_state_memory(arch, method, optimizer, precision, accounting, n, zero) -> None:
    job = Job(method=method, optimizer=optimizer, accounting=accounting)
    lower = _states_bytes(arch, job, Plan(gpu="x", num_gpus=n, zero=zero, precision=precision))
    higher = _states_bytes(arch, job, Plan(gpu="x", num_gpus=n, zero=zero + 1, precision=precision))
    assert higher <= lower


@settings(max_examples=150, deadline=None)
@given(ARCHS, st.sampled_from(["flash", "eager"]), st.sampled_from(["eager", "fused"]), st.integers(1, 8),
       st.sampled_from([128, 512, 2048, 8192]), METHODS)
def test_recompute_never_raises_activations(catalogue, arch, attention, kernels, micro_batch, seq_len, method) -> None:
    architecture = catalogue.architecture(arch)
    job = Job(seq_len=min(seq_len, architecture.max_position_embeddings), attention=attention, kernels=kernels, method=method)
    totals = [activations(architecture, job, Plan(gpu="x", micro_batch=micro_batch, recompute=r)).total_bytes
              for r in ("none", "selective", "full")]
    assert totals[0] >= totals[1] >= totals[2]


@settings(max_examples=100, deadline=None)
@given(ARCHS, st.sampled_from(sorted(packaged_catalogue().gpus)), st.integers(1, 64), st.integers(0, 3),
       st.floats(0.5, 0.95), st.floats(0.0, 0.05))
def test_more_capacity_never_turns_a_fit_into_a_miss(catalogue, arch, gpu_name, num_gpus, zero, fraction, more) -> None:
    architecture, gpu = catalogue.architecture(arch), catalogue.gpu(gpu_name)
    precision = "bf16" if gpu.bf16_dense_tflops > 0 else "fp16"
    plan = Plan(gpu=gpu_name, num_gpus=num_gpus, zero=zero, precision=precision, recompute="full")
    tight = memory_per_gpu(architecture, Job(seq_len=1024, capacity_fraction=fraction), plan, gpu)
    loose = memory_per_gpu(architecture, Job(seq_len=1024, capacity_fraction=min(1.0, fraction + more)), plan, gpu)
    bigger = memory_per_gpu(
        architecture, Job(seq_len=1024, capacity_fraction=fraction), plan,
        gpu.model_copy(update={"memory_usable_mib": gpu.memory_usable_mib * 2}),
    )
    # the pillars, or the optimizer step's peak where its gradient copies outweigh the freed activations
    # (DeepSpeed's flat fp32 cast at the step, the hf stack on one GPU: models/memory/memory.py)
    assert tight.total_bytes == max(sum(tight.pillars.values()), tight.step_peak_bytes)
    if tight.fits:
        assert loose.fits and bigger.fits
