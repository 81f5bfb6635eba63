"""The saved-tensors probe itself (tools/saved_tensors_probe.py): build a tiny Hugging Face causal
LM, run one training-mode forward pass with labels under saved_tensors_hooks, and attribute every
tensor autograd saves to its module, torch function, autograd node and storage."""

from __future__ import annotations

import re
import sys
from collections import defaultdict

import torch

from .probe_configs import _dtype
from .probe_results import ProbeResult, RegionSummary, SavedEntry

# This module's frames (and the probe's other files) are skipped when naming the source line.
_PROBE_FILES = ("saved_tensors_probe.py", "probe_saved.py", "probe_peak.py")
_LAYER_RE = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer)\.(\d+)$")


def build_model(model_type: str, config_kwargs: dict, dtype=torch.float32,
                attn_implementation: str = "sdpa", seed: int = 0, **model_kwargs):
    """model_kwargs go to ``from_config`` (e.g. ``experts_implementation="eager"``)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(seed)
    cfg = AutoConfig.for_model(model_type, **config_kwargs)
    try:
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation=attn_implementation,
                                                 dtype=_dtype(dtype), **model_kwargs)
    except ValueError:  # a decoder only a multimodal wrapper builds (Mistral 4): its own <Name>ForCausalLM
        import transformers

        causal_lm = getattr(transformers, type(cfg).__name__.removesuffix("Config") + "ForCausalLM")
        model = causal_lm._from_config(cfg, attn_implementation=attn_implementation, dtype=_dtype(dtype), **model_kwargs)
    model.train()
    return model


def _enable_gc(model, gradient_checkpointing):
    if not gradient_checkpointing:
        return
    reentrant = gradient_checkpointing == "reentrant"
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    if hasattr(model.config, "use_cache"):
        model.config.use_cache = False


def _storage_key(t: torch.Tensor) -> tuple[int, int]:
    try:
        st = t.untyped_storage()
        return st.data_ptr(), st.nbytes()
    except Exception:  # e.g. tensor subclasses without storage
        return id(t), t.numel() * t.element_size()


def _src_lines() -> tuple[str | None, str | None]:
    """Innermost transformers and torch python frames (skip this module)."""
    f = sys._getframe(2)
    tf = th = None
    while f is not None and (tf is None or th is None):
        fn = f.f_code.co_filename
        if fn.endswith(_PROBE_FILES):
            pass
        elif tf is None and "/transformers/" in fn:
            tf = f"{fn.split('/transformers/')[-1]}:{f.f_lineno} {f.f_code.co_name}"
        elif th is None and "/torch/" in fn and "/torch/overrides" not in fn \
                and "/torch/utils/_device" not in fn and "/torch/nn/modules/module.py" not in fn:
            th = f"{fn.split('/torch/')[-1]}:{f.f_lineno} {f.f_code.co_name}"
        f = f.f_back
    return tf, th


class _Packed:
    __slots__ = ("idx", "tensor")

    def __init__(self, idx, tensor):
        self.idx = idx
        self.tensor = tensor


def _node_name(fn) -> str | None:
    return None if fn is None else type(fn).__name__ if not hasattr(fn, "name") else fn.name()


def label_vocab(model) -> int:
    """Token ids the probes draw, which are also the labels: below a pruned output head's rows (Apertus 1.5's
    output_vocab_size: "other values must be within the physical LM-head range")."""
    text = model.config.get_text_config()
    return getattr(text, "output_vocab_size", None) or text.vocab_size


def probe(model_type: str, config_kwargs: dict, batch: int, seq_len: int,
          dtype=torch.float32, attn_implementation: str = "sdpa",
          gradient_checkpointing: bool | str = False, autocast: str | None = None,
          seed: int = 0, model=None, use_cache: bool | None = False, **model_kwargs) -> ProbeResult:
    """Record every tensor saved for backward by one forward pass (with labels).

    gradient_checkpointing: False | True (== non-reentrant) | "non_reentrant" | "reentrant".
    autocast: None or "bf16"/"fp16" (CPU autocast around the forward; weights stay in ``dtype``).
    use_cache: passed to the forward. Default False; None = model default (HF configs default to
        True, and then in training without checkpointing the returned DynamicCache keeps K/V alive).
    model_kwargs: passed to ``from_config`` (e.g. ``experts_implementation="eager"``).

    Under non-reentrant checkpointing the layer inputs are saved by ``torch.utils.checkpoint``
    itself (no autograd node); they are reported with ``node="checkpoint.saved_inputs"``.
    Note: the graph walk reads ``_saved_*`` attributes, which makes non-reentrant checkpoint
    recompute the checkpointed layers once (harmless, only costs time).
    """
    from torch.overrides import TorchFunctionMode

    dtype = _dtype(dtype)
    if model is None:
        model = build_model(model_type, config_kwargs, dtype, attn_implementation, seed, **model_kwargs)
    _enable_gc(model, gradient_checkpointing)
    model.train()

    param_storages = {}
    for n, p in list(model.named_parameters()) + list(model.named_buffers()):
        param_storages[p.untyped_storage().data_ptr()] = n
    param_tensors = {id(p): n for n, p in model.named_parameters()}

    names = {m: n for n, m in model.named_modules()}
    stack: list[str] = []
    handles = []

    def pre(mod, args):
        stack.append(names.get(mod, "?"))

    def post(mod, args, out):
        if stack:
            stack.pop()

    for m in names:
        handles.append(m.register_forward_pre_hook(pre))
        handles.append(m.register_forward_hook(post, always_call=True))

    func_stack: list[str] = []

    class _FuncMode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            func_stack.append(getattr(func, "__qualname__", None) or getattr(func, "__name__", str(func)))
            try:
                return func(*args, **(kwargs or {}))
            finally:
                func_stack.pop()

    raw: list[dict] = []
    packed_objs: list[_Packed] = []

    def pack(t):
        mod_stack = list(stack)
        layer = None
        layer_name = None
        for name in reversed(mod_stack):
            m = _LAYER_RE.search(name)
            if m:
                layer, layer_name = int(m.group(1)), name
                break
        inner = mod_stack[-1] if mod_stack else ""
        if layer is not None:
            region = f"layer.{layer}"
            sub = inner[len(layer_name) + 1:] if inner.startswith(layer_name + ".") else (
                "" if inner == layer_name else inner)
        else:
            nonroot = [n for n in mod_stack if n]
            if not nonroot:
                region = "loss"
            else:
                # the top-level base model (e.g. "model"/"transformer") alone -> its own region
                region = nonroot[-1]
            sub = inner
        key, nbytes = _storage_key(t)
        tf, th = _src_lines()
        kind = "activation"
        gf = t.grad_fn
        # autocast weight copy: (views of) ToCopy(parameter) -> kept alive for backward
        node = gf
        try:
            for _ in range(6):
                if node is None:
                    break
                nm = _node_name(node)
                if nm.startswith("ToCopyBackward"):
                    src = node.next_functions[0][0]
                    if src is not None and hasattr(src, "variable") and id(src.variable) in param_tensors:
                        kind = "autocast_weight_copy"
                    break
                if not nm.startswith(("TBackward", "ViewBackward", "TransposeBackward", "PermuteBackward",
                                      "UnsqueezeBackward", "ExpandBackward", "SelectBackward")):
                    break
                node = node.next_functions[0][0]
        except Exception:
            pass
        raw.append(dict(
            region=region, layer=layer, module=inner, submodule=sub,
            torch_func=func_stack[-1] if func_stack else None,
            producer=_node_name(gf), src=tf, torch_src=th,
            shape=tuple(t.shape), stride=tuple(t.stride()) if t.layout == torch.strided else (),
            dtype=str(t.dtype).replace("torch.", ""), numel=t.numel(),
            view_bytes=t.numel() * t.element_size(), storage=key, storage_bytes=nbytes,
            kind=kind, is_param=key in param_storages and nbytes > 0,
        ))
        p = _Packed(len(raw) - 1, t)
        packed_objs.append(p)
        return p

    walk_state = {"node": None, "attr": None}
    node_of: dict[int, tuple[str, str]] = {}

    def unpack(p):
        if isinstance(p, _Packed):
            if raw[p.idx]["torch_src"] and "utils/checkpoint.py" in raw[p.idx]["torch_src"]:
                node_of.setdefault(p.idx, ("checkpoint.saved_inputs", None))
            elif walk_state["node"] is not None and p.idx not in node_of:
                node_of[p.idx] = (walk_state["node"], walk_state["attr"])
            return p.tensor
        return p

    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, label_vocab(model), (batch, seq_len), generator=g)

    ac = (torch.autocast("cpu", dtype=_dtype(autocast)) if autocast
          else torch.autocast("cpu", enabled=False))
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack), _FuncMode(), ac:
            fwd_kwargs = {} if use_cache is None else {"use_cache": use_cache}
            out = model(input_ids=ids, labels=ids, **fwd_kwargs)
    finally:
        for h in handles:
            h.remove()
    loss = out.loss

    # walk the autograd graph to name the node/attribute holding each saved tensor
    seen = set()
    todo = [loss.grad_fn]
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        nname = _node_name(fn)
        attrs = [a for a in dir(fn) if a.startswith("_saved_")]
        for a in attrs:
            walk_state["node"], walk_state["attr"] = nname, a
            try:
                getattr(fn, a)
            except Exception:
                pass
        if hasattr(fn, "saved_tensors"):
            walk_state["node"], walk_state["attr"] = nname, "saved_tensors"
            try:
                _ = fn.saved_tensors  # reading it runs the unpack hook, which records the node
            except Exception:
                pass
        walk_state["node"] = None
        for nxt, _ in fn.next_functions:
            if nxt is not None:
                todo.append(nxt)

    entries, excluded = [], []
    for i, r in enumerate(raw):
        is_param = r.pop("is_param")
        node, attr = node_of.get(i, (None, None))
        if node is None and r["torch_src"] and "utils/checkpoint.py" in r["torch_src"]:
            node = "checkpoint.saved_inputs"
        e = SavedEntry(idx=i, node=node, attr=attr, **r)
        (excluded if is_param else entries).append(e)

    by_storage = defaultdict(list)
    for e in entries:
        by_storage[e.storage].append(e)
    for group in by_storage.values():
        if len(group) > 1:
            for e in group:
                e.shared_with = [o.idx for o in group if o.idx != e.idx]

    regions: dict[str, RegionSummary] = {}
    reg_storages = defaultdict(dict)
    storage_regions = defaultdict(set)
    counts = defaultdict(int)
    for e in entries:
        reg_storages[e.region][e.storage] = e.storage_bytes
        storage_regions[e.storage].add(e.region)
        counts[e.region] += 1
    for reg, sts in reg_storages.items():
        uniq = sum(sts.values())
        excl = sum(b for k, b in sts.items() if len(storage_regions[k]) == 1)
        regions[reg] = RegionSummary(reg, uniq, excl, uniq - excl, counts[reg])
    total = sum(next(iter(g)).storage_bytes for g in by_storage.values())

    saved_keys = set(by_storage)
    held = {"logits": 0, "cache": 0}
    seen_h = set()

    def _hold(kind, t):
        if torch.is_tensor(t):
            k, nb = _storage_key(t)
            if k not in saved_keys and k not in seen_h and k not in param_storages:
                seen_h.add(k)
                held[kind] += nb

    _hold("logits", getattr(out, "logits", None))
    cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
    for lyr in getattr(cache, "layers", []) or []:
        _hold("cache", getattr(lyr, "keys", None))
        _hold("cache", getattr(lyr, "values", None))

    cfg = model.config.to_dict()
    return ProbeResult(
        model_type=model_type, config_kwargs=dict(config_kwargs), batch=batch, seq_len=seq_len,
        dtype=str(dtype).replace("torch.", ""), attn_implementation=attn_implementation,
        gradient_checkpointing=gradient_checkpointing, autocast=autocast,
        entries=entries, excluded_param_entries=excluded, regions=regions,
        total_unique_bytes=total, config=cfg, loss=float(loss.detach().float()), output_held=held,
    )
