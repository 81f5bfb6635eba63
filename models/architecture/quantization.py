"""How a checkpoint stores its weights (config.json `quantization_config`), and what training does with it.

`Architecture.checkpoint_quantization` holds one canonical text, read from quantization_config by
models/catalogue/hf_config.py: '' (16-bit), `gptq:BITS:GROUP`, `awq:BITS:GROUP` (GROUP 0: one group
per input column, GPTQ's group_size -1), `nf4`, `nf4:dq`, `fp4`, `fp4:dq` (bitsandbytes 4-bit,
`dq` = double quantisation), `int8` (bitsandbytes LLM.int8), `fp8` / `fp8:ROWS:COLS` (FP8 weights,
one fp32 scale per tensor or per ROWS x COLS block), `mxfp4` (gpt-oss: MoE experts only).

Stored bytes of one quantised matrix of K inputs and N outputs (W = K N weights; biases stay 16-bit):
- GPTQ (AutoGPTQ / GPTQModel `QuantLinear` buffers): qweight int32 [K b / 32, N] = W b / 8, qzeros
  int32 [G_K, N b / 32] = G_K N b / 8, scales fp16 [G_K, N] = 2 G_K N, g_idx int32 [K] = 4 K, with
  G_K = ceil(K / group) groups along the input;
- AWQ (AutoAWQ `WQLinear_GEMM`): qweight int32 [K, N b / 32] = W b / 8, qzeros G_K N b / 8, scales
  fp16 2 G_K N; no g_idx;
- bitsandbytes 4-bit (`Params4bit`, blocks of 64 of the flattened weight): W / 2 packed, absmax fp32
  per block (4 W / 64), or with double quantisation a uint8 per block plus an fp32 per 256 blocks
  (W / 64 + 4 W / 16384: QLoRA, arXiv:2305.14314 sec. 3, 4.127 bits per weight);
- bitsandbytes 8-bit (`Int8Params`): W bytes + one fp32 scale per output row (SCB, 4 N);
- FP8 (transformers `FP8Linear`, DeepSeek-V3 / Qwen3-FP8 checkpoints): W bytes + fp32
  `weight_scale_inv` per ROWS x COLS block (4 ceil(N / ROWS) ceil(K / COLS)), or one per tensor;
- MXFP4 (gpt-oss `*_blocks` / `*_scales`): 4-bit values + one 8-bit scale per 32: 17 W / 32.
Every decoder-layer matmul weight is in scope (MXFP4: the experts only, as gpt-oss's
modules_to_not_convert keeps attention, router, embeddings and lm_head in bf16; GPTQ/AWQ exporters
also keep MoE routers 16-bit, a few MB that this counts as quantised).

What training does with a quantised checkpoint (transformers 5.24; docs/memory-model.md):
- LoRA / QLoRA on a GPTQ, AWQ or bitsandbytes checkpoint keep its frozen base as stored: the
  quantizers are trainable (quantizers/quantizer_gptq.py, _awq.py, _bnb_4bit.py, _bnb_8bit.py
  `is_trainable`), PEFT wraps their linears;
- full fine-tuning of such a checkpoint is refused (trainer_utils.validate_quantization_for_training:
  "You cannot perform fine-tuning on purely quantized models"): planned on 16-bit weights, with a note;
- MXFP4 does not train (quantizer_mxfp4.is_trainable is False): every method loads it with
  Mxfp4Config(dequantize=True), bf16;
- FP8: the plan counts bf16 for every method. transformers dequantizes on GPUs under compute
  capability 8.9 (quantizer_finegrained_fp8.validate_environment) and keeps FP8 under LoRA on newer
  ones; the memory model does not see the GPU, so this is an upper bound of about 1 byte per weight there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from vramplan.models.architecture.params import LinearModule, layer_group, layer_groups
from vramplan.models.architecture.skip_modules import MAX_SKIP_ENTRIES, matched_matrices, readable_skip_entry
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job
from vramplan.models.core.stack_behaviour import LIGHTNING_BNB_STACKS, TORCHAO_NF4_STACKS, UNQUANTISED_EXPERTS_STACKS

FP32_BYTES, HALF_BYTES = 4, 2
BNB4_BLOCK = 64  # bitsandbytes 4-bit first-level block
BNB4_DOUBLE_QUANT_BLOCK = 256  # second-level block (of absmax values)
MXFP4_BLOCK = 32
ADAPTER_ONLY = frozenset({"gptq", "awq", "nf4", "fp4", "int8"})  # trainable only through adapters, kept as stored
_NAMES = {"gptq": "GPTQ", "awq": "AWQ", "nf4": "bitsandbytes NF4", "fp4": "bitsandbytes FP4",
          "int8": "bitsandbytes LLM.int8", "fp8": "FP8", "mxfp4": "MXFP4"}


@dataclass(frozen=True)
class WeightFormat:
    method: str  # gptq, awq, nf4, fp4, int8, fp8, mxfp4
    bits: int = 0  # gptq / awq
    group: int = 0  # gptq / awq input group (0: the whole input); fp8 block rows (0: per tensor)
    cols: int = 0  # fp8 block columns
    double_quant: bool = False  # bitsandbytes 4-bit
    # bitsandbytes: llm_int8_skip_modules names modules beyond the lm_head that the checkpoint keeps in
    # 16 bits (Unsloth's dynamic 4-bit checkpoints list decoder layers' attention or MLP): its entries,
    # matched as transformers matches them (skipped_matrices), or, where they could not be read
    # (skips without entries), an unknown set counted quantised, and quantization_note says so
    skips: bool = False
    skip_modules: tuple[str, ...] = ()
    # whether the routed experts (the modules a MoE layer repeats) are quantised: False where the
    # stack quantises through transformers 5, whose fused expert parameters bitsandbytes skips
    # (UNQUANTISED_EXPERTS_STACKS); they are then held like the base's other 16-bit parameters
    experts: bool = True

    def text(self) -> str:
        if self.method in ("gptq", "awq"):
            return f"{self.method}:{self.bits}:{self.group}"
        if self.method in ("nf4", "fp4", "int8"):
            skips = (":skip" + ("=" + "|".join(self.skip_modules) if self.skip_modules else "")) if self.skips else ""
            return self.method + (":dq" if self.double_quant else "") + skips
        if self.method == "fp8" and self.group:
            return f"fp8:{self.group}:{self.cols}"
        return self.method

    def describe(self) -> str:
        if self.method in ("gptq", "awq"):
            group = f"group {self.group}" if self.group else "one group per column"
            return f"{_NAMES[self.method]} {self.bits}-bit ({group})"
        if self.method == "fp8":
            return f"FP8 ({f'{self.group}x{self.cols} blocks' if self.group else 'per-tensor scale'})"
        return _NAMES[self.method] + (" with double quantisation" if self.double_quant else "")


def parse_format(text: str) -> WeightFormat | None:
    """The WeightFormat of a canonical text ('' is None); ValueError names what is wrong."""
    if not text:
        return None
    method, *args = text.split(":")
    try:
        numbers = [int(a) for a in args] if method in ("gptq", "awq", "fp8") else []
    except ValueError:
        raise ValueError(f"{text!r}: the numbers of {method} must be whole numbers") from None
    if method in ("gptq", "awq") and len(numbers) == 2 and numbers[0] in (2, 3, 4, 8) and numbers[1] >= 0:
        return WeightFormat(method, bits=numbers[0], group=numbers[1])
    skips = bool(args) and args[-1].partition("=")[0] == "skip" and method in ("nf4", "fp4", "int8")
    entries: tuple[str, ...] = ()
    if skips:
        listed = args[-1].partition("=")[2]
        entries = tuple(listed.split("|")) if listed else ()
        if not all(readable_skip_entry(e) for e in entries) or len(entries) > MAX_SKIP_ENTRIES:
            raise ValueError(f"{text[:200]!r}: a skip entry is not a module pattern (letters, digits, _ . - and at most "
                             f"two *, 200 characters, {MAX_SKIP_ENTRIES} entries)")
        args = args[:-1]
    if method in ("nf4", "fp4") and args in ([], ["dq"]):
        return WeightFormat(method, double_quant=bool(args), skips=skips, skip_modules=entries)
    if method in ("int8", "mxfp4") and not args:
        return WeightFormat(method, skips=skips, skip_modules=entries)
    if method == "fp8" and (not numbers or (len(numbers) == 2 and min(numbers) >= 1)):
        return WeightFormat("fp8", group=numbers[0] if numbers else 0, cols=numbers[1] if numbers else 0)
    raise ValueError(f"{text[:200]!r} is not a checkpoint format: '', gptq:BITS:GROUP, awq:BITS:GROUP, "
                     "nf4[:dq][:skip[=ENTRY|...]], fp4[:dq][:skip[=ENTRY|...]], int8[:skip[=ENTRY|...]], fp8[:ROWS:COLS] "
                     "or mxfp4")


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def matrix_bytes(fmt: WeightFormat, k: int, n: int) -> int:
    """Stored bytes of one quantised K-input, N-output weight matrix (without its bias)."""
    w = k * n
    if fmt.method in ("gptq", "awq"):
        groups = _ceil(k, fmt.group) if fmt.group else 1
        packed = _ceil(w * fmt.bits, 8) + _ceil(groups * n * fmt.bits, 8) + HALF_BYTES * groups * n
        return packed + (FP32_BYTES * k if fmt.method == "gptq" else 0)
    if fmt.method in ("nf4", "fp4"):
        blocks = _ceil(w, BNB4_BLOCK)
        absmax = blocks + FP32_BYTES * _ceil(blocks, BNB4_DOUBLE_QUANT_BLOCK) if fmt.double_quant else FP32_BYTES * blocks
        return _ceil(w, 2) + absmax
    if fmt.method == "int8":
        return w + FP32_BYTES * n
    if fmt.method == "fp8":
        return w + FP32_BYTES * (_ceil(n, fmt.group) * _ceil(k, fmt.cols) if fmt.group else 1)
    if fmt.method == "mxfp4":
        blocks = _ceil(k, MXFP4_BLOCK) * n
        return blocks * MXFP4_BLOCK // 2 + blocks
    raise ValueError(f"unknown weight format {fmt.method!r}")


def _in_scope(fmt: WeightFormat, module: LinearModule) -> bool:
    if module.copies_per_layer > 1:  # a routed expert
        return fmt.experts
    return fmt.method != "mxfp4"


@lru_cache(maxsize=256)
def skipped_matrices(arch: Architecture, fmt: WeightFormat) -> frozenset[tuple[int, str]]:
    """(layer index, module name) of the in-scope decoder matrices the checkpoint keeps in 16 bits:
    those an llm_int8_skip_modules entry matches (models/architecture/skip_modules.py)."""
    if not fmt.skip_modules:
        return frozenset()
    matched = matched_matrices(arch, tuple(fmt.skip_modules))
    return frozenset((index, m.name) for index in range(arch.num_layers) for m in layer_group(arch, index).modules
                     if (index, m.name) in matched and _in_scope(fmt, m))


@lru_cache(maxsize=1024)
def _model_quantised(arch: Architecture, fmt: WeightFormat) -> tuple[int, int, Fraction]:
    """(stored bytes, weights) of every in-scope decoder-layer matmul weight of the whole model, and
    the most stored bytes per weight of any one layer (skipped matrices make some layers denser)."""
    skipped = skipped_matrices(arch, fmt)
    stored = weights = 0
    densest = Fraction(0)
    for index in range(arch.num_layers) if skipped else ():
        layer_stored = layer_weights = 0
        for m in layer_group(arch, index).modules:
            if _in_scope(fmt, m):
                w = m.copies_per_layer * m.in_features * m.out_features
                kept = (index, m.name) in skipped  # a 16-bit nn.Linear beside the quantised ones
                layer_stored += HALF_BYTES * w if kept else m.copies_per_layer * matrix_bytes(fmt, m.in_features, m.out_features)
                layer_weights += w
        stored, weights = stored + layer_stored, weights + layer_weights
        densest = max(densest, Fraction(layer_stored, layer_weights or 1))
    if skipped:
        return stored, weights, densest
    for group in layer_groups(arch):
        for m in group.modules:
            if _in_scope(fmt, m):
                copies = group.count * m.copies_per_layer
                stored += copies * matrix_bytes(fmt, m.in_features, m.out_features)
                weights += copies * m.in_features * m.out_features
    return stored, weights, Fraction(stored, weights or 1)


def quantised_weight_bytes(arch: Architecture, fmt: WeightFormat, dense_weights: int, expert_weights: int) -> tuple[int, int]:
    """(stored bytes, weights they hold) for a rank holding `dense_weights` + `expert_weights` decoder
    matmul weights (its TP/PP/EP share, models/memory/parallel_states.py): the whole model's exact
    stored bytes, times the rank's share of the in-scope weights (exact for the whole model). Where
    llm_int8_skip_modules keeps some layers' matrices in 16 bits, a rank holding part of the model
    counts its weights at the densest layer's bytes per weight (which layers a pipeline rank holds is
    not known here: an upper bound). The one function every quantised frozen base goes through:
    QLoRA's own quantisation and a pre-quantised checkpoint alike (models/memory/model_states.py
    frozen_base_bytes)."""
    held = (0 if fmt.method == "mxfp4" else dense_weights) + (expert_weights if fmt.experts else 0)
    stored, weights, densest = _model_quantised(arch, fmt)
    if not weights or not held:
        return 0, 0
    if held < weights and skipped_matrices(arch, fmt):
        return min(stored, math.ceil(densest * held)), held
    return _ceil(stored * held, weights), held


def bnb4_bytes_per_weight(double_quant: bool = True) -> Fraction:
    """bitsandbytes 4-bit: 4 bits + 8 bits / 64 + 32 bits / (64 * 256) with double quantisation,
    4 bits + 32 bits / 64 without (QLoRA sec. 3)."""
    if double_quant:
        return Fraction(1, 2) + Fraction(1, BNB4_BLOCK) + Fraction(FP32_BYTES, BNB4_BLOCK * BNB4_DOUBLE_QUANT_BLOCK)
    return Fraction(1, 2) + Fraction(FP32_BYTES, BNB4_BLOCK)


def torchao_nf4(arch: Architecture, job: Job) -> bool:
    """The frozen base is QLoRA's own NF4 as torchao's NF4Tensor (TORCHAO_NF4_STACKS: torchtune), whose
    quantisation state FSDP shards and gathers with the data; any other NF4 / FP4 base is bitsandbytes."""
    if job.method != "qlora" or job.stack not in TORCHAO_NF4_STACKS:
        return False
    stored = checkpoint_format(arch)
    return stored is None or stored.method not in ADAPTER_ONLY


def bnb4_quant_state(arch: Architecture, job: Job) -> WeightFormat | None:
    """The bitsandbytes 4-bit format of a frozen base whose quant state lives outside its sharded
    parameter (None for a 16-bit, torchao NF4, 8-bit or GPTQ/AWQ base)."""
    fmt = frozen_base_format(arch, job)
    if fmt is None or fmt.method not in ("nf4", "fp4") or torchao_nf4(arch, job):
        return None
    return fmt


def packed_4bit_bytes(weights: int) -> int:
    """The 4-bit values of `weights` weights, two a byte: what a bitsandbytes Params4bit's data holds
    (in its quant_storage dtype), without the quant state."""
    return _ceil(weights, 2)


def quantised_layer_bytes(arch: Architecture, job: Job, weight_bytes: int, modules: tuple[LinearModule, ...],
                          norm_params: int) -> int | None:
    """Bytes of one decoder layer as ZeRO-3 / FSDP gathers it when its base is 4-bit: the storage the
    sharded parameter holds, not a 16-bit copy. torchao's NF4Tensor gathers its data, scalers and
    factors (pytorch/ao@a584e2427 torchao/dtypes/nf4tensor.py L853-875 fsdp_pre_all_gather): the
    stored bytes; a bitsandbytes Params4bit (quant_storage = the 16-bit dtype, PEFT's FSDP / ZeRO-3
    QLoRA) is flattened and gathered as its packed data only, the quant state staying a module
    attribute (bitsandbytes@dcfb6f81 bitsandbytes/nn/modules.py L181-189 `_quantize`: `self.data =
    w_4bit`, `self.module.quant_state = quant_state`; L268-274 Linear4bit.forward: "the quant state got
    lost when the parameter got converted. This happens for example for fsdp", restored from the
    module): W / 2 bytes. Biases, norms and out-of-scope matrices stay `weight_bytes` a parameter.
    None where the base is not 4-bit (the caller counts 16-bit)."""
    fmt = frozen_base_format(arch, job)
    if fmt is None or fmt.method not in ("nf4", "fp4"):
        return None
    total = norm_params * weight_bytes
    for m in modules:
        if not _in_scope(fmt, m):
            total += m.num_params * weight_bytes
            continue
        weights = m.in_features * m.out_features
        stored = matrix_bytes(fmt, m.in_features, m.out_features) if torchao_nf4(arch, job) else packed_4bit_bytes(weights)
        total += m.copies_per_layer * (stored + (m.num_params // m.copies_per_layer - weights) * weight_bytes)
    return total


def checkpoint_format(arch: Architecture) -> WeightFormat | None:
    return parse_format(arch.checkpoint_quantization)


LIGHTNING_QUANT_STATE_BYTES = HALF_BYTES  # fp16: `.to(device=device, dtype=torch.half)` before quantize_4bit


def lightning_bnb(arch: Architecture, job: Job) -> bool:
    """The frozen base is QLoRA's own bitsandbytes quantisation through Lightning Fabric (litgpt)."""
    if job.method != "qlora" or job.stack not in LIGHTNING_BNB_STACKS:
        return False
    stored = checkpoint_format(arch)
    return stored is None or stored.method not in ADAPTER_ONLY


