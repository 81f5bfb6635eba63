"""Launch configurations from a plan: the named stack's own configuration (an HF Trainer/accelerate/PEFT
JSON, a DeepSpeed JSON, Megatron-LM arguments, a torchtitan TOML, torchtune recipe overrides, litgpt
arguments, an Unsloth JSON) with the keys that stack documents (docs/stacks.md, launch/configs.py)."""
