"""Build the ``dspy.LM`` a notebook run uses: the local llama.cpp server by default, any DSPy/LiteLLM model by
name.

``LM_MODEL = "local"`` (the default) starts :class:`~nbkit.signatures.server.LocalLMPool` (llama.cpp's
``llama-server`` when ``make setup`` built it, else llama-cpp-python's server) and reaches it
the way users reach Ollama, vLLM or llama.cpp: ``dspy.LM("openai/<alias>", api_base=..., api_key="local")``.
Any other value is passed to ``dspy.LM`` unchanged (``"openai/gpt-4o-mini"``, ``"ollama_chat/llama3"``…);
its key is read from the environment variable named by ``api_key_env`` and never written anywhere.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any

from nbkit.cache import cache_dir as nbkit_cache_dir
from nbkit.model_files import smollm2_gguf_path
from nbkit.signatures.server import (
    LocalLMPool,
    check_model_path,
    llama_server_binary,
    resolve_server_kind,
    send_body,
)

LOCAL = "local"

# Where a remote provider's key conventionally lives; used to give a precise "key missing" message.
PROVIDER_KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
}
KEYLESS_PROVIDERS = {"ollama", "ollama_chat", "lm_studio", "hosted_vllm", "vllm", "local"}


CACHE_MODES = ("memory", "disk", "off")


def cache_dir():
    """Where ``cache="disk"`` keeps DSPy's cache: ``dspy/`` in :func:`nbkit.cache.cache_dir`."""
    return nbkit_cache_dir("dspy")


def local_model_alias(
    model_path=None,
    *,
    n_ctx: int = 2048,
    extra_args=(),
    base: str = "smollm2-135m-instruct",
    kind: str = "llama-cpp-python",
    slots: int = 1,
    n_gpu_layers=0,
) -> str:
    """The local model's name on the wire: ``base`` plus a fingerprint of what decides its answers.

    The fingerprint hashes the GGUF file's bytes, llama-cpp-python's version, the context size and the
    server's extra arguments, so DSPy's cache (keyed on the model name) misses when any of them changes.
    For llama.cpp's ``llama-server`` (``kind``) it also hashes the kind, how the binary was built (its
    ``llama-server.json``), the slots decoded together (a batch may round differently from one request)
    and the GPU layers, so answers of the two kinds of server never share cache entries.
    The file hash is remembered per (path, size, mtime), so the model file is read once per process.
    """
    import hashlib
    from importlib.metadata import PackageNotFoundError, version

    if model_path is None:
        model_path = smollm2_gguf_path()
    path = check_model_path(model_path)
    try:
        llama_version = version("llama_cpp_python")
    except PackageNotFoundError:
        llama_version = "none"
    parts = [
        _file_digest(str(path.resolve()), path.stat().st_size, path.stat().st_mtime_ns),
        llama_version,
        str(n_ctx),
        *map(str, extra_args),
    ]
    if kind != "llama-cpp-python":  # the fallback keeps the names (and cache entries) it always had
        binary = llama_server_binary()
        info = binary.with_name(binary.name + ".json") if binary is not None else None
        build = info.read_text() if info is not None and info.is_file() else str(binary)
        parts += [f"kind={kind}", build, f"slots={slots}", f"n_gpu_layers={n_gpu_layers}"]
    return f"{base}-{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:12]}"


@functools.lru_cache(maxsize=8)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class MissingApiKey(RuntimeError):
    """A remote model was asked for but its API key is not in the environment."""


class TokenLimitExceeded(RuntimeError):
    """A response carried more completion tokens than ``max_tokens`` allowed."""


