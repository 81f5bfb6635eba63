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

The probe is split by concern: probe_configs.py (the tiny configs), probe_results.py
(what is recorded), probe_saved.py (``probe``) and probe_peak.py (``measure_peak``);
this module re-exports them and holds the text report and the command line.
Only optional tests and developer scripts import it; importing it has no side effects.

Command line (from the repository root): ``python -m tests.tools.saved_tensors_probe llama
--dtype bf16 --attn sdpa -b 2 -s 64`` prints the tables.
"""

from __future__ import annotations

from .probe_configs import SMALL_CONFIGS, _dtype
from .probe_peak import measure_peak
from .probe_results import ProbeResult, RegionSummary, SavedEntry
from .probe_saved import build_model, probe

__all__ = ["SMALL_CONFIGS", "ProbeResult", "RegionSummary", "SavedEntry", "build_model", "format_result", "main",
           "measure_peak", "probe"]


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
                f"{f' (dup #{first[e.storage]})' if dup else ''}"
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
