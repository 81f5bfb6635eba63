"""Launch configurations from a plan: the named stack's own configuration (a DeepSpeed JSON,
Megatron-LM arguments, a torchtitan TOML) with the keys that stack documents (docs/stacks.md)."""
