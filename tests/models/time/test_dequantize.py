"""A quantised frozen base's dequantisation time (models/time/dequantize.py): QLoRA's extra work
over LoRA, checked against torchtune's README optimization table (pytorch/torchtune README.md @
1814feb17, #2003: Llama 3.2 3B on one A100, batch 2 packed to 4096 tokens, compiled, chunked
cross-entropy, activation checkpointing and offloading, AdamW; LoRA 8,210 and QLoRA 8,035 tokens/s,
the same rows whose memory tests/data/measured_peaks.csv holds)."""

from __future__ import annotations

import pytest

from vramplan.models.architecture.quantization import frozen_base_format, quantised_weight_bytes
from vramplan.models.core.setup import Plan
from vramplan.models.memory.parallel_states import rank_params
from vramplan.models.time.dequantize import dequantize_bytes_per_micro_batch, dequantize_s
from vramplan.models.time.performance import performance
from vramplan.solver.query_fields import job_from_fields

TORCHTUNE = {"stack": "torchtune", "seq_len": 4096, "lora_rank": 64, "lora_dropout": 0.0,
             "lora_targets": "q_proj;v_proj;o_proj;gate_proj;up_proj;down_proj", "loss": "chunked",
             "activation_offload": True, "compile": "model+loss", "optimizer": "adamw"}
PLAN = Plan(gpu="a100-sxm-80gb", micro_batch=2, recompute="full")


def test_qlora_is_as_much_slower_than_lora_as_torchtune_measured(catalogue) -> None:
    arch, gpu = catalogue.architecture("llama-3.2-3b"), catalogue.gpu("a100-sxm-80gb")
    lora = performance(arch, job_from_fields({**TORCHTUNE, "method": "lora"}), PLAN, gpu)
    qlora = performance(arch, job_from_fields({**TORCHTUNE, "method": "qlora"}), PLAN, gpu)
    assert lora.dequantize_s == 0 and qlora.dequantize_s > 0
    ratio = qlora.tokens_per_s / lora.tokens_per_s
    assert ratio == pytest.approx(8035 / 8210, abs=0.015)  # measured 0.979; this term alone gives 0.990
    assert ratio < 1


def test_the_bytes_are_every_matrix_read_and_written_once_per_pass(catalogue) -> None:
    """Forward, backward and the recomputed forward each dequantise every matrix of the rank: the
    stored bytes read and the activation-dtype copy written; no recompute, two passes; LLM.int8 one
    (the backward), with its in-place scaling."""
    arch = catalogue.architecture("llama-3.1-8b")
    job = job_from_fields({"method": "qlora", "seq_len": 2048})
    fmt = frozen_base_format(arch, job)
    shard = rank_params(arch, 1, 1, 1, 0)
    stored, held = quantised_weight_bytes(arch, fmt, shard.fp8_matmul_dense, shard.fp8_matmul_expert)
    full = Plan(gpu="a100-sxm-80gb", recompute="full")
    assert dequantize_bytes_per_micro_batch(arch, job, full) == 3 * (stored + 2 * held)
    assert dequantize_bytes_per_micro_batch(arch, job, full.model_copy(update={"recompute": "none"})) == 2 * (stored + 2 * held)
    int8 = job.model_copy(update={"qlora_bits": 8})
    stored8, held8 = quantised_weight_bytes(arch, frozen_base_format(arch, int8), shard.fp8_matmul_dense, shard.fp8_matmul_expert)
    assert dequantize_bytes_per_micro_batch(arch, int8, full) == stored8 + 3 * 2 * held8
    lora = job.model_copy(update={"method": "lora"})
    assert dequantize_bytes_per_micro_batch(arch, lora, full) == 0  # a 16-bit base multiplies as stored
    four = full.model_copy(update={"grad_accum": 4})
    gpu = catalogue.gpu("a100-sxm-80gb")
    assert dequantize_s(arch, job, four, gpu) == pytest.approx(4 * dequantize_s(arch, job, full, gpu))
