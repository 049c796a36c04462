"""Checks 14–18: the axolotl / TRL failures the audit sees from the config (fast tier).

Configs are written the way axolotl's examples (examples/llama-3/lora-1b.yml, instruct-lora-8b.yml)
and TRL's SFTConfig JSON write them; the model is a tiny tied GQA Llama saved as a Hugging Face
directory, so ``base_model`` is a local path as a user's would be.
"""

from __future__ import annotations

import json

import pytest
import torch

from nbkit.audit.checks.chat_template_eot import ChatTemplateEotConfig
from nbkit.audit.checks.eval_batch import EvalBatchConfig
from nbkit.audit.checks.packing_attention import PackingAttentionConfig
from nbkit.audit.checks.tied_embeddings import TiedEmbeddingsConfig
from nbkit.audit.checks.train_on_inputs import TrainOnInputsConfig
from nbkit.audit.cli import main
from nbkit.audit.formats import read_any
from nbkit.audit.sft import CHATML_TEMPLATE, load_model_and_tokenizer, tiny_tokenizer


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """The audit's tiny model (tied embeddings, pad = eos = <|im_end|>) saved as a Hugging Face directory."""
    model, tok = load_model_and_tokenizer("tiny", torch.device("cpu"), seed=0)
    path = tmp_path_factory.mktemp("tiny-hf")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


# axolotl's examples/llama-3/instruct-lora-8b.yml, with the failures of checks 14-18 switched on
AXOLOTL_CHAT = """\
base_model: {base}
model_type: LlamaForCausalLM
tokenizer_type: AutoTokenizer
load_in_8bit: false
strict: false
chat_template: tokenizer_default
datasets:
  - path: fozziethebeat/alpaca_messages_2k_test
    type: chat_template
    field_messages: messages
    message_field_role: role
    message_field_content: content
    roles:
      user:
        - user
      assistant:
        - assistant
val_set_size: 0.05
output_dir: ./outputs/lora-out
sequence_len: 4096
sample_packing: {packing}
pad_to_sequence_len: true
adapter: lora
lora_model_dir:
lora_r: 32
lora_alpha: 16
lora_dropout: 0.05
lora_target_linear: true
lora_fan_in_fan_out:
lora_modules_to_save: {save}
gradient_accumulation_steps: 4
micro_batch_size: 2
eval_batch_size: {eval_bs}
num_epochs: 4
optimizer: adamw_bnb_8bit
lr_scheduler: cosine
learning_rate: 0.0002
train_on_inputs: {toi}
bf16: auto
fp16:
tf32: false
gradient_checkpointing: true
xformers_attention:
flash_attention: {flash}
warmup_steps: 10
evals_per_epoch: 4
deepspeed:
weight_decay: 0.0
special_tokens:
   pad_token: <|im_end|>
"""

BAD = {"packing": "true", "save": "[embed_tokens, lm_head]", "eval_bs": 8, "toi": "true", "flash": "false"}
GOOD = {"packing": "true", "save": "[]", "eval_bs": 2, "toi": "false", "flash": "true"}


def _axolotl(tmp_path, base, **values):
    p = tmp_path / "lora.yml"
    p.write_text(AXOLOTL_CHAT.format(base=base, **values))
    return p


def test_axolotl_chat_config_with_a_local_model_dir_trips_each_check(tmp_path, model_dir, capsys):
    path = _axolotl(tmp_path, model_dir, **BAD)
    m = read_any(path)
    assert m.config.model.name == str(model_dir) and m.config.trainer.dataset_types == ["chat_template"]
    assert main([str(path), "--checks", "14-18", "--threads", "1"]) == 1
    out = capsys.readouterr().out
    assert "axolotl config:" in out and "→ model.name (a local model directory)" in out
    for line in (
        "[FAIL] train-on-inputs",
        "[PASS] chat-template-eot",
        "[FAIL] tied-embeddings-lora",
        "[FAIL] packing-attention",
        "[WARN] eval-batch",
    ):
        assert line in out, out


