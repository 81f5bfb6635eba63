"""What an architecture holds: parameters per module, LoRA adapters, and how layers split across pipeline stages."""
