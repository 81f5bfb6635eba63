"""Issue 32's QLoRA peaks, byte counts from the code:
- a bitsandbytes 4-bit base keeps its quant state as a module attribute beside the parameter
  (bitsandbytes@dcfb6f81 bitsandbytes/nn/modules.py L181-189 Params4bit._quantize, L268-274
  Linear4bit.forward "the quant state got lost ... for fsdp"): ZeRO-3 / FSDP shards and offloads the
  packed data only, the quant state stays whole on every GPU (models/memory/model_states.py);
- ZeRO-3 / FSDP gathers a 4-bit layer as its quantised storage: torchao's NF4Tensor with its
  scalers (pytorch/ao@a584e2427 torchao/dtypes/nf4tensor.py L853-875 fsdp_pre_all_gather), a
  bitsandbytes Params4bit as its packed data (models/memory/fsdp.py layer_gathered_bytes; DeepSpeed's
  replay, models/memory/zero3_live.py, reads the same quantised_layer_bytes per linear);
- torchtune deletes the logits after the loss (pytorch/torchtune@30b8519e8
  recipes/lora_finetune_single_device.py L648-652), so a layer's backward does not stack on what the
  output layer kept (models/memory/activations.py stage_activations)."""

from __future__ import annotations

from vramplan.models.architecture.params import count_params
from vramplan.models.architecture.quantization import BNB4_BLOCK, BNB4_DOUBLE_QUANT_BLOCK
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.activations import activations, microbatch_activations
from vramplan.models.memory.fsdp import layer_gathered_bytes
from vramplan.models.memory.model_states import model_states


def _quantised_weights(arch) -> int:
    counts = count_params(arch)
    return counts.layers_linear  # Llama: no biases, every decoder matmul quantised


def test_bitsandbytes_quant_state_stays_whole_on_every_gpu(catalogue) -> None:
    arch = catalogue.architecture("llama-2-70b")
    weights = _quantised_weights(arch)
    blocks = weights // BNB4_BLOCK
    state = blocks + 4 * -(-blocks // BNB4_DOUBLE_QUANT_BLOCK)  # uint8 absmax + fp32 per 256 of them
    assert 1.08e9 < state < 1.10e9
    for offload in ("none", "optimizer+params"):
        one = model_states(arch, Job(method="qlora", stack="hf"), Plan(gpu="a100-sxm-80gb", num_gpus=1, zero=3,
                                                                        offload=offload))
        two = model_states(arch, Job(method="qlora", stack="hf"), Plan(gpu="a100-sxm-80gb", num_gpus=2, zero=3,
                                                                        offload=offload))
        if offload == "none":  # halving the rest leaves the quant state whole
            assert abs(2 * two.weights_bytes - one.weights_bytes - state) <= 4
        else:  # everything else offloaded: the quant state is what stays
            assert two.weights_bytes == one.weights_bytes == state
    # torchtune's torchao NF4Tensor is sharded whole: nothing stays
    tt = model_states(arch, Job(method="qlora", stack="torchtune"),
                      Plan(gpu="a100-sxm-80gb", num_gpus=2, zero=3, offload="optimizer+params"))
    assert tt.weights_bytes == 0


def test_a_4bit_layer_is_gathered_as_its_storage(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-405b")
    counts = count_params(arch)
    norms = counts.per_layer - counts.per_layer_linear
    linear = counts.per_layer_linear
    bnb = layer_gathered_bytes(arch, Job(method="qlora", stack="hf"), 2)
    nf4 = layer_gathered_bytes(arch, Job(method="qlora", stack="torchtune"), 2)
    lora = layer_gathered_bytes(arch, Job(method="lora", stack="torchtune"), 2)
    embedding = 2 * arch.vocab_size * arch.hidden_size
    assert lora == 2 * counts.per_layer  # 16-bit: the layer is the largest module
    assert max(bnb, nf4) < embedding < lora  # a 4-bit layer (1.6 GB) is smaller than the 16-bit embedding (4.2 GB)
    small = catalogue.architecture("llama-2-70b")
    c70 = count_params(small)
    bnb70 = layer_gathered_bytes(small, Job(method="qlora", stack="deepspeed"), 2)
    assert bnb70 == c70.per_layer_linear // 2 + 2 * (c70.per_layer - c70.per_layer_linear)
    assert norms > 0 and linear > 0


def test_torchtune_layer_backward_does_not_stack_on_the_logits(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    plan = Plan(gpu="rtx4090-24gb", num_gpus=1, micro_batch=2, recompute="full")
    tune = Job(method="qlora", stack="torchtune", seq_len=2048, compile="model+loss", loss="chunked")
    other = tune.model_copy(update={"stack": "hf"})
    micro = microbatch_activations(arch, tune, plan)
    assert micro.output_released and not microbatch_activations(arch, other, plan).output_released
    acts = activations(arch, tune, plan)
    # the layer's backward peak is the larger one here: it stacks on the layers' inputs alone
    assert micro.layer_peak_bytes - micro.output_layer_bytes > micro.loss_peak_bytes
    assert acts.backward_peak_extra_bytes == micro.layer_peak_bytes - micro.output_layer_bytes
    assert acts.output_layer_bytes == micro.output_layer_bytes
    hf_micro = microbatch_activations(arch, other, plan)
    assert activations(arch, other, plan).backward_peak_extra_bytes == max(hf_micro.layer_peak_bytes,
                                                                           hf_micro.loss_peak_bytes)