def test_axolotl_chat_config_done_right_passes(tmp_path, model_dir, capsys):
    assert main([str(_axolotl(tmp_path, model_dir, **GOOD)), "--checks", "14-18", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("[PASS]") == 5, out


def test_axolotl_lora_1b_example_shape(tmp_path, model_dir, capsys):
    """examples/llama-3/lora-1b.yml: alpaca data, sample packing with flash attention, no eval batch size."""
    text = (
        f"base_model: {model_dir}\nload_in_8bit: false\nstrict: false\ndatasets:\n  - path: "
        "teknium/GPT4-LLM-Cleaned\n    type: alpaca\n"
        "dataset_prepared_path: last_run_prepared\nval_set_size: 0.1\noutput_dir: "
        "./outputs/lora-out\nadapter: lora\nlora_model_dir:\n"
        "sequence_len: 2048\nsample_packing: true\neval_sample_packing: true\npad_to_sequence_len: "
        "true\nlora_r: 16\nlora_alpha: 32\n"
        "lora_dropout: 0.05\nlora_fan_in_fan_out:\nlora_target_modules:\n  - gate_proj\n  - down_proj\n  - "
        "up_proj\n  - q_proj\n  - v_proj\n"
        "  - k_proj\n  - o_proj\ngradient_accumulation_steps: 2\nmicro_batch_size: 2\nnum_epochs: "
        "1\noptimizer: adamw_8bit\n"
        "lr_scheduler: cosine\nlearning_rate: 0.0002\ntrain_on_inputs: false\nbf16: auto\nfp16:\ntf32: "
        "false\nxformers_attention:\n"
        "flash_attention: true\nwarmup_steps: 10\ndeepspeed:\nspecial_tokens:\n  pad_token: "
        '"<|end_of_text|>"\n'
    )
    (tmp_path / "lora-1b.yml").write_text(text)
    assert main([str(tmp_path / "lora-1b.yml"), "--checks", "14-18", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "[SKIP] chat-template-eot: not run: needs a chat dataset" in out
    assert "[PASS] packing-attention: packing with flash_attention_2" in out


def test_train_on_inputs_verdicts():
    from nbkit.audit.checks.train_on_inputs import check_train_on_inputs

    assert check_train_on_inputs(TrainOnInputsConfig(True, "chat_template"), (61.0, 8)).status == "fail"
    assert check_train_on_inputs(TrainOnInputsConfig(True, "sharegpt,alpaca")).status == "fail"
    assert check_train_on_inputs(TrainOnInputsConfig(True, "completion")).status == "pass"
    assert check_train_on_inputs(TrainOnInputsConfig(False, "chat_template.default")).status == "pass"


def test_prompt_share_is_measured_with_the_template():
    from nbkit.audit.checks.train_on_inputs import prompt_share
    from nbkit.audit.config import TemplateSection
    from nbkit.audit.sft import make_sft_examples

    share, n = prompt_share(tiny_tokenizer(), make_sft_examples(8), TemplateSection())
    assert n == 8 and 30 < share < 95  # ChatML headers + the instruction outweigh a short answer


def _tokenizer_with(template: str):
    import copy

    t = copy.deepcopy(tiny_tokenizer())  # a copy: the cached tokenizer other tests use keeps its template
    t.chat_template = template
    return t


def test_chat_template_eot_trained_masked_or_missing():
    from nbkit.audit.checks.chat_template_eot import check_chat_template_eot

    ok = check_chat_template_eot(_tokenizer_with(CHATML_TEMPLATE), ChatTemplateEotConfig())
    assert ok.status == "pass" and ok.figures["closing_token"] == "<|im_end|>"
    # turns closed by <|endoftext|> while the trained EOS is <|im_end|> (Llama-3's <|eot_id|> vs
    # <|end_of_text|>)
    other = CHATML_TEMPLATE.replace("<|im_end|>", "<|endoftext|>")
    f = check_chat_template_eot(_tokenizer_with(other), ChatTemplateEotConfig())
    assert f.status == "fail" and "'<|endoftext|>'" in f.summary
    assert (
        check_chat_template_eot(
            _tokenizer_with(other), ChatTemplateEotConfig(eot_tokens="<|endoftext|>")
        ).status
        == "pass"
    )
    none = CHATML_TEMPLATE.replace("'<|im_end|>' + ", "")
    assert check_chat_template_eot(_tokenizer_with(none), ChatTemplateEotConfig()).status == "fail"
    assert (
        check_chat_template_eot(
            _tokenizer_with(CHATML_TEMPLATE), ChatTemplateEotConfig(train_on_eos="none")
        ).status
        == "fail"
    )


@pytest.mark.parametrize(
    "tied,save,status",
    [
        (True, "embed_tokens,lm_head", "fail"),
        (True, "lm_head", "fail"),
        (True, "", "pass"),
        (False, "embed_tokens,lm_head", "pass"),
    ],
)
def test_tied_embeddings_on_the_meta_device(tied, save, status):
    from nbkit.audit.checks.tied_embeddings import check_tied_embeddings, wrap_and_compare
    from nbkit.model_files import tiny_llama_config

    config = tiny_llama_config(tie_word_embeddings=tied)
    measured = wrap_and_compare(config, "all-linear", save.split(",")) if save and tied else None
    f = check_tied_embeddings(config, TiedEmbeddingsConfig(True, save), measured)
    assert f.status == status, f.summary
    if measured:
        assert (
            measured["trainable_embedding_copies"] == len(save.split(",")) and not measured["tied_after_wrap"]
        )


def test_packing_contamination_is_measured_and_flash_passes():
    from nbkit.audit.checks.packing_attention import check_packing_attention, packed_contamination

    model, tok = load_model_and_tokenizer("tiny", torch.device("cpu"), seed=0)
    measured = packed_contamination(model, tok)
    assert measured["max_logit_diff_all_ones_mask"] > 1e-3  # the second example sees the first
    assert check_packing_attention(PackingAttentionConfig(True, "sdpa"), measured).status == "fail"
    assert check_packing_attention(PackingAttentionConfig(True, "flash_attention_2")).status == "pass"
    assert check_packing_attention(PackingAttentionConfig(False, "eager")).status == "pass"


def test_eval_batch_verdicts():
    from nbkit.audit.checks.eval_batch import check_eval_batch

    assert check_eval_batch(EvalBatchConfig(2, 8, 4)).status == "warn"
    assert check_eval_batch(EvalBatchConfig(2, 0, 4)).status == "pass"  # 0: the micro batch size
    assert check_eval_batch(EvalBatchConfig(2, 8, 1)).status == "pass"


# TRL SFTConfig as to_json_string() writes it (abridged), packing on without flash attention
SFT_CONFIG = {
    "output_dir": "Qwen2-0.5B-SFT",
    "per_device_train_batch_size": 2,
    "per_device_eval_batch_size": 8,
    "gradient_accumulation_steps": 8,
    "learning_rate": 2e-5,
    "lr_scheduler_type": "linear",
    "warmup_ratio": 0.0,
    "max_steps": -1,
    "num_train_epochs": 3.0,
    "logging_steps": 10,
    "eval_strategy": "no",
    "bf16": True,
    "seed": 42,
    "max_length": 1024,
    "packing": True,
    "padding_free": False,
    "dataset_text_field": "text",
    "model_init_kwargs": None,
    "eos_token": None,
    "assistant_only_loss": False,
    "report_to": ["none"],
}


def test_trl_sft_config_maps_packing_and_eval_batch(tmp_path, model_dir, capsys):
    path = tmp_path / "sft_config.json"
    path.write_text(json.dumps(SFT_CONFIG))
    assert main([str(path), "--model", str(model_dir), "--checks", "14-18", "--threads", "1"]) == 1
    out = capsys.readouterr().out
    assert "trl config:" in out and "[FAIL] packing-attention" in out and "[WARN] eval-batch" in out
    assert "[SKIP] train-on-inputs: not run: needs datasets[].type" in out
    path.write_text(
        json.dumps(
            {
                **SFT_CONFIG,
                "per_device_eval_batch_size": 2,
                "model_init_kwargs": {"attn_implementation": "flash_attention_2"},
            }
        )
    )
    m = read_any(path)
    assert (
        m.config.trainer.attn_implementation == "flash_attention_2" and m.config.trainer.eval_batch_size == 2
    )


def test_doctor_audit_line_parses_with_the_audit_cli():
    import shlex

    from nbkit.audit.cli import build_parser
    from nbkit.cli import OWN_RUN_EXAMPLES

    words = shlex.split(OWN_RUN_EXAMPLES["audit"].split("#")[0])
    args = build_parser().parse_args(words[2:])
    assert args.config == "axolotl.yml" and args.model == "path/to/hf_dir"


def test_a_bare_config_json_runs_what_needs_only_the_architecture(tmp_path, model_dir, capsys):
    text = (
        f"base_model: {model_dir / 'config.json'}\nadapter: lora\nlora_r: 8\nlora_modules_to_save: "
        "[embed_tokens, lm_head]\n"
    )
    (tmp_path / "arch.yml").write_text(text)
    assert (
        main([str(tmp_path / "arch.yml"), "--checks", "lora-binding,tied-embeddings-lora", "--threads", "1"])
        == 1
    )
    out = capsys.readouterr().out
    assert "→ model.name (a config.json: architecture only" in out
    assert "[SKIP] lora-binding: not run: needs the model's weights" in out
    assert (
        "[FAIL] tied-embeddings-lora: tie_word_embeddings is true" in out
        and "trainable_embedding_copies = 2" in out
    )


def test_training_args_of_the_installed_transformers_map(tmp_path):
    """A TrainingArguments JSON as this transformers writes it (v5: warmup_steps may be a ratio)."""
    from transformers import TrainingArguments

    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=2,
        per_device_eval_batch_size=8,
        gradient_accumulation_steps=4,
        learning_rate=2e-4,
        lr_scheduler_type="cosine",
        warmup_steps=0.1,
        max_steps=500,
        save_steps=100,
        eval_strategy="steps",
        eval_steps=50,
        seed=42,
        report_to="none",
    )
    path = tmp_path / "training_args.json"
    path.write_text(args.to_json_string())
    m = read_any(path, model="tiny")
    assert m.fmt == "trl" and m.config.scheduler.warmup_steps == 50 and m.config.trainer.eval_batch_size == 8
    assert (
        m.config.train.micro_batch_size == 2
        and m.config.train.grad_accumulation == 4
        and m.config.checkpoint.interval == 100
    )


def test_ensure_weight_tying_keeps_one_tensor_and_passes():
    from nbkit.audit.checks.tied_embeddings import check_tied_embeddings, wrap_and_compare
    from nbkit.model_files import tiny_llama_config

    config = tiny_llama_config(tie_word_embeddings=True)
    measured = wrap_and_compare(config, "all-linear", ["embed_tokens", "lm_head"], ensure_weight_tying=True)
    assert measured["tied_after_wrap"] and measured["trainable_embedding_copies"] == 1
    assert (
        check_tied_embeddings(
            config, TiedEmbeddingsConfig(True, "embed_tokens,lm_head", True), measured
        ).status
        == "pass"
    )


def test_peft_adapter_config_as_peft_writes_it(tmp_path, model_dir, capsys):
    from peft import LoraConfig

    cfg = LoraConfig(
        r=16, lora_alpha=32, target_modules="all-linear", modules_to_save=["lm_head"], task_type="CAUSAL_LM"
    )
    cfg.base_model_name_or_path = str(model_dir)
    cfg.save_pretrained(tmp_path)
    assert (
        main(
            [
                str(tmp_path / "adapter_config.json"),
                "--checks",
                "lora-binding,tied-embeddings-lora",
                "--threads",
                "1",
            ]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert "peft config:" in out and "[PASS] lora-binding" in out and "[FAIL] tied-embeddings-lora" in out
