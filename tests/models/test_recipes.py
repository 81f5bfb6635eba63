"""Training-stack recipes (models/memory/recipe.py, loss.py, recompute.py, fragmentation.py, stack.py):
each byte count follows from what the cited implementation keeps."""

from __future__ import annotations

import json

from helpers.catalogue import packaged_catalogue
from helpers.cli import invoke

from vramplan.models.architecture.params import count_params, layer_linear_modules
from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.activations import activations
from vramplan.models.memory.loss import loss_cost
from vramplan.models.memory.memory import memory_per_gpu
from vramplan.models.memory.model_states import frozen_base_bytes, model_states
from vramplan.models.memory.saved_tensors import Shape
from vramplan.solver.query_fields import estimate_recompute, job_from_fields

LLAMA8B = packaged_catalogue().architecture("llama-3.1-8b")  # 8,030,261,248 parameters, v = 128256, h = 4096, f = 14336
N = 8_030_261_248
PLAN = Plan(gpu="h100-sxm-80gb")


def test_pure_bf16_adamw_is_8_bytes_per_parameter() -> None:
    # torchtune dtype=bf16 / litgpt bf16-true: bf16 weights 2 + bf16 grads 2 + bf16 m, v 4.
    states = model_states(LLAMA8B, Job(master_weights="none"), PLAN)
    assert (states.weights_bytes, states.gradients_bytes, states.optimizer_states_bytes) == (2 * N, 2 * N, 4 * N)


def test_optimizer_in_backward_holds_one_parameter_gradient() -> None:
    # The largest Llama-3.1-8B tensor is the 128256 x 4096 embedding (lm_head the same size).
    states = model_states(LLAMA8B, Job(optimizer_in_backward=True), PLAN)
    assert states.gradients_bytes == 2 * 128256 * 4096


