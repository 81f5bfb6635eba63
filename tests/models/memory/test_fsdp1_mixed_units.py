"""FSDP1 with one unit per decoder layer mixing the frozen base and the adapters (issue 32's
`litgpt-fsdp1-frozen-grads` rows: lit-gpt 8641822's finetune/lora.py on 2 and 4 A100s).

Read at lit-gpt 8641822, its pinned Lightning 71aed751 and torch 2.1 (models/memory/model_states.py
mixed_unit_gradient_bytes): Fabric's FSDPStrategy wraps each Block and sets use_orig_params=True,
so the Block's FlatParameter holds its frozen weights with the LoRA adapters and requires a
gradient as a whole (flat_param.py `flat_param_requires_grad or tensor.requires_grad`); under
`no_backward_sync` (`FullyShardedDataParallel.no_sync`) the post-backward hook returns before the
reduce-scatter and every unit's unsharded gradient, frozen weights included, stays until the step's
last micro-batch. The `litgpt` stack is litgpt v0.5.13 (FSDP2: frozen parameters get no gradient);
the `litgpt-fsdp1` stack (lit-gpt 2023 to litgpt v0.5.7) runs this regime: these tests pin its
bytes and show that it is what the four rows held."""

from __future__ import annotations

import pytest
from measured_peaks import breakdown, load_runs, predicted_bytes

from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.fsdp1_units import mixed_unit_gradient_bytes
from vramplan.models.memory.model_states import model_states

# Llama 2 7B: a decoder layer is q, k, v, o (4 h^2), gate, up, down (3 h f) and two RMSNorms (2 h);
# LoRA r8 on q and v adds r (h + h) + r (h + h) (no GQA: v is h wide).
H, F, LAYERS, R = 4096, 11008, 32, 8
LAYER = 4 * H * H + 3 * H * F + 2 * H
ADAPTERS = 2 * R * (H + H)


def _job() -> Job:
    return Job(method="lora", stack="litgpt", lora_rank=R, lora_targets=("q_proj", "v_proj"), lora_dropout=0.05,
               seq_len=1304, master_weights="none")


def _plan(grad_accum: int, num_gpus: int = 2) -> Plan:
    return Plan(gpu="a100-sxm-40gb", num_gpus=num_gpus, zero=3, recompute="full", grad_accum=grad_accum)


def test_accumulating_holds_every_layer_unsharded_frozen_weights_included(catalogue) -> None:
    llama = catalogue.architecture("llama-2-7b")
    assert mixed_unit_gradient_bytes(llama, _job(), _plan(128)) == 2 * LAYERS * (LAYER + ADAPTERS)
    # The same on 4 GPUs: no_sync never reduce-scatters until the last micro-batch.
    assert mixed_unit_gradient_bytes(llama, _job(), _plan(128, 4)) == 2 * LAYERS * (LAYER + ADAPTERS)


def test_without_accumulation_each_rank_keeps_the_whole_units_shard(catalogue) -> None:
    llama = catalogue.architecture("llama-2-7b")
    units = LAYERS * (LAYER + ADAPTERS)
    assert mixed_unit_gradient_bytes(llama, _job(), _plan(1)) == 2 * -(-units // 2)
    assert mixed_unit_gradient_bytes(llama, _job(), _plan(1, 4)) == 2 * -(-units // 4)


def test_the_litgpt_stack_keeps_only_the_adapters_gradients(catalogue) -> None:
    # FSDP2 (litgpt v0.5.13): the trainable gradients whole while accumulating, no frozen ones.
    llama = catalogue.architecture("llama-2-7b")
    assert model_states(llama, _job(), _plan(128)).gradients_bytes == 2 * LAYERS * ADAPTERS


def test_the_regime_is_lora_under_full_shard(catalogue) -> None:
    llama = catalogue.architecture("llama-2-7b")
    with pytest.raises(ValueError, match="ZeRO-3"):
        mixed_unit_gradient_bytes(llama, _job().model_copy(update={"method": "full"}), _plan(128))
    with pytest.raises(ValueError, match="ZeRO-3"):
        mixed_unit_gradient_bytes(llama, _job(), _plan(128).model_copy(update={"zero": 2}))


def test_the_litgpt_fsdp1_stack_holds_the_mixed_units(catalogue) -> None:
    """model_states keeps the units' shard; accumulation adds the rest (unsharded_accumulation_bytes,
    what the solver's accumulation table holds): the whole units' gradient in all."""
    llama = catalogue.architecture("llama-2-7b")
    job = _job().model_copy(update={"stack": "litgpt-fsdp1"})
    units = LAYERS * (LAYER + ADAPTERS)
    assert model_states(llama, job, _plan(128)).gradients_bytes == 2 * units
    assert model_states(llama, job, _plan(1)).gradients_bytes == 2 * -(-units // 2)


@pytest.mark.parametrize("run", [run for run in load_runs() if run.cells["stack"] == "litgpt-fsdp1"], ids=lambda run: run.id)
def test_the_regime_is_what_the_2023_rows_held(catalogue, run) -> None:
    """Each row is within 15% of its measured peak and the 13B run on 2 x 40 GB does not fit; no
    number is taken from the rows."""
    memory = breakdown(run, catalogue)
    if run.oom:
        assert not memory.gpu_fits
    else:
        assert abs(predicted_bytes(run, memory) / run.measured_bytes - 1) <= 0.15
