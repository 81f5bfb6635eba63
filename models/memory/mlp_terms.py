"""What a decoder layer's MLP keeps for backward: a dense MLP by activation kind, or a MoE block (its router, routed
experts and shared expert), with no recompute; models/memory/activation_terms.py layer_terms adds it to the layer's
attention and norms (the Term units and conventions are that module's)."""

from __future__ import annotations

from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Kernels
from vramplan.models.memory.saved_tensors import BOOL, FP32, INT64, Shape, Term


def _dense_mlp(arch: Architecture, kernels: Kernels, x: Shape, f: int, name: str = "mlp") -> list[Term]:
    t, e = x.t, x.e
    if arch.mlp_kind in ("gelu", "gelu_function") or (arch.mlp_kind == "gelu_new" and kernels == "fused"):
        return [Term(f"{name}.gelu_input", e * t * f), Term(f"{name}.fc2_input", e * t * f)]  # act input, down input
    if arch.mlp_kind == "gelu_new":  # x (pow input), tanh output, 1 + tanh, 0.5 * x; then c_proj's input
        return [Term(f"{name}.gelu_new_intermediates", 4 * e * t * f), Term(f"{name}.c_proj_input", e * t * f)]
    if arch.mlp_kind == "xielu":
        # transformers activations.py XIELUActivation._xielu_python (the CUDA kernel is an optional git install):
        # where(x > 0, alpha_p x x + beta x, (expm1(min(x, eps)) - x) alpha_n + beta x) keeps x (up_proj's output,
        # which min and both products read), alpha_p x, expm1's result, expm1(...) - x and the boolean condition;
        # down_proj keeps the result (measured: test_saved_tensors_families.py)
        return [Term(f"{name}.xielu_saved", 4 * e * t * f), Term(f"{name}.xielu_condition", BOOL * t * f),
                Term(f"{name}.down_input", e * t * f)]
    if arch.mlp_kind == "relu":  # OPT: relu keeps its output, which fc2 keeps as its input (one tensor)
        return [Term(f"{name}.relu_output", e * t * f)]
    if arch.mlp_kind == "relu2":
        # transformers ReLUSquaredActivation: relu keeps its output, which square (pow 2) keeps as its
        # input (one tensor); down_proj keeps the square (measured: test_saved_tensors_families.py)
        return [Term(f"{name}.relu_output", e * t * f), Term(f"{name}.down_input", e * t * f)]
    if kernels == "fused":  # one [T, 2f] gate/up GEMM output, the down input
        return [Term(f"{name}.gate_up_output", 2 * e * t * f), Term(f"{name}.down_input", e * t * f)]
    # act input (gate), up output, act output, product (= down input)
    return [Term(f"{name}.gate_up_act_product", 4 * e * t * f)]


def mlp_terms(arch: Architecture, kernels: Kernels, x: Shape, moe: bool, width: int | None = None) -> list[Term]:
    """What one layer's MLP keeps for backward: a dense MLP of the dense layers' width (or `width`: Gemma 4's double-wide
    KV-shared layers), or a MoE block."""
    if moe:
        return _moe(arch, kernels, x)
    return _dense_mlp(arch, kernels, x, width or arch.dense_intermediate_size or arch.intermediate_size)


def _moe(arch: Architecture, kernels: Kernels, x: Shape) -> list[Term]:
    t, e, h, f = x.t, x.e, arch.hidden_size, arch.intermediate_size
    n_experts, top_k = arch.num_experts, arch.experts_per_token
    tk = t * top_k
    router = [Term("moe.router_softmax_fp32", FP32 * t * n_experts),
              Term("moe.routing", INT64 * tk + FP32 * t + FP32 * tk)]  # top-k indices, sum, weights
    weights = FP32  # the routing weights the expert outputs are scaled by
    if arch.moe_beside_mlp:
        # Gemma4TextRouter: top_k_weights /= sum in place keeps the weights before it too, and * per_expert_scale[index]
        # keeps the gathered 16-bit scales (measured)
        router.append(Term("moe.expert_scales", FP32 * tk + e * tk))
    if arch.router_topk_softmax:  # gpt-oss: top-k indices, softmax over the k logits in the activation dtype
        router, weights = [Term("moe.routing", INT64 * tk + e * tk)], e
    if arch.router_fp32 and kernels == "eager":  # DeepSeek's gate saves the fp32 copy of its input
        router.append(Term("moe.router_input_fp32", FP32 * t * h))
    if arch.moe_all_experts and kernels == "eager":
        # HF Llama 4: top-k indices, sigmoid scores (fp32), the E-times repeated tokens and their
        # score-scaled copy (the experts' bmm input), gate_up, act, product for all E x T rows (measured)
        et = n_experts * t
        router = [Term("moe.routing", INT64 * tk + FP32 * t * n_experts + e * et)]
        experts = [Term("moe.repeated_input", 2 * e * et * h), Term("moe.gate_up_act_product", 4 * e * et * f)]
    elif kernels == "fused":  # permuted tokens, fc1 output, fc2 input, unpermute input
        experts = [Term("moe.permuted_input", e * tk * h), Term("moe.fc1_output", 2 * e * tk * f),
                   Term("moe.fc2_input", e * tk * f), Term("moe.expert_output", e * tk * h)]
    else:  # transformers grouped_mm experts: gathered tokens, gate_up, act, product, down output, indices
        # clamped GLU (gpt-oss _apply_gate): the gate_up output (kept by both clamps), sigmoid, clamped
        # gate, their product, up + 1, the down input: 7 f-wide tensors where SwiGLU keeps 4 (measured)
        ee = x.expert_e or e  # fp32 experts under autocast run in fp32 (Shape.expert_e)
        glu = Term("moe.clamped_glu", 7 * ee * tk * f) if arch.clamped_swiglu else Term("moe.gate_up_act_product", 4 * ee * tk * f)
        # three int64 gathers (a fourth when the experts' biases are gathered too), the routing weights
        indices = (3 + arch.moe_bias) * INT64 * tk + weights * tk + FP32 * n_experts
        experts = [Term("moe.gathered_input", ee * tk * h), glu, Term("moe.expert_output", ee * tk * h),
                   Term("moe.indices", indices)]
    shared = []
    if arch.shared_expert_intermediate_size:  # reads the router's input (no extra linear input)
        shared = _dense_mlp(arch, kernels, x, arch.shared_expert_intermediate_size, "moe.shared_expert")
    if arch.shared_expert_gate:
        # Qwen2-MoE: sigmoid(shared_expert_gate(x)) * shared_expert(x) keeps the expert's output and the
        # sigmoid's (t x 1), which its backward reads too (measured)
        shared.append(Term("moe.shared_expert_gated", e * t * h + e * t))
    return router + experts + shared
