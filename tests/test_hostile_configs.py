"""Hostile model definitions and estimate options that a review of 2026-12-06 found mishandled
(each case failed before its fix: a hang, an internal error, or a silent wrong answer).

- an unterminated string of escaped quotes in a config.json: the nesting scan's string pattern
  rescanned from every quote (a 1 MiB file: about 50 minutes);
- `--stage-layers 1*1000000000` built a billion-entry list before counting it (9 GB, then a
  timeout), and a 20-digit repeat was `internal error: OverflowError`;
- a MoE config whose every layer is dense (`decoder_sparse_step` past the depth) was `internal
  error: StopIteration`;
- `--restart-overhead -5` priced a run at -6 million USD, 1e300 at inf hours;
- a Llama config without `intermediate_size` read 4 x hidden (LlamaConfig's default is 11008);
- a `text_config` of a model type vramplan does not read was read as the wrapper's default decoder;
- `num_experts: null` in a MoE family, and one expert routed to two, read as a dense model;
- the optimizer stepped in the backward beside gradient accumulation (torchtune refuses it)
  counted one gradient at a time;
- options that mean nothing together were ignored: `--qlora-prep` with full fine-tuning,
  `--selective` beside `--recompute none`, `--lora-targets ''`;
- a gpt_oss config without `attention_bias` failed on its MLP bias default;
- a missing path read "not in the catalogue", a missing hub extra exited 2 (docs: 1), more heads than
  channels blamed head_dim, a GPTQ group of 1e8 printed a regex, 405B at 1M tokens x 65,536 reported
  7e21 bytes (beyond int64);
- the Python estimate took a Path (AttributeError), `pricing="free"` (KeyError), `tokens="1e9"`
  (TypeError) and `tokens=True` (one token).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import invoke, one_line_error

from vramplan.models.architecture.parallel import parse_split
from vramplan.models.catalogue.catalogue import load_catalogue
from vramplan.models.catalogue.config_file import json_depth
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.estimate import estimate
from vramplan.solver.api import solve
from vramplan.solver.query import SolveQuery
from vramplan.solver.query_fields import job_from_fields

SMALL = {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "vocab_size": 1000}


def write(tmp_path: Path, config: dict, name: str = "config.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(config), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(("text", "depth"), [('{"a":[1,{"b":"[[["}]}', 3), ('"[{"', 0), ('{"a":"\\"["}', 1),
                                             ('{"a":"\\\\"}', 1), ("[[[", 3), ('{"a":"\\u005b"}', 1)])
def test_nesting_ignores_brackets_inside_strings(text, depth):
    assert json_depth(text) == depth


def test_an_unterminated_string_of_escaped_quotes_is_refused_as_json(tmp_path):
    path = tmp_path / "r.json"
    path.write_text('{"a":"' + '\\"' * 100_000, encoding="utf-8")  # 200 KB: minutes before, milliseconds now
    assert "JSON" in one_line_error(invoke("estimate", "--model", str(path)))


@pytest.mark.parametrize("text", ["1*1000000000", "1*99999999999999999999", "9" * 5000, "1*" + "9" * 5000, "1*1025",
                                  "1*1024,1"])
def test_a_stage_split_beyond_its_bounds_is_refused_before_it_is_built(text):
    with pytest.raises(VramplanError) as error:
        parse_split(text)
    assert error.value.field == "stage_layers"


def test_a_stage_split_at_its_bounds_parses():
    assert parse_split("1*1024") == (1,) * 1024 and parse_split("7,8*14,7") == (7, *(8,) * 14, 7)


@pytest.mark.parametrize("extra", [{"model_type": "qwen3_moe", "intermediate_size": 512, "decoder_sparse_step": 8},
                                   {"model_type": "qwen3_moe", "intermediate_size": 512, "mlp_only_layers": [0, 1, 2, 3]},
                                   {"model_type": "deepseek_v3", "intermediate_size": 512, "first_k_dense_replace": 4}])
def test_a_moe_config_without_a_moe_layer_is_one_line(tmp_path, extra):
    line = one_line_error(invoke("estimate", "--model", write(tmp_path, {**SMALL, **extra})))
    assert "no decoder layer is a MoE layer" in line


@pytest.mark.parametrize("value", [4, 1.5, True, "0"])
def test_mlp_only_layers_that_is_no_list_is_one_line(tmp_path, value):
    # a number here raised a TypeError (len of an int): the hostile-input sweep of 2026-12-06's tenth session
    line = one_line_error(invoke("estimate", "--model", write(tmp_path, {**SMALL, "model_type": "qwen3_next",
                                                                          "mlp_only_layers": value})))
    assert "mlp_only_layers" in line and "list of layer indices" in line


@pytest.mark.parametrize("value", ["-5", "-1", "1e300", "11"])
def test_a_restart_overhead_outside_its_domain_is_one_line(value):
    line = one_line_error(invoke("estimate", "--model", "llama-3.1-8b", "--num-gpus", "8", "--zero", "3",
                                 "--pricing", "spot", "--restart-overhead", value))
    assert "restart_overhead" in line and "between 0 and 10" in line


def test_a_missing_mlp_width_is_an_error_unless_the_family_derives_it(tmp_path):
    llama = {**SMALL, "model_type": "llama", "num_key_value_heads": 2}
    assert "lacks 'intermediate_size'" in one_line_error(invoke("estimate", "--model", write(tmp_path, llama)))
    gpt2 = {"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 2, "vocab_size": 100}
    arch = load_catalogue().architecture(write(tmp_path, gpt2, "gpt2.json"))
    assert arch.intermediate_size == 4 * 64  # GPT2Config n_inner None: 4 x n_embd


def test_a_text_config_of_an_unread_model_type_is_refused(tmp_path):
    for inner in ("bert", "gemma3"):
        config = {"model_type": "mistral3", "text_config": {**SMALL, "model_type": inner, "intermediate_size": 512}}
        line = one_line_error(invoke("estimate", "--model", write(tmp_path, config, f"{inner}.json")))
        assert "text_config's model_type is not a supported decoder" in line


def test_a_moe_family_without_experts_or_routing_past_them_is_refused(tmp_path):
    null = {**SMALL, "model_type": "qwen3_moe", "intermediate_size": 512, "num_experts": None}
    assert "num_experts" in one_line_error(invoke("estimate", "--model", write(tmp_path, null, "n.json")))
    routed = {**SMALL, "model_type": "mixtral", "intermediate_size": 512, "num_local_experts": 1, "num_experts_per_tok": 2}
    assert "num_experts_per_tok" in one_line_error(invoke("estimate", "--model", write(tmp_path, routed, "r.json")))
    single = {**routed, "num_experts_per_tok": 1}  # one expert, one routed: a dense MLP
    assert not load_catalogue().architecture(write(tmp_path, single, "s.json")).is_moe


def test_gpt_oss_without_attention_bias_has_its_default_biases(tmp_path):
    arch = load_catalogue().architecture(write(tmp_path, {"model_type": "gpt_oss"}))
    assert arch.linear_bias and arch.moe_bias  # GptOssConfig attention_bias defaults to True


def test_the_optimizer_in_the_backward_never_accumulates():
    """torchtune: "Gradient accumulation is not supported with optimizer in bwd"."""
    line = one_line_error(invoke("estimate", "--model", "llama-3.1-8b", "--stack", "torchtune",
                                 "--optimizer-in-backward", "--grad-accum", "4"))
    assert "gradient accumulation with the optimizer in the backward" in line
    job = job_from_fields({"stack": "torchtune", "optimizer_in_backward": True, "seq_len": 2048})
    result = solve(load_catalogue(), SolveQuery(model="llama-3.1-8b", job=job, global_batch=64, max_gpus=8,
                                                gpus=("h100-sxm-80gb",), top_k=5), explain_infeasible=False)
    assert result.plans and all(p.plan.grad_accum == 1 for p in result.plans)


@pytest.mark.parametrize(("args", "fragment"), [
    (["--method", "full", "--qlora-prep", "16bit"], "applies to --method qlora"),
    (["--selective", "op", "--recompute", "none"], "applies to --recompute selective"),
    (["--lora-targets", ""], "applies to --method lora or qlora"),  # on the default full fine-tune
    (["--method", "lora", "--lora-targets", ",,,"], "names no module"),
])
def test_options_that_mean_nothing_together_are_refused(args, fragment):
    assert fragment in one_line_error(invoke("estimate", "--model", "llama-3.1-8b", *args))


def test_the_python_estimate_checks_its_arguments():
    catalogue, job, plan = load_catalogue(), Job(), Plan(gpu="h100-sxm-80gb")
    for arguments, field in (((Path("x.json"), 1e9), "model"), (("llama-3.1-8b", "1e9"), "tokens"),
                             (("llama-3.1-8b", True), "tokens"), (("llama-3.1-8b", float("nan")), "tokens")):
        with pytest.raises(VramplanError) as error:
            estimate(catalogue, arguments[0], job, plan, arguments[1])  # type: ignore[arg-type]
        assert error.value.field == field
    with pytest.raises(VramplanError, match="pricing"):
        estimate(catalogue, "llama-3.1-8b", job, plan, 1e9, pricing="free")  # type: ignore[arg-type]
    with pytest.raises(VramplanError, match="restart_overhead"):
        estimate(catalogue, "llama-3.1-8b", job, plan, 1e9, pricing="spot", restart_overhead=float("nan"))
    assert estimate(catalogue, "llama-3.1-8b", job, plan, 1e9, pricing="spot", restart_overhead=0.5).cost is not None


def test_a_model_folder_named_with_a_control_character_keeps_the_header_one_line(tmp_path):
    folder = tmp_path / "a\nb"
    folder.mkdir()
    write(folder, {**SMALL, "model_type": "llama", "intermediate_size": 512})
    result = invoke("estimate", "--model", str(folder))
    assert result.stdout.splitlines()[0].startswith("a\\x0ab (")


def test_a_config_value_outside_the_models_domain_names_the_files_key(tmp_path):
    config = {**SMALL, "model_type": "llama", "intermediate_size": 512, "num_hidden_layers": 10**17}
    assert "num_hidden_layers: Input should be less than or equal to 1024" in one_line_error(
        invoke("estimate", "--model", write(tmp_path, config)))


@pytest.mark.parametrize("model", ["./foo/bar", "a/b/c", "missing.json"])
def test_a_missing_path_says_no_such_file_not_not_in_the_catalogue(model):
    line = one_line_error(invoke("estimate", "--model", model))
    assert "no such" in line.lower() and "not in the catalogue" not in line


def test_a_hub_id_without_the_hub_extra_is_an_installation_failure(monkeypatch):
    """docs/commands.md: a missing optional extra exits 1 (it was 2, as bad input)."""
    import sys

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # `import huggingface_hub` raises ImportError
    line = one_line_error(invoke("estimate", "--model", "Qwen/Qwen3-8B"), code=1)
    assert "pip install 'vramplan[hub]'" in line


def test_more_heads_than_channels_and_a_huge_gptq_group_name_their_keys(tmp_path):
    heads = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 16, "num_attention_heads": 32,
             "vocab_size": 100, "intermediate_size": 64}
    assert "num_attention_heads" in one_line_error(invoke("estimate", "--model", write(tmp_path, heads, "h.json")))
    group = {**heads, "num_attention_heads": 4, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 10**8}}
    line = one_line_error(invoke("estimate", "--model", write(tmp_path, group, "g.json")))
    assert "group_size" in line and "9,999,999" in line and "^" not in line  # no regex in the message


def test_an_estimate_beyond_int64_bytes_is_refused():
    """Every domain allowed it: Llama 3.1 405B at 1M tokens, micro-batch 65,536, eager attention
    answered 6.98e21 bytes, which JSON readers with int64 integers cannot hold."""
    line = one_line_error(invoke("estimate", "--model", "llama-3.1-405b", "--seq-len", "1048576", "--micro-batch", "65536",
                                 "--attention", "eager", "--format", "json"))
    assert "micro_batch=65536" in line and "2^62" in line


def test_a_multimodal_decoder_key_missing_from_text_config_says_where_it_is_read(tmp_path):
    config = {"model_type": "gemma3", **SMALL, "intermediate_size": 512, "text_config": {"model_type": "gemma3_text"}}
    line = one_line_error(invoke("estimate", "--model", write(tmp_path, config)))
    assert "lacks 'text_config.num_hidden_layers'" in line  # it said "lacks 'num_hidden_layers'", which the file held


def test_a_bad_rotary_factor_inside_rope_parameters_names_its_key_and_kind(tmp_path):
    config = {**SMALL, "model_type": "llama", "intermediate_size": 512, "rope_parameters": {"partial_rotary_factor": "x"}}
    line = one_line_error(invoke("estimate", "--model", write(tmp_path, config)))
    assert "rope_parameters.partial_rotary_factor='<a text of 1 characters>'" in line  # it said '<null>'
