"""``python -m nbkit.signatures.llama_server ARGS``: llama-cpp-python's server with two launch-time fixes.

Takes exactly ``python -m llama_cpp.server``'s arguments. Two things differ, both found on this project's
machine and kept as small as possible:

1. **Token limit field.** OpenAI's current Chat Completions field is ``max_completion_tokens``; DSPy 3.4's
   native engine (lm15, ``openai`` preset) sends only that field. llama-cpp-python's request model knows
   only ``max_tokens`` and silently ignores unknown fields, so such a request generates until EOS or the
   context is full (thousands of tokens: the ~3,800-token DSPy call in the issue). A tiny ASGI wrapper copies
   ``max_completion_tokens`` into ``max_tokens`` when only the former is present. Set
   ``NBKIT_LLAMA_MAP_MAX_COMPLETION_TOKENS=0`` to run the stock behaviour (the bug demonstration does).
2. **Extra buffer types off.** llama.cpp repacks Q4 weights into AMX/extra CPU buffers; on this AMX CPU
   the SmolLM2 Q4_1 GGUF then segfaults in the first decode. We load with ``use_extra_bufts=False`` (plain
   CPU buffers). ``NBKIT_LLAMA_EXTRA_BUFTS=1`` restores llama.cpp's default.

With ``NBKIT_LLAMA_PARENT_PID`` set (``LocalLMServer`` sets it), the server also exits on its own when its
parent process disappears, so even a SIGKILLed kernel leaves no orphan.
"""

from __future__ import annotations

import json
import os


def disable_extra_buffer_types() -> None:
    """Make every Llama created afterwards load its weights without extra (repacked/AMX) buffers."""
    import llama_cpp.llama_cpp as lib

    original = lib.llama_model_default_params
    if getattr(original, "_nbkit_patched", False):
        return

    def default_params():
        params = original()
        params.use_extra_bufts = False
        return params

    default_params._nbkit_patched = True  # type: ignore[attr-defined]
    lib.llama_model_default_params = default_params


class MaxCompletionTokensToMaxTokens:
    """ASGI middleware: give llama-cpp-python a ``max_tokens`` when a client sent ``max_completion_tokens``."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "http" or scope.get("method") != "POST" or not scope.get("path", "").endswith("/completions"):
            return await self.app(scope, receive, send)
        chunks = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            payload = json.loads(body or b"{}")
            if isinstance(payload, dict) and payload.get("max_tokens") is None and payload.get("max_completion_tokens") is not None:
                payload["max_tokens"] = payload["max_completion_tokens"]
                body = json.dumps(payload).encode()
        except json.JSONDecodeError:
            pass  # not JSON: let the server produce its own 4xx
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        return await self.app({**scope, "headers": headers}, replay, send)


def exit_with_parent(parent_pid: int, interval_s: float = 1.0) -> None:
    """Exit when the process that started us is gone (a killed kernel must not leave a server behind)."""
    import threading
    import time

    def watch():
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent_pid:
                os._exit(0)

    threading.Thread(target=watch, name="nbkit-parent-watch", daemon=True).start()


def main() -> None:
    parent = os.environ.get("NBKIT_LLAMA_PARENT_PID")
    if parent:
        exit_with_parent(int(parent))
    if os.environ.get("NBKIT_LLAMA_EXTRA_BUFTS", "0") != "1":
        disable_extra_buffer_types()
    if os.environ.get("NBKIT_LLAMA_MAP_MAX_COMPLETION_TOKENS", "1") != "0":
        import llama_cpp.server.app as server_app

        create_app = server_app.create_app

        def wrapped_create_app(*args, **kwargs):
            return MaxCompletionTokensToMaxTokens(create_app(*args, **kwargs))

        import llama_cpp.server.__main__ as server_main

        server_main.create_app = wrapped_create_app
    from llama_cpp.server.__main__ import main as server_main_fn

    server_main_fn()


if __name__ == "__main__":
    main()
