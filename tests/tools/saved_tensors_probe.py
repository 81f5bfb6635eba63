"""Ground-truth probe: which activation tensors autograd keeps for backward.

Builds a small Hugging Face causal LM from a config (no hub access needed), runs
ONE training-mode forward pass with labels (so the loss is computed exactly as
the HF model does) under ``torch.autograd.graph.saved_tensors_hooks`` and
records every tensor autograd saves for backward:

* attribution to the module that was executing (forward pre/post hooks keep a
  module-name stack) -> region ``layer.<i>`` for decoder layers
  (``model.layers.<i>``, ``transformer.h.<i>``), otherwise the innermost
  non-root module (``model.embed_tokens``, ``model.norm``, ``lm_head`` ...) or
  ``loss`` for code that runs in the root ``*ForCausalLM.forward`` itself;
* the torch-level function that was executing (a ``TorchFunctionMode``), the
  autograd node that holds the tensor and its attribute name (found by walking
  ``loss.grad_fn`` and reading ``_saved_*`` attributes / ``saved_tensors``),
  the node that produced the tensor (``tensor.grad_fn``) and the innermost
  transformers / torch source line;
* storage accounting: every storage is counted once (keyed by
  ``untyped_storage().data_ptr()``, bytes = ``untyped_storage().nbytes()``);
  storages of parameters and buffers are excluded (reported separately).

``measure_peak`` runs a full forward+backward under
``torch.distributed._tools.mem_tracker.MemTracker`` (works on CPU; CPU storage
bytes are exact, no allocator rounding).

Only an optional test and developer scripts import this module; importing it
has no side effects.  Command line: ``python -m tests.tools.saved_tensors_probe
llama --dtype bf16 --attn sdpa -b 2 -s 64`` prints the tables.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import torch

_TINY = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=176, vocab_size=1000)

# Default small configs used by the vramplan probe report (the newer families: tests/test_arch_saved_tensors.py).
SMALL_CONFIGS: dict[str, tuple[str, dict]] = {
    "gpt2": ("gpt2", dict(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=256)),
    "llama": ("llama", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                            num_key_value_heads=2, intermediate_size=176, vocab_size=1000)),
    "llama_mha": ("llama", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                num_key_value_heads=4, intermediate_size=176, vocab_size=1000)),
    "mistral": ("mistral", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                num_key_value_heads=2, intermediate_size=176, vocab_size=1000,
                                sliding_window=None)),
    "qwen2": ("qwen2", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                            num_key_value_heads=2, intermediate_size=176, vocab_size=1000)),
    "gemma2": ("gemma2", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                              num_key_value_heads=2, head_dim=32, intermediate_size=176,
                              vocab_size=1000)),
    "mixtral": ("mixtral", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                num_key_value_heads=2, intermediate_size=176, vocab_size=1000,
                                num_local_experts=4, num_experts_per_tok=2)),
    **{name: (model_type, dict(kwargs)) for name, (model_type, kwargs) in (
        ("qwen3", ("qwen3", dict(_TINY, head_dim=16))),
        ("qwen3_moe", ("qwen3_moe", dict(_TINY, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                         moe_intermediate_size=48))),
        ("gemma3", ("gemma3_text", dict(_TINY, head_dim=32, sliding_window=16, layer_types=None,
                                        sliding_window_pattern=2))),
        ("phi3", ("phi3", dict(_TINY, pad_token_id=0))),
        ("olmo2", ("olmo2", dict(_TINY))),
        ("deepseek_v3", ("deepseek_v3", dict(_TINY, num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=24,
                                             qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                                             n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
                                             moe_intermediate_size=48, first_k_dense_replace=1, n_group=1,
                                             topk_group=1))),
        ("deepseek_v2", ("deepseek_v2", dict(_TINY, num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=24,
                                             qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                                             n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=2,
                                             moe_intermediate_size=48, first_k_dense_replace=1))),
        ("llama4", ("llama4_text", dict(_TINY, num_hidden_layers=4, head_dim=16, intermediate_size=48,
                                        intermediate_size_mlp=176, num_local_experts=4, num_experts_per_tok=1,
                                        interleave_moe_layer_step=2, no_rope_layer_interval=2,
                                        attention_chunk_size=16))),
        ("gpt_neox", ("gpt_neox", dict(_TINY, num_key_value_heads=None))),
        ("falcon", ("falcon", dict(_TINY, num_key_value_heads=None, ffn_hidden_size=176, multi_query=True))),
        ("falcon_new", ("falcon", dict(_TINY, num_key_value_heads=None, ffn_hidden_size=176,
                                       new_decoder_architecture=True, num_kv_heads=2))),
        ("cohere", ("cohere", dict(_TINY))),
        ("starcoder2", ("starcoder2", dict(_TINY, residual_dropout=0.0, embedding_dropout=0.0))),
    )},
}

_LAYER_RE = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer)\.(\d+)$")
_DTYPES = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16,
           "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16}


@dataclass
class SavedEntry:
    idx: int
    region: str                 # "layer.0", "model.embed_tokens", "lm_head", "loss", ...
    layer: int | None
    module: str                 # innermost module (full name)
    submodule: str              # innermost module relative to the layer/region
    torch_func: str | None      # innermost torch-level function executing when saved
    node: str | None            # autograd node holding it (e.g. "MmBackward0")
    attr: str | None            # attribute on that node (e.g. "_saved_self")
    producer: str | None        # tensor.grad_fn name (what produced the saved tensor)
    src: str | None             # innermost transformers source line ("file:line fn")
    torch_src: str | None       # innermost torch python source line
    shape: tuple
    stride: tuple
    dtype: str
    numel: int
    view_bytes: int             # numel * element_size
    storage: int                # storage key (data_ptr)
    storage_bytes: int
    kind: str = "activation"    # "activation" | "autocast_weight_copy"
    shared_with: list = field(default_factory=list)  # idx of other entries on this storage

    def row(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class RegionSummary:
    region: str
    unique_bytes: int           # each storage saved by this region counted once
    exclusive_bytes: int        # storages saved ONLY by this region
    shared_bytes: int           # storages this region saves that other regions also save
    n_entries: int


@dataclass
class ProbeResult:
    model_type: str
    config_kwargs: dict
    batch: int
    seq_len: int
    dtype: str
    attn_implementation: str
    gradient_checkpointing: Any
    autocast: str | None
    entries: list[SavedEntry]
    excluded_param_entries: list[SavedEntry]
    regions: dict[str, RegionSummary]
    total_unique_bytes: int
    config: dict
    loss: float
    # storages held by the model output (logits, KV cache if use_cache) that are NOT saved tensors:
    # {"logits": bytes, "cache": bytes}
    output_held: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    # --- convenience -------------------------------------------------
    @property
    def layer_indices(self) -> list[int]:
        return sorted({e.layer for e in self.entries if e.layer is not None})

    def layer_entries(self, i: int) -> list[SavedEntry]:
        return [e for e in self.entries if e.layer == i]

    def layer_bytes(self, i: int, exclusive: bool = True) -> int:
        r = self.regions[f"layer.{i}"]
        return r.exclusive_bytes if exclusive else r.unique_bytes

    def cross_region_storages(self) -> list[tuple[int, int, list[str]]]:
        """(storage, bytes, regions) for storages saved by more than one region."""
        by = defaultdict(set)
        nb = {}
        for e in self.entries:
            by[e.storage].add(e.region)
            nb[e.storage] = e.storage_bytes
        return [(k, nb[k], sorted(v)) for k, v in by.items() if len(v) > 1]


# ---------------------------------------------------------------------------
def _dtype(d) -> torch.dtype:
    return _DTYPES[d] if isinstance(d, str) else d


def build_model(model_type: str, config_kwargs: dict, dtype=torch.float32,
                attn_implementation: str = "sdpa", seed: int = 0, **model_kwargs):
    """model_kwargs go to ``from_config`` (e.g. ``experts_implementation="eager"``)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(seed)
    cfg = AutoConfig.for_model(model_type, **config_kwargs)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation=attn_implementation,
                                             dtype=_dtype(dtype), **model_kwargs)
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
        if fn.endswith("saved_tensors_probe.py"):
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
    vocab = model.config.get_text_config().vocab_size
    ids = torch.randint(0, vocab, (batch, seq_len), generator=g)

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
                fn.saved_tensors
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
    vocab = model.config.get_text_config().vocab_size
    ids = torch.randint(0, vocab, (batch, seq_len), generator=g)
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


