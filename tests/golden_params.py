"""Exact parameter counts of the catalogue architectures, as Hugging Face transformers builds them.

Produced by tests/tools/hf_param_counts.py with transformers 5.24.0 and torch 2.13.0 (CPU):

    python tests/tools/hf_param_counts.py

For each row of catalogues/architectures.csv the tool loads tests/fixtures/hf_configs/<name>.json
(the model's hub config.json; gpt3-175b, which is not on the hub, is a GPT2Config built from its
catalogue row), instantiates ``AutoModelForCausalLM.from_config(config)`` under
``with torch.device("meta"):`` (no weights are allocated) and counts parameters exactly:

* total      -- sum(p.numel() for p in model.parameters()); a tied lm_head is the embedding
                Parameter and is counted once.
* embedding  -- token embedding + learned position embedding (GPT-2 wpe).
* per_layer  -- decoder layer 0.
* layers     -- all decoder layers (MoE models with dense layers have layers of several sizes).
* final_norm -- the norm after the last layer (weight, and bias for LayerNorm).
* lm_head    -- the output projection; 0 when tied to the token embedding.
* active     -- parameters a token uses: total minus, in every layer, the MLP parameters of the
                (num_experts - experts_per_token) experts it skips, and minus a vision tower; equal
                to total for dense text models.
* vision     -- Gemma 3 only: the vision tower and projector its Auto class loads (in total).

Invariant: total == embedding + layers + final_norm + lm_head (+ vision).

Each comment gives the figure the hub publishes (safetensors metadata / model card). Every meta-device
total equals the hub's safetensors count, except that the GPT-2 checkpoints also store non-parameter
causal-mask buffers (see their comments). `--check` re-runs the tool and compares with this file:

    python tests/tools/hf_param_counts.py --check
"""