def test_paged_optimizer_states_live_outside_the_allocator() -> None:
    states = model_states(LLAMA8B, Job(optimizer="adamw-8bit-paged", master_weights="none"), PLAN)
    assert states.optimizer_states_bytes == 0
    assert states.paged_bytes == -(-2 * N * 260 // 256)  # 2 states x (1 byte + 4 bytes per 256-block)


def test_peft_kbit_preparation_casts_the_rest_to_fp32() -> None:
    counts = count_params(LLAMA8B)
    sixteen = frozen_base_bytes(LLAMA8B, Job(method="qlora", qlora_prep="16bit"), "bf16")
    peft = frozen_base_bytes(LLAMA8B, Job(method="qlora", qlora_prep="peft"), "bf16")
    assert Job().qlora_prep == "peft"  # the hf stack: HF QLoRA runs prepare_model_for_kbit_training
    not_quantised = counts.total - LLAMA8B.num_layers * sum(m.in_features * m.out_features
                                                            for m in layer_linear_modules(LLAMA8B))
    assert peft - sixteen == 2 * not_quantised  # embeddings, norms, lm_head: 2 more bytes each


def test_chunked_loss_keeps_fp32_log_probs_and_one_chunk_of_gradients() -> None:
    job, plan = Job(seq_len=4096, loss="chunked"), Plan(gpu="x", recompute="full")
    t, v = 4096, 128256
    acts = activations(LLAMA8B, job, plan)
    eager = activations(LLAMA8B, Job(seq_len=4096), plan)
    # eager keeps fp32 log-probs 4Tv and the bf16 logits 2Tv; chunked only the log-probs.
    assert eager.output_layer_bytes - acts.output_layer_bytes == 2 * t * v + 4  # + HF's fp32 total_weight scalar
    # backward: one chunk's fp32 log-prob and logit gradients and their bf16 cast, or a layer's rebuild
    assert loss_cost(LLAMA8B, job, Shape(b=1, s=t, e=2)).backward_extra_bytes == (2 * 4 + 2) * (t // 8) * v
    assert eager.backward_peak_extra_bytes == 8 * t * v


def test_fused_loss_never_materialises_the_logits() -> None:
    acts = activations(LLAMA8B, Job(seq_len=4096, loss="fused"), Plan(gpu="x", recompute="full"))
    assert acts.output_layer_bytes < 4096 * 128256  # less than one byte per logit


def test_op_sac_keeps_input_every_other_mm_and_sdpa_outputs() -> None:
    # Llama block mms in order q, k, v, o, gate, up, down: torchtitan saves q, v, gate, down.
    s, e, h = 2048, 2, 4096
    acts = activations(LLAMA8B, Job(seq_len=s), Plan(gpu="x", recompute="op"))
    expected = e * s * (h + 4096 + 1024 + 14336 + 4096) + e * s * 4096 + 4 * s * 32
    assert acts.per_layer_bytes == expected


def test_selective_means_op_for_torchtitan() -> None:
    job = job_from_fields({"stack": "torchtitan", "seq_len": 2048})
    assert job.selective == "op" and estimate_recompute({"stack": "torchtitan"}) == "selective"
    op = activations(LLAMA8B, job, Plan(gpu="x", recompute="op")).total_bytes
    assert activations(LLAMA8B, job, Plan(gpu="x", recompute="selective")).total_bytes == op


def test_partial_full_recompute_keeps_the_other_layers_whole() -> None:
    none = activations(LLAMA8B, Job(), Plan(gpu="x")).per_layer_bytes
    full = activations(LLAMA8B, Job(), Plan(gpu="x", recompute="full"))
    half = activations(LLAMA8B, Job(recompute_layers=16), Plan(gpu="x", recompute="full"))
    assert half.layers_bytes - full.layers_bytes == 16 * (none - full.per_layer_bytes)


def test_activation_offload_keeps_two_layers_on_the_gpu() -> None:
    kept = activations(LLAMA8B, Job(), Plan(gpu="x", recompute="full"))
    off = activations(LLAMA8B, Job(activation_offload=True), Plan(gpu="x", recompute="full"))
    assert kept.layers_bytes - off.layers_bytes == 30 * kept.per_layer_bytes == off.offloaded_bytes


def test_fragmentation_reserve_is_a_fraction_of_the_largest_transient() -> None:
    # eager loss: the fp32 logits gradient 4Tv is the largest single block at s = 2048.
    acts = activations(LLAMA8B, Job(fragmentation_fraction=0.5), Plan(gpu="x"))
    assert acts.fragmentation_reserve_bytes == 4 * 2048 * 128256 // 2
    assert activations(LLAMA8B, Job(fragmentation_fraction=0), Plan(gpu="x")).fragmentation_reserve_bytes == 0
    # the hf stack's default: one largest transient block under the default caching allocator
    assert activations(LLAMA8B, Job(), Plan(gpu="x")).fragmentation_reserve_bytes == 4 * 2048 * 128256


def test_explicit_options_override_the_preset() -> None:
    job = job_from_fields({"stack": "torchtune", "loss": "eager", "seq_len": 2048})
    assert (job.stack, job.loss, job.master_weights) == ("torchtune", "eager", "none")
    assert job_from_fields({"seq_len": 2048}) == Job()  # no --stack: hf, whose preset is Job()'s defaults


def test_every_stack_row_has_a_source_and_the_default_is_hf() -> None:
    stacks = load_stacks()
    assert set(stacks) == {"hf", "deepspeed", "megatron", "torchtitan", "torchtitan-root-fsdp", "torchtune", "litgpt",
                           "litgpt-fsdp1", "unsloth", "custom"}
    # lit-gpt up to v0.5.7 trains with litgpt's recipe; only its FSDP1 sharding differs (stack_behaviour.py);
    # torchtitan before 83e6941 (#1094) with torchtitan's, only its FSDP root unit differs
    for old, new in (("litgpt-fsdp1", "litgpt"), ("torchtitan-root-fsdp", "torchtitan")):
        assert stacks[old].model_dump(exclude={"name", "description", "source"}) == \
            stacks[new].model_dump(exclude={"name", "description", "source"})
    assert all(len(row.source) > 40 for row in stacks.values())
    hf = stacks["hf"]
    # custom is hf's recipe with no framework's limits (catalogues/stack_capabilities.csv)
    assert stacks["custom"].model_dump(exclude={"name", "description", "source"}) == \
        hf.model_dump(exclude={"name", "description", "source"})
    assert {f: getattr(hf, f) for f in ("master_weights", "loss", "kernels", "accounting", "fragmentation_fraction")} == \
        {f: getattr(Job(), f) for f in ("master_weights", "loss", "kernels", "accounting", "fragmentation_fraction")}


def test_cli_stacks_and_a_bad_stack() -> None:
    listed = invoke("stacks", "--format", "json", standalone_mode=False)
    assert {row["name"] for row in json.loads(listed.output)} == set(load_stacks())
    bad = invoke("estimate", "--model", "llama-3.1-8b", "--stack", "nemo")
    assert bad.exit_code == 2 and "stack" in bad.output


def test_cli_stack_changes_the_estimate_and_paged_states_are_reported(catalogue) -> None:
    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", "rtx4090-24gb", "--format", "json"]
    tune = invoke(*args, "--stack", "torchtune", "--optimizer", "adamw-8bit-paged", "--optimizer-in-backward",
                  standalone_mode=False)
    memory = json.loads(tune.output)["memory"]
    assert memory["optimizer_states_bytes"] == 0 and memory["paged_bytes"] > 15 * 10**9
    fits = memory_per_gpu(LLAMA8B, job_from_fields({"stack": "torchtune", "optimizer": "adamw-8bit-paged",
                                                     "optimizer_in_backward": True, "seq_len": 2048}),
                          Plan(gpu="rtx4090-24gb", recompute="full"), catalogue.gpu("rtx4090-24gb"))
    assert fits.gpu_fits  # torchtune's Llama 3.1 8B full fine-tune runs on one 24 GB card


def test_cli_table_reports_what_lives_outside_the_allocator_and_op_recompute() -> None:
    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", "rtx4090-24gb", "--stack", "unsloth", "--method", "qlora",
            "--optimizer", "adamw-8bit-paged", "--recompute", "full"]  # Unsloth checkpoints whole layers (its contract)
    out = invoke(*args, standalone_mode=False).output
    assert "outside the torch allocator" in out and "activations offloaded to host RAM" in out
    solved = invoke("solve", "--model", "llama-3.1-8b", "--stack", "torchtitan", "--recompute", "op", "--gpu", "h100-sxm-80gb",
                    "--format", "json", standalone_mode=False)
    assert json.loads(solved.output)["plans"][0]["plan"]["recompute"] == "op"