def quantised_lm_head_bytes(arch: Architecture, job: Job) -> int:
    """Stored bytes of the lm_head when the stack quantises it (litgpt: LIGHTNING_BNB_STACKS), else 0:
    one v x h matrix in the frozen base's format."""
    fmt = frozen_base_format(arch, job)
    if fmt is None or not lightning_bnb(arch, job):
        return 0
    return matrix_bytes(fmt, arch.hidden_size, arch.logits_width)


def dequantised_weight_bytes(arch: Architecture, job: Job, activation_bytes: int, precision: str) -> tuple[int, int]:
    """(decoder, lm_head) transient bytes of dequantising the largest quantised matrix for a GEMM.

    A bitsandbytes or NF4 base is multiplied as 16-bit weights: bitsandbytes@4870580 (0.42.0)
    autograd/_functions.py MatMul4Bit.forward `torch.nn.functional.linear(A, F.dequantize_4bit(B,
    quant_state).to(A.dtype).t(), bias)` and backward `torch.matmul(grad_output, F.dequantize_4bit(B,
    ctx.state).to(grad_output.dtype).t())` (MatMul8bitLt.backward likewise casts CB to A's dtype),
    torchao/dtypes/nf4tensor.py LinearNF4 (torchtune) `F.linear(input, weight.to(input.dtype))`: one
    whole matrix at a time, in the activation dtype (e bytes a weight); under Lightning Fabric (litgpt)
    the quant state is fp16 (LIGHTNING_QUANT_STATE_BYTES), so a bf16 or fp32 GEMM also holds the fp16
    copy while casting it. The lm_head counts only where it is quantised (quantised_lm_head_bytes).
    GPTQ/AWQ kernels multiply packed weights: 0."""
    fmt = frozen_base_format(arch, job)
    if fmt is None or fmt.method not in ("nf4", "fp4", "int8"):
        return 0, 0
    per_weight = activation_bytes
    if lightning_bnb(arch, job) and precision != "fp16":  # fp16 compute uses the fp16 copy as it is
        per_weight += LIGHTNING_QUANT_STATE_BYTES
    largest = max((m.in_features * m.out_features for group in layer_groups(arch) for m in group.modules
                   if _in_scope(fmt, m)), default=0)
    lm_head = arch.logits_width * arch.hidden_size if quantised_lm_head_bytes(arch, job) else 0
    return per_weight * largest, per_weight * lm_head


