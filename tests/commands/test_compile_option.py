"""`--compile/--no-compile` on estimate and solve, and the refusal of a stack without torch.compile."""

from __future__ import annotations

import json

from helpers.cli import assert_error_line, invoke

ESTIMATE = ["estimate", "--model", "llama-3.1-8b", "--gpu", "h200-sxm-141gb", "--num-gpus", "8", "--zero", "3",
            "--seq-len", "8192", "--micro-batch", "2", "--stack", "torchtitan", "--format", "json"]


def _estimate(*options: str) -> dict:
    result = invoke(*ESTIMATE, *options)
    assert result.exit_code == 0, (result.exit_code, result.stderr)
    return json.loads(result.stdout)


def test_compile_lowers_the_estimate_and_raises_the_speed() -> None:
    default, eager, blocks, whole = (_estimate(*o) for o in ((), ("--no-compile",), ("--compile", "model"), ("--compile",)))
    assert default["job"]["compile"] == eager["job"]["compile"] == "none"  # torchtitan's CompileConfig.enable = False
    assert blocks["job"]["compile"] == "model" and whole["job"]["compile"] == "model+loss"
    totals = [r["memory"]["total_bytes"] for r in (eager, blocks, whole)]
    assert totals[0] > totals[1] > totals[2]
    speeds = [r["performance"]["tokens_per_s"] for r in (eager, blocks, whole)]
    assert speeds[0] < speeds[1] < speeds[2]
    assert default["memory"]["total_bytes"] == totals[0]
    # `--compile none` is --no-compile (the batch column's value; it was "not one of 'model', 'model+loss'")
    assert _estimate("--compile", "none") == eager and _estimate("--compile", "none", "--no-compile") == eager


def test_compile_and_no_compile_together_is_bad_input() -> None:
    assert_error_line(invoke(*ESTIMATE, "--compile", "--no-compile"), "no-compile", "--compile model+loss")


def test_a_stack_without_torch_compile_refuses_it_in_one_line() -> None:
    for stack, zero, recompute in (("megatron", "1", "none"), ("litgpt", "3", "full")):
        args = [{"torchtitan": stack, "3": zero}.get(a, a) for a in ESTIMATE] + ["--recompute", recompute]
        result = invoke(*args, "--compile")
        assert result.exit_code == 2
        assert_error_line(result, f"stack='{stack}'", "torch.compile", "compile=model+loss")
        assert invoke(*args, "--no-compile").exit_code in (0, 3)  # runs (fits or not): no compile is what they run


def test_solve_takes_the_switch_and_plans_with_it() -> None:
    args = ["solve", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--seq-len", "4096", "--stack", "torchtune",
            "--global-batch", "16", "--max-gpus", "8", "--format", "json"]
    compiled, eager = invoke(*args, "--compile"), invoke(*args, "--no-compile")
    assert compiled.exit_code == eager.exit_code == 0, (compiled.stderr, eager.stderr)
    best = [json.loads(r.stdout)["plans"][0] for r in (compiled, eager)]
    assert best[0]["performance"]["tokens_per_s"] > best[1]["performance"]["tokens_per_s"]
    refused = invoke(*[a if a != "torchtune" else "megatron" for a in args], "--compile")
    assert_error_line(refused, "stack='megatron'", "torch.compile")
