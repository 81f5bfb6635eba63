"""GPU memory per rank: bytes per parameter by precision and recipe, model states, activations, recompute, overhead."""