# ---------------------------------------------------------------------------
def format_result(res: ProbeResult, layers: list[int] | None = None, other_regions: bool = True) -> str:
    lines = []
    hdr = (f"{res.model_type} dtype={res.dtype} attn={res.attn_implementation} b={res.batch} "
           f"s={res.seq_len} gc={res.gradient_checkpointing} autocast={res.autocast}")
    lines.append(hdr)
    lines.append(f"total unique saved bytes (params excluded): {res.total_unique_bytes}; "
                 f"held by output, not saved: {res.output_held}")
    for reg, r in sorted(res.regions.items()):
        lines.append(f"  region {reg:28s} unique={r.unique_bytes:>10d} exclusive={r.exclusive_bytes:>10d} "
                     f"shared={r.shared_bytes:>8d} n={r.n_entries}")
    for k, nb, regs in res.cross_region_storages():
        ex = next(e for e in res.entries if e.storage == k)
        lines.append(f"  cross-region storage {nb} B {ex.dtype}{list(ex.shape)} prod={ex.producer} in {regs}")
    show = layers if layers is not None else res.layer_indices[:1]
    regs = [f"layer.{i}" for i in show]
    if other_regions:
        regs += sorted(r for r in res.regions if not r.startswith("layer."))
    for reg in regs:
        lines.append(f"--- {reg}")
        first = {}
        for e in res.entries:
            if e.region != reg:
                continue
            dup = e.storage in first
            first.setdefault(e.storage, e.idx)
            lines.append(
                f"  #{e.idx:<4d} {e.submodule or '-':24s} {str(e.torch_func):32s} {str(e.node)}.{e.attr} "
                f"{e.dtype}{list(e.shape)} view={e.view_bytes} st={e.storage_bytes}"
                f"{' (dup #%d)' % first[e.storage] if dup else ''}"
                f"{' shared' + str(e.shared_with) if e.shared_with else ''} prod={e.producer}"
                f"{' [' + e.kind + ']' if e.kind != 'activation' else ''}")
    return "\n".join(lines)


def main(argv=None):
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("name", choices=sorted(SMALL_CONFIGS))
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--attn", default="sdpa")
    ap.add_argument("-b", type=int, default=2)
    ap.add_argument("-s", type=int, default=64)
    ap.add_argument("--gc", default="", choices=["", "non_reentrant", "reentrant"])
    ap.add_argument("--autocast", default=None)
    ap.add_argument("--peak", action="store_true")
    a = ap.parse_args(argv)
    mt, kw = SMALL_CONFIGS[a.name]
    res = probe(mt, kw, a.b, a.s, _dtype(a.dtype), a.attn, a.gc or False, a.autocast)
    print(format_result(res))
    if a.peak:
        pk = measure_peak(mt, kw, a.b, a.s, _dtype(a.dtype), a.attn, a.gc or False)
        print("peak:", pk["peak"])
        print("root post-forward:", pk["root_post_forward"])


if __name__ == "__main__":
    main()