def frozen_base_format(arch: Architecture, job: Job) -> WeightFormat | None:
    """How the frozen base of an adapter job is held: a GPTQ/AWQ/bitsandbytes checkpoint as stored;
    else QLoRA's bitsandbytes quantisation of the 16-bit (or dequantised FP8/MXFP4) weights; else
    None (16-bit). Full fine-tuning has no frozen base."""
    if job.method == "full":
        return None
    stored = checkpoint_format(arch)
    if stored is not None and stored.method in ADAPTER_ONLY:
        return stored
    if job.method == "qlora":
        experts = not unquantised_experts(arch, job)
        return WeightFormat("nf4", double_quant=True, experts=experts) if job.qlora_bits == 4 else WeightFormat("int8", experts=experts)
    return None


def unquantised_experts(arch: Architecture, job: Job) -> bool:
    """QLoRA's own bitsandbytes quantisation leaves the MoE model's routed experts in 16 bits: the stack
    quantises through transformers 5, whose fused expert parameters replace_with_bnb_linear never
    replaces (UNQUANTISED_EXPERTS_STACKS cites the code). The router, a Parameter there too, is still
    counted quantised: h x experts weights a MoE layer (12.6 M on Qwen3-30B-A3B, 44 MB low in fp32)."""
    if job.method != "qlora" or job.stack not in UNQUANTISED_EXPERTS_STACKS or arch.num_experts <= 1:
        return False
    stored = checkpoint_format(arch)
    return stored is None or stored.method not in ADAPTER_ONLY


