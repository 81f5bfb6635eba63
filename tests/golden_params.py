"""Exact parameter counts of the catalogue architectures, as Hugging Face transformers builds them.

Produced by tests/tools/hf_param_counts.py with transformers 5.24.0 and torch 2.13.0 (CPU):

    /work/venv-torch/bin/python tests/tools/hf_param_counts.py

For each row of catalogues/architectures.csv the tool loads tests/fixtures/hf_configs/<name>.json
(the model's hub config.json; gpt3-175b, which is not on the hub, is a GPT2Config built from its
catalogue row), instantiates ``AutoModelForCausalLM.from_config(config)`` under
``with torch.device("meta"):`` (no weights are allocated) and counts parameters exactly:

* total      -- sum(p.numel() for p in model.parameters()); a tied lm_head is the embedding
                Parameter and is counted once.
* embedding  -- token embedding + learned position embedding (GPT-2 wpe).
* per_layer  -- decoder layer 0 (every layer of these models has the same count).
* final_norm -- the norm after the last layer (weight, and bias for LayerNorm).
* lm_head    -- the output projection; 0 when tied to the token embedding.
* active     -- parameters a token uses: total minus, in every layer, the MLP parameters of the
                (num_experts - experts_per_token) experts it skips; equal to total for dense models.

Invariant: total == embedding + num_layers * per_layer + final_norm + lm_head.

Each comment gives the figure the hub publishes (safetensors metadata / model card). Every meta-device
total equals the hub's safetensors count, except that the GPT-2 checkpoints also store non-parameter
causal-mask buffers (see their comments). `--check` re-runs the tool and compares with this file:

    /work/venv-torch/bin/python tests/tools/hf_param_counts.py --check
"""

