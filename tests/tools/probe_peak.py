"""Peak memory of one forward + backward with torch's MemTracker (tools/saved_tensors_probe.py)."""

from __future__ import annotations

import torch

from .probe_saved import _enable_gc, build_model, label_vocab


def measure_peak(model_type: str, config_kwargs: dict, batch: int, seq_len: int,
                 dtype=torch.float32, attn_implementation: str = "sdpa",
                 gradient_checkpointing: bool | str = False, seed: int = 0,
                 optimizer_step: bool = False, **model_kwargs) -> dict:
    """Peak memory of one forward+backward (optionally an AdamW step) with MemTracker.

    Returns {"peak": {category: bytes}, "post_forward_activation": bytes, ...}.  On CPU the
    byte counts are exact storage sizes (MemTracker only rounds for CUDA).
    """
    from torch.distributed._tools.mem_tracker import MemTracker

    model = build_model(model_type, config_kwargs, dtype, attn_implementation, seed, **model_kwargs)
    _enable_gc(model, gradient_checkpointing)
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, label_vocab(model), (batch, seq_len), generator=g)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4) if optimizer_step else None
    mt = MemTracker()
    mt.track_external(model, *( [opt] if opt else []))
    with mt:
        out = model(input_ids=ids, labels=ids, use_cache=False)
        out.loss.backward()
        if opt:
            opt.step()
            opt.zero_grad()

    def _flat(snap):
        d = next(iter(snap.values())) if snap else {}
        return {getattr(k, "value", str(k)): int(v) for k, v in d.items()}

    res = {"peak": _flat(mt.get_tracker_snapshot("peak"))}
    mods = mt.memory_tracking
    root = type(model).__name__
    per_mod = {}
    for mod, stats in mods.items():
        name = getattr(stats, "mod_fqn", str(mod))
        snaps = stats.snapshots
        entry = {}
        for state, lst in snaps.items():
            if lst:
                entry[getattr(state, "value", str(state))] = _flat(lst[-1])
        per_mod[name] = entry
    res["modules"] = per_mod
    rootstats = per_mod.get(root, {})
    res["root_post_forward"] = rootstats.get("Post-Forward")
    res["root_peak_forward"] = rootstats.get("Peak-Forward")
    res["root_peak_backward"] = rootstats.get("Peak-Backward")
    return res


def measured_activation_peak(model_type: str, kwargs: dict, b: int, s: int, attn: str, checkpointing: bool) -> int:
    """Peak bytes above parameters and (pre-allocated) gradients during one forward + backward."""
    from torch.distributed._tools.mem_tracker import MemTracker

    model = build_model(model_type, kwargs, torch.bfloat16, attn, 0)
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ids = torch.randint(0, label_vocab(model), (b, s), generator=torch.Generator().manual_seed(1))
    out = model(input_ids=ids, labels=ids, use_cache=False)
    out.loss.backward()  # allocate .grad once, as DeepSpeed/FSDP keep gradient buffers allocated
    del out
    tracker = MemTracker()
    tracker.track_external(model)
    with tracker:
        out = model(input_ids=ids, labels=ids, use_cache=False)
        out.loss.backward()
    peak = {getattr(k, "value", str(k)): v for k, v in next(iter(tracker.get_tracker_snapshot("peak").values())).items()}
    untracked_input_ids = 8 * b * s  # created before tracking started
    return peak["Total"] - peak.get("Parameter", 0) - peak.get("Gradient", 0) - peak.get("Buffer", 0) + untracked_input_ids