HF_PARAM_COUNTS: dict[str, dict[str, int]] = {
    # openai-community/gpt2: 124,439,808 parameters (tied lm_head). The hub's safetensors metadata says
    # 137,022,720 because the checkpoint also stores 12 causal-mask buffers h.*.attn.bias of 1024x1024
    # (12,582,912 elements) that are not parameters: 137,022,720 - 12,582,912 = 124,439,808.
    "gpt2-124m": {
        "total": 124_439_808,
        "embedding": 39_383_808,
        "per_layer": 7_087_872,
        "layers": 85_054_464,
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
        "layers": 1_475_558_400,
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
        "layers": 173_961_510_912,
        "final_norm": 24_576,
        "lm_head": 0,
        "active": 174_604_259_328,
    },
    # meta-llama/Llama-2-7b-hf safetensors: 6,738,415,616 (model card: 7B).
    "llama-2-7b": {
        "total": 6_738_415_616,
        "embedding": 131_072_000,
        "per_layer": 202_383_360,
        "layers": 6_476_267_520,
        "final_norm": 4_096,
        "lm_head": 131_072_000,
        "active": 6_738_415_616,
    },
    # meta-llama/Llama-2-13b-hf safetensors: 13,015,864,320 (model card: 13B).
    "llama-2-13b": {
        "total": 13_015_864_320,
        "embedding": 163_840_000,
        "per_layer": 317_204_480,
        "layers": 12_688_179_200,
        "final_norm": 5_120,
        "lm_head": 163_840_000,
        "active": 13_015_864_320,
    },
    # meta-llama/Llama-2-70b-hf safetensors: 68,976,648,192 (model card: 70B; GQA with 8 kv heads).
    "llama-2-70b": {
        "total": 68_976_648_192,
        "embedding": 262_144_000,
        "per_layer": 855_654_400,
        "layers": 68_452_352_000,
        "final_norm": 8_192,
        "lm_head": 262_144_000,
        "active": 68_976_648_192,
    },
    # meta-llama/Llama-3.1-8B safetensors: 8,030,261,248.
    "llama-3.1-8b": {
        "total": 8_030_261_248,
        "embedding": 525_336_576,
        "per_layer": 218_112_000,
        "layers": 6_979_584_000,
        "final_norm": 4_096,
        "lm_head": 525_336_576,
        "active": 8_030_261_248,
    },
    # meta-llama/Llama-3.1-70B safetensors: 70,553,706,496.
    "llama-3.1-70b": {
        "total": 70_553_706_496,
        "embedding": 1_050_673_152,
        "per_layer": 855_654_400,
        "layers": 68_452_352_000,
        "final_norm": 8_192,
        "lm_head": 1_050_673_152,
        "active": 70_553_706_496,
    },
    # meta-llama/Llama-3.1-405B safetensors: 405,853,388,800.
    "llama-3.1-405b": {
        "total": 405_853_388_800,
        "embedding": 2_101_346_304,
        "per_layer": 3_187_703_808,
        "layers": 401_650_679_808,
        "final_norm": 16_384,
        "lm_head": 2_101_346_304,
        "active": 405_853_388_800,
    },
    # meta-llama/Llama-3.2-1B safetensors: 1,235,814,400 (model card: 1.23B; tied embeddings).
    "llama-3.2-1b": {
        "total": 1_235_814_400,
        "embedding": 262_668_288,
        "per_layer": 60_821_504,
        "layers": 973_144_064,
        "final_norm": 2_048,
        "lm_head": 0,
        "active": 1_235_814_400,
    },
    # meta-llama/Llama-3.2-3B safetensors: 3,212,749,824 (model card: 3.21B; tied embeddings).
    "llama-3.2-3b": {
        "total": 3_212_749_824,
        "embedding": 394_002_432,
        "per_layer": 100_669_440,
        "layers": 2_818_744_320,
        "final_norm": 3_072,
        "lm_head": 0,
        "active": 3_212_749_824,
    },
    # mistralai/Mistral-7B-v0.1 safetensors: 7,241,732,096.
    "mistral-7b": {
        "total": 7_241_732_096,
        "embedding": 131_072_000,
        "per_layer": 218_112_000,
        "layers": 6_979_584_000,
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
        "layers": 46_440_644_608,
        "final_norm": 4_096,
        "lm_head": 131_072_000,
        "active": 12_879_925_248,
    },
    # Qwen/Qwen2.5-7B safetensors: 7,615,616,512 (model card: 7.61B, 6.53B non-embedding).
    "qwen2.5-7b": {
        "total": 7_615_616_512,
        "embedding": 544_997_376,
        "per_layer": 233_057_792,
        "layers": 6_525_618_176,
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
        "layers": 70_214_778_880,
        "final_norm": 8_192,
        "lm_head": 1_245_708_288,
        "active": 72_706_203_648,
    },
    # google/gemma-2-9b safetensors: 9,241,705,984 (tied lm_head; head_dim 256 != 3584/16).
    "gemma-2-9b": {
        "total": 9_241_705_984,
        "embedding": 917_504_000,
        "per_layer": 198_195_200,
        "layers": 8_324_198_400,
        "final_norm": 3_584,
        "lm_head": 0,
        "active": 9_241_705_984,
    },
    # google/gemma-2-27b safetensors: 27,227,128,320 (tied lm_head; head_dim 128 != 4608/32).
    "gemma-2-27b": {
        "total": 27_227_128_320,
        "embedding": 1_179_648_000,
        "per_layer": 566_249_472,
        "layers": 26_047_475_712,
        "final_norm": 4_608,
        "lm_head": 0,
        "active": 27_227_128_320,
    },
    # Qwen/Qwen3-8B model card: 8.2B parameters (6.95B non-embedding).
    "qwen3-8b": {
        "total": 8_190_735_360,
        "embedding": 622_329_856,
        "per_layer": 192_946_432,
        "layers": 6_946_071_552,
        "final_norm": 4_096,
        "lm_head": 622_329_856,
        "active": 8_190_735_360,
    },
    # Qwen/Qwen3-32B model card: 32.8B parameters (31.2B non-embedding).
    "qwen3-32b": {
        "total": 32_762_123_264,
        "embedding": 777_912_320,
        "per_layer": 487_598_336,
        "layers": 31_206_293_504,
        "final_norm": 5_120,
        "lm_head": 777_912_320,
        "active": 32_762_123_264,
    },
    # Qwen/Qwen3-30B-A3B model card: 30.5B total, 3.3B activated (8 of 128 experts, no shared expert).
    "qwen3-30b-a3b": {
        "total": 30_532_122_624,
        "embedding": 311_164_928,
        "per_layer": 623_120_640,
        "layers": 29_909_790_720,
        "final_norm": 2_048,
        "lm_head": 311_164_928,
        "active": 3_353_032_704,
    },
    # Qwen/Qwen3-235B-A22B model card: 235B total, 22B activated.
    "qwen3-235b-a22b": {
        "total": 235_093_634_560,
        "embedding": 622_329_856,
        "per_layer": 2_487_755_008,
        "layers": 233_848_970_752,
        "final_norm": 4_096,
        "lm_head": 622_329_856,
        "active": 22_190_763_520,
    },
    # deepseek-ai/DeepSeek-V3: 671B total, 37B activated (paper and model card). The hub lists 685B
    # because the checkpoint also holds the 14B multi-token-prediction module (num_nextn_predict_layers 1),
    # which transformers does not build: 671,026,404,352 here. The router's e_score_correction_bias is a
    # buffer, not a parameter.
    "deepseek-v3": {
        "total": 671_026_404_352,
        "embedding": 926_679_040,
        "per_layer": 583_483_392,
        "layers": 669_173_039_104,
        "final_norm": 7_168,
        "lm_head": 926_679_040,
        "active": 37_552_282_624,
    },
    # deepseek-ai/DeepSeek-V3.2-Exp: DeepSeek-V3's shape with a lightning indexer in each of the 61 layers
    # (13,959,424 parameters a layer: wq_b, wk, k_norm, weights_proj); the card's 671B / 37B. transformers
    # builds no MTP module here either.
    "deepseek-v3.2": {
        "total": 671_877_929_216,
        "embedding": 926_679_040,
        "per_layer": 597_442_816,
        "layers": 670_024_563_968,
        "final_norm": 7_168,
        "lm_head": 926_679_040,
        "active": 38_403_807_488,
    },
    # deepseek-ai/DeepSeek-V2-Lite model card: 15.7B total, 2.4B activated; 2,661,150,208 here
    # counts the 0.42B of embedding + lm_head as activated (the card's figure leaves part of them out).
    "deepseek-v2-lite": {
        "total": 15_706_484_224,
        "embedding": 209_715_200,
        "per_layer": 81_007_104,
        "layers": 15_287_051_776,
        "final_norm": 2_048,
        "lm_head": 209_715_200,
        "active": 2_661_150_208,
    },
    # meta-llama/Llama-4-Scout-17B-16E: 17B activated, 109B total. The 109B includes the vision
    # encoder and projector of Llama4ForConditionalGeneration; the text decoder counted here is 107.77B.
    "llama-4-scout": {
        "total": 107_769_861_120,
        "embedding": 1_034_485_760,
        "per_layer": 2_202_101_760,
        "layers": 105_700_884_480,
        "final_norm": 5_120,
        "lm_head": 1_034_485_760,
        "active": 17_172_894_720,
    },
    # meta-llama/Llama-4-Maverick-17B-128E: 17B activated, 400B total (the card rounds; text
    # decoder only here, the vision tower adds about 0.9B).
    "llama-4-maverick": {
        "total": 400_711_848_960,
        "embedding": 1_034_485_760,
        "per_layer": 314_583_040,
        "layers": 398_642_872_320,
        "final_norm": 5_120,
        "lm_head": 1_034_485_760,
        "active": 17_184_691_200,
    },
    # google/gemma-3-27b-pt: 27B (hub safetensors 27.4B: the decoder's 27,009,346,304 and the SigLIP
    # vision tower and projector, 423,060,336, which AutoModelForCausalLM's Gemma3ForConditionalGeneration loads).
    "gemma-3-27b": {
        "total": 27_432_406_640,
        "embedding": 1_409_630_208,
        "per_layer": 412_898_560,
        "layers": 25_599_710_720,
        "final_norm": 5_376,
        "lm_head": 0,
        "active": 27_009_346_304,
        "vision": 423_060_336,
    },
    # microsoft/phi-4 model card: 14B parameters; 14,659,507,200 (14.7B) here.
    "phi-4": {
        "total": 14_659_507_200,
        "embedding": 513_802_240,
        "per_layer": 340_797_440,
        "layers": 13_631_897_600,
        "final_norm": 5_120,
        "lm_head": 513_802_240,
        "active": 14_659_507_200,
    },
    # allenai/OLMo-2-1124-13B model card: 13.7B parameters.
    "olmo-2-13b": {
        "total": 13_716_198_400,
        "embedding": 513_802_240,
        "per_layer": 317_214_720,
        "layers": 12_688_588_800,
        "final_norm": 5_120,
        "lm_head": 513_802_240,
        "active": 13_716_198_400,
    },
    # EleutherAI/pythia-6.9b README table: 6,857,302,016 parameters.
    "pythia-6.9b": {
        "total": 6_857_302_016,
        "embedding": 206_569_472,
        "per_layer": 201_379_840,
        "layers": 6_444_154_880,
        "final_norm": 8_192,
        "lm_head": 206_569_472,
        "active": 6_857_302_016,
    },
    # tiiuae/falcon-7b: 7B (6.92B; one shared key/value head, multi_query).
    "falcon-7b": {
        "total": 6_921_720_704,
        "embedding": 295_469_056,
        "per_layer": 207_070_080,
        "layers": 6_626_242_560,
        "final_norm": 9_088,
        "lm_head": 0,
        "active": 6_921_720_704,
    },
    # CohereForAI/c4ai-command-r-v01 model card: 35B parameters (tied embeddings).
    "command-r-35b": {
        "total": 34_980_831_232,
        "embedding": 2_097_152_000,
        "per_layer": 822_091_776,
        "layers": 32_883_671_040,
        "final_norm": 8_192,
        "lm_head": 0,
        "active": 34_980_831_232,
    },
    # bigcode/starcoder2-15b model card: 15B parameters; 15,957,889,024 (16.0B) here (untied
    # lm_head of 0.3B, biases on every linear).
    "starcoder2-15b": {
        "total": 15_957_889_024,
        "embedding": 301_989_888,
        "per_layer": 383_847_424,
        "layers": 15_353_896_960,
        "final_norm": 12_288,
        "lm_head": 301_989_888,
        "active": 15_957_889_024,
    },
    # openai/gpt-oss-20b: 20,914,757,184 parameters, the GGUF's general.parameter_count (Ollama's `show
    # gpt-oss:20b`) and the model card's 20.91B total (arXiv:2508.10925 Table 1); its 3.61B active exclude
    # the embedding: 4,187,440,704 - 579,133,440 = 3,608,307,264. The hub's safetensors size counts MXFP4
    # blocks, not parameters. Expert parameters include their biases (gate_up_proj_bias, down_proj_bias).
    "gpt-oss-20b": {
        "total": 20_914_757_184,
        "embedding": 579_133_440,
        "per_layer": 823_186_976,
        "layers": 19_756_487_424,
        "final_norm": 2_880,
        "lm_head": 579_133_440,
        "active": 4_187_440_704,
    },
    # openai/gpt-oss-120b: 116,829,156,672 (GGUF general.parameter_count; model card 116.83B total,
    # 5.13B active without the embedding: 5,711,982,912 - 579,133,440 = 5,132,849,472).
    "gpt-oss-120b": {
        "total": 116_829_156_672,
        "embedding": 579_133_440,
        "per_layer": 3_213_080_192,
        "layers": 115_670_886_912,
        "final_norm": 2_880,
        "lm_head": 579_133_440,
        "active": 5_711_982_912,
    },
    # THUDM/GLM-4-9B-0414: the hub shows 9.4B (9,400,279,040 here: q/k/v biases, four RMSNorms a layer,
    # untied lm_head).
    "glm-4-9b-0414": {
        "total": 9_400_279_040,
        "embedding": 620_756_992,
        "per_layer": 203_969_024,
        "layers": 8_158_760_960,
        "final_norm": 4_096,
        "lm_head": 620_756_992,
        "active": 9_400_279_040,
    },
    # zai-org/GLM-4.5-Air: the GLM-4.5 report's "106B total parameters, 12B active" (arXiv 2508.06471, Table 1).
    # Active here counts the embedding and lm_head (2 x 0.62B): 13.42B - 1.24B = 12.18B. The checkpoint's
    # multi-token-prediction layer (num_nextn_predict_layers 1) is not built by Glm4MoeForCausalLM.
    "glm-4.5-air": {
        "total": 106_852_245_504,
        "embedding": 620_756_992,
        "per_layer": 243_554_304,
        "layers": 105_610_727_424,
        "final_norm": 4_096,
        "lm_head": 620_756_992,
        "active": 13_424_123_904,
    },
    # ibm-granite/granite-3.3-8b-instruct: the hub's safetensors count, 8,170,864,640 (8.17B; tied lm_head).
    "granite-3.3-8b": {
        "total": 8_170_864_640,
        "embedding": 201_355_264,
        "per_layer": 199_237_632,
        "layers": 7_969_505_280,
        "final_norm": 4_096,
        "lm_head": 0,
        "active": 8_170_864_640,
    },
    # CohereLabs/c4ai-command-r7b-12-2024: the hub shows 8.03B (8,028,033,024 here; tied embedding of
    # 256,000 x 4,096); the card's "7B" rounds it down.
    "command-r7b": {
        "total": 8_028_033_024,
        "embedding": 1_048_576_000,
        "per_layer": 218_107_904,
        "layers": 6_979_452_928,
        "final_norm": 4_096,
        "lm_head": 0,
        "active": 8_028_033_024,
    },
}