def unquantised_experts_note(arch: Architecture, job: Job) -> str | None:
    """One line where the plan holds a QLoRA base's routed experts in 16 bits (unquantised_experts)."""
    if not unquantised_experts(arch, job):
        return None
    kept = "fp32 (PEFT's k-bit preparation casts them)" if job.qlora_prep == "peft" else "16 bits"
    return (f"{job.stack}: bitsandbytes quantises only nn.Linear modules, and transformers 5 stores "
            f"{arch.model_type}'s routed experts as fused parameters, so QLoRA quantises its attention "
            f"and dense layers and holds the experts in {kept} (bitsandbytes#1849); --stack unsloth "
            "quantises them")


def quantization_note(arch: Architecture, job: Job) -> str | None:
    """One line on what the plan assumes of a quantised checkpoint (None for a 16-bit one)."""
    stored = checkpoint_format(arch)
    if stored is None:
        return None
    what = f"the checkpoint stores {stored.describe()} weights"
    kept = skipped_matrices(arch, stored)
    if kept:
        what += f" ({len(kept)} decoder matrices kept in 16 bits by its llm_int8_skip_modules, counted so)"
    elif stored.skips and not stored.skip_modules:  # entries vramplan could not read as patterns
        what += (" (its llm_int8_skip_modules keep some modules in 16 bits, counted quantised here: "
                 "the weights read low)")
    if stored.method in ADAPTER_ONLY and job.method != "full":
        bits = " (--qlora-bits does not re-quantise it)" if job.method == "qlora" else ""
        return f"{what}: the frozen base is counted as stored (LoRA/QLoRA train adapters on top of it){bits}"
    if stored.method in ADAPTER_ONLY:
        return (f"{what}, which transformers will not fully fine-tune (adapters only): the plan counts "
                "16-bit weights, i.e. a dequantised or original 16-bit checkpoint")
    why = ("MXFP4 does not train" if stored.method == "mxfp4"
           else "FP8 is dequantised before compute capability 8.9, and counted so on every GPU")
    return f"{what}: training loads them dequantised to bf16 ({why}), so the plan counts 16-bit weights"