def offline_environment() -> None:
    """No network beyond loopback here: make LiteLLM/DSPy use their bundled model metadata, not a download."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@dataclass
class LMHandle:
    """The LM plus what started it (``server`` is None for a remote model)."""

    lm: Any
    model: str
    max_tokens: int
    server: Any = None
    info: dict = field(default_factory=dict)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()


def resolve_api_key(model: str, api_key_env: str | None) -> str | None:
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    if provider in KEYLESS_PROVIDERS:
        return None
    env_name = api_key_env or PROVIDER_KEY_ENV.get(provider)
    if env_name is None:
        return None  # LiteLLM knows the provider's own variable; it will say if it is missing
    key = os.environ.get(env_name)
    if not key:
        raise MissingApiKey(
            f"LM_MODEL={model!r} needs an API key in the environment variable {env_name} (not set); "
            f"export {env_name}=... before starting Jupyter, or use LM_MODEL='local' for the offline SmolLM2 "
            "server"
        )
    return key


def make_lm(
    model: str = LOCAL,
    *,
    api_base: str | None = None,
    api_key_env: str | None = None,
    max_tokens: int = 192,
    temperature: float = 0.0,
    server_kwargs: dict | None = None,
    cache: str = "memory",
    request_timeout: float = 300.0,
) -> LMHandle:
    """A ``dspy.LM`` for ``model`` (``"local"`` starts the llama.cpp server on a free loopback port).

    ``cache`` (see :data:`CACHE_MODES`): ``"memory"`` answers identical requests once inside one run;
    ``"disk"`` also keeps DSPy's on-disk cache in :func:`cache_dir`, so a re-run with the same model,
    prompts and settings is answered from disk (the run records how many calls were, see
    ``serving.LMService.calls_summary``); ``"off"`` sends every request. The local model's name on the
    wire carries a fingerprint of its GGUF file and server settings (:func:`local_model_alias`), and the
    cache key includes that name, every message and every sampling setting — a changed model, prompt or
    setting misses.
    """
    offline_environment()
    import dspy

    if cache not in CACHE_MODES:
        raise ValueError(f"cache must be one of {CACHE_MODES}, got {cache!r}")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive int, got {max_tokens!r}")
    disk = cache == "disk"
    dspy.configure_cache(
        enable_disk_cache=disk,
        enable_memory_cache=cache != "off",
        **({"disk_cache_dir": str(cache_dir())} if disk else {}),
    )
    cache = cache != "off"
    if model == LOCAL:
        # Local servers behind one dispatcher (server_kwargs["n_servers"], default one per core of the
        # kernel's share; "kind": llama-server with "slots" requests each when built, else llama-cpp-python's
        # server, see server.py).
        kwargs = dict(server_kwargs or {})
        kwargs["kind"] = resolve_server_kind(kwargs.get("kind", "auto"))
        slots = kwargs.get("slots", 4) if kwargs["kind"] == "llama-server" else 1
        kwargs.setdefault(
            "model_alias",
            local_model_alias(
                kwargs.get("model_path"),
                n_ctx=kwargs.get("n_ctx", 2048),
                extra_args=kwargs.get("extra_args", ()),
                kind=kwargs["kind"],
                slots=slots,
                n_gpu_layers=kwargs.get("n_gpu_layers", 0),
            ),
        )
        server = LocalLMPool(**kwargs).start()
        try:
            lm = dspy.LM(
                f"openai/{server.model_alias}",
                api_base=server.api_base,
                api_key="local",
                max_tokens=max_tokens,
                temperature=temperature,
                cache=cache,
                num_retries=0,
                timeout=request_timeout,  # a wedged server ends the call with an error, not a hung cell
            )
        except BaseException:
            server.stop()
            raise
        return LMHandle(
            lm,
            model,
            max_tokens,
            server,
            {
                "api_base": server.api_base,
                "model_path": str(server.model_path),
                "log": str(server.log_path),
                "server": server.kind,
                "capacity": server.capacity,
            },
        )
    key = resolve_api_key(model, api_key_env)
    kwargs: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature, "cache": cache}
    if api_base:
        kwargs["api_base"] = api_base
    if key:
        kwargs["api_key"] = key
    lm = dspy.LM(model, **kwargs)
    return LMHandle(lm, model, max_tokens, None, {"api_base": api_base or "(provider default)"})


def completion_tokens_of(lm: Any, last: int = 1) -> list[int | None]:
    """Completion-token counts the server reported for the last ``last`` calls in ``lm.history``."""
    counts: list[int | None] = []
    for entry in lm.history[-last:]:
        usage = entry.get("usage") or {}
        value = (
            usage.get("completion_tokens")
            if isinstance(usage, dict)
            else getattr(usage, "completion_tokens", None)
        )
        counts.append(int(value) if value is not None else None)
    return counts


def check_token_limit(
    lm: Any, max_tokens: int, prompt: str = "Write a very long story about a dragon who learns to cook."
) -> dict:
    """Send one DSPy request with ``max_tokens`` and verify the server generated at most that many tokens.

    The prompt invites a long answer, so a limit that does not reach the server shows up as a count far
    above ``max_tokens`` (the server then runs to EOS or to the end of its context).
    """
    import dspy

    probe = lm.copy(max_tokens=max_tokens, cache=False)
    with dspy.context(lm=probe):
        probe(prompt)
    (count,) = completion_tokens_of(probe, 1)
    result = {
        "max_tokens": max_tokens,
        "completion_tokens": count,
        "ok": count is not None and count <= max_tokens,
    }
    if count is not None and count > max_tokens:
        raise TokenLimitExceeded(
            f"asked for max_tokens={max_tokens} but the server generated {count} tokens: the limit did not "
            "reach "
            "the server (llama-cpp-python ignores 'max_completion_tokens'; start it via "
            "nbkit.signatures.llama_server)"
        )
    return result


RUNAWAY_PROMPT = "Write a very long story about a dragon who learns to cook."


def dspy_request_usage(server: Any, max_tokens: int, prompt: str = RUNAWAY_PROMPT) -> dict[str, Any]:
    """Usage of one uncached DSPy request with ``max_tokens`` to ``server`` (whatever server it is).

    Against a stock llama-cpp-python server this reproduces the runaway: DSPy sends the limit as
    ``max_completion_tokens``, which that server ignores, so it generates until EOS or a full context.
    llama-cpp-python answers a request that fills its context with an HTTP 500 ("could not broadcast
    input array ... into shape (0,)"); that outcome is returned as ``context_full=True``, not raised.
    """
    offline_environment()
    import dspy

    lm = dspy.LM(
        f"openai/{server.model_alias}",
        api_base=server.api_base,
        api_key="local",
        max_tokens=max_tokens,
        temperature=0.0,
        cache=False,
        num_retries=0,
        timeout=600,
    )
    try:
        lm(prompt)
    except Exception as exc:
        if "could not broadcast" not in str(exc):
            raise
        return {"completion_tokens": None, "prompt_tokens": None, "context_full": True}
    usage = lm.history[-1].get("usage") or {}
    return {
        "completion_tokens": int(usage.get("completion_tokens") or 0),
        "prompt_tokens": int(usage.get("prompt_tokens") or 0),
        "context_full": False,
    }


def wire_token_fields(max_tokens: int = 16, model_alias: str = "probe", engine: str = "auto") -> dict:
    """Which token-limit field(s) a ``dspy.LM("openai/…", api_base=…)`` puts on the wire.

    A throwaway loopback HTTP server records the request body DSPy sends and answers with a canned
    completion; nothing is generated. This shows *why* a stock llama-cpp-python server ignored the limit.
    """
    import http.server
    import threading

    offline_environment()
    import dspy

    seen: dict[str, Any] = {}

    class Capture(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's naming)
            import json

            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            seen.update(
                {
                    k: v
                    for k, v in body.items()
                    if k in ("max_tokens", "max_completion_tokens", "max_output_tokens")
                }
            )
            seen["_path"] = self.path
            data = json.dumps(
                {
                    "id": "capture",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "ok"},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            ).encode()
            send_body(self, 200, data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        lm = dspy.LM(
            f"openai/{model_alias}",
            api_base=f"http://127.0.0.1:{server.server_address[1]}/v1",
            api_key="local",
            max_tokens=max_tokens,
            cache=False,
            num_retries=0,
            engine=engine,
        )
        lm("hi")
    finally:
        server.shutdown()
        server.server_close()
    return {k: v for k, v in seen.items() if not k.startswith("_")}