HF_PARAM_COUNTS: dict[str, dict[str, int]] = {
    # openai-community/gpt2: 124,439,808 parameters (tied lm_head). The hub's safetensors metadata says
    # 137,022,720 because the checkpoint also stores 12 causal-mask buffers h.*.attn.bias of 1024x1024
    # (12,582,912 elements) that are not parameters: 137,022,720 - 12,582,912 = 124,439,808.
    "gpt2-124m": {
        "total": 124_439_808,
        "embedding": 39_383_808,
        "per_layer": 7_087_872,
        "final_norm": 1_536,
        "lm_head": 0,
        "active": 124_439_808,
    },
    # openai-community/gpt2-xl: 1,557,611,200 parameters (tied lm_head). As for gpt2, the checkpoint's
    # element count adds 48 causal-mask buffers (48 * 1024^2), which are not parameters.
    "gpt2-1.5b": {
        "total": 1_557_611_200,
        "embedding": 82_049_600,
        "per_layer": 30_740_800,
        "final_norm": 3_200,
        "lm_head": 0,
        "active": 1_557_611_200,
    },
    # not on the hub; Brown et al. 2020 Table 2.1 gives 175.0B. The GPT-2 layout with n_ctx 2048 and
    # vocab 50257 gives 174,604,259,328 (the paper rounds).
    "gpt3-175b": {
        "total": 174_604_259_328,
        "embedding": 642_723_840,
        "per_layer": 1_812_099_072,
        "final_norm": 24_576,
        "lm_head": 0,
        "active": 174_604_259_328,
    },
    # meta-llama/Llama-2-7b-hf safetensors: 6,738,415,616 (model card: 7B).
    "llama-2-7b": {
        "total": 6_738_415_616,
        "embedding": 131_072_000,
        "per_layer": 202_383_360,
        "final_norm": 4_096,
        "lm_head": 131_072_000,
        "active": 6_738_415_616,
    },
    # meta-llama/Llama-2-13b-hf safetensors: 13,015,864,320 (model card: 13B).
    "llama-2-13b": {
        "total": 13_015_864_320,
        "embedding": 163_840_000,
        "per_layer": 317_204_480,
        "final_norm": 5_120,
        "lm_head": 163_840_000,
        "active": 13_015_864_320,
    },
    # meta-llama/Llama-2-70b-hf safetensors: 68,976,648,192 (model card: 70B; GQA with 8 kv heads).
    "llama-2-70b": {
        "total": 68_976_648_192,
        "embedding": 262_144_000,
        "per_layer": 855_654_400,
        "final_norm": 8_192,
        "lm_head": 262_144_000,
        "active": 68_976_648_192,
    },
    # meta-llama/Llama-3.1-8B safetensors: 8,030,261,248.
    "llama-3.1-8b": {
        "total": 8_030_261_248,
        "embedding": 525_336_576,
        "per_layer": 218_112_000,
        "final_norm": 4_096,
        "lm_head": 525_336_576,
        "active": 8_030_261_248,
    },
    # meta-llama/Llama-3.1-70B safetensors: 70,553,706,496.
    "llama-3.1-70b": {
        "total": 70_553_706_496,
        "embedding": 1_050_673_152,
        "per_layer": 855_654_400,
        "final_norm": 8_192,
        "lm_head": 1_050_673_152,
        "active": 70_553_706_496,
    },
    # meta-llama/Llama-3.1-405B safetensors: 405,853,388,800.
    "llama-3.1-405b": {
        "total": 405_853_388_800,
        "embedding": 2_101_346_304,
        "per_layer": 3_187_703_808,
        "final_norm": 16_384,
        "lm_head": 2_101_346_304,
        "active": 405_853_388_800,
    },
    # mistralai/Mistral-7B-v0.1 safetensors: 7,241,732,096.
    "mistral-7b": {
        "total": 7_241_732_096,
        "embedding": 131_072_000,
        "per_layer": 218_112_000,
        "final_norm": 4_096,
        "lm_head": 131_072_000,
        "active": 7_241_732_096,
    },
    # mistralai/Mixtral-8x7B-v0.1 safetensors: 46,702,792,704; Mixtral paper: 47B total, 13B (12.9B)
    # active. active = total - 32 layers * 6 unused experts * 176,160,768 (the router stays active).
    "mixtral-8x7b": {
        "total": 46_702_792_704,
        "embedding": 131_072_000,
        "per_layer": 1_451_270_144,
        "final_norm": 4_096,
        "lm_head": 131_072_000,
        "active": 12_879_925_248,
    },
    # Qwen/Qwen2.5-7B safetensors: 7,615,616,512 (model card: 7.61B, 6.53B non-embedding).
    "qwen2.5-7b": {
        "total": 7_615_616_512,
        "embedding": 544_997_376,
        "per_layer": 233_057_792,
        "final_norm": 3_584,
        "lm_head": 544_997_376,
        "active": 7_615_616_512,
    },
    # Qwen/Qwen2.5-72B safetensors: 72,706,203,648 (model card: 72.7B; its "70.0B non-embedding" is
    # 70,214,787,072 here -- the card rounds down).
    "qwen2.5-72b": {
        "total": 72_706_203_648,
        "embedding": 1_245_708_288,
        "per_layer": 877_684_736,
        "final_norm": 8_192,
        "lm_head": 1_245_708_288,
        "active": 72_706_203_648,
    },
    # google/gemma-2-9b safetensors: 9,241,705,984 (tied lm_head; head_dim 256 != 3584/16).
    "gemma-2-9b": {
        "total": 9_241_705_984,
        "embedding": 917_504_000,
        "per_layer": 198_195_200,
        "final_norm": 3_584,
        "lm_head": 0,
        "active": 9_241_705_984,
    },
    # google/gemma-2-27b safetensors: 27,227,128,320 (tied lm_head; head_dim 128 != 4608/32).
    "gemma-2-27b": {
        "total": 27_227_128_320,
        "embedding": 1_179_648_000,
        "per_layer": 566_249_472,
        "final_norm": 4_608,
        "lm_head": 0,
        "active": 27_227_128_320,
    },
}
