"""``python -m nbkit.signatures.llama_server ARGS``: llama-cpp-python's server with three launch-time fixes.

Takes exactly ``python -m llama_cpp.server``'s arguments. Three things differ, each kept as small as
possible:

1. **Token limit field.** OpenAI's current Chat Completions field is ``max_completion_tokens``; DSPy 3.4's
   native engine (lm15, ``openai`` preset) sends only that field. llama-cpp-python's request model knows
   only ``max_tokens`` and silently ignores unknown fields, so such a request generates until EOS or the
   context is full (thousands of tokens for a long answer). A tiny ASGI wrapper copies
   ``max_completion_tokens`` into ``max_tokens`` when only the former is present. Set
   ``NBKIT_LLAMA_MAP_MAX_COMPLETION_TOKENS=0`` to run the stock behaviour (the bug demonstration does).
2. **Extra buffer types off.** llama.cpp repacks Q4 weights into AMX/extra CPU buffers; on an AMX CPU
   the SmolLM2 Q4_1 GGUF then segfaults in the first decode. We load with ``use_extra_bufts=False`` (plain
   CPU buffers). ``NBKIT_LLAMA_EXTRA_BUFTS=1`` restores llama.cpp's default.
3. **Grammar checked on the chosen token first.** llama-cpp-python's sampler chain runs the grammar over
   the whole 49,152-token vocabulary at every step, a large share of a small model's decode step on
   one core. At temperature 0 the answer is the same if the grammar is asked only whether the greedy token is
   allowed, and masks the whole vocabulary only when it is not — llama.cpp's own ``common_sampler`` does
   this ("grammar after"). :class:`GreedyGrammarFirstPick` is that, for greedy requests with a grammar and
   nothing else in the chain; any other request keeps llama-cpp-python's chain.
   ``NBKIT_LLAMA_LAZY_GRAMMAR=0`` restores the stock path (``tests/unit`` compares the two token by token).

With ``NBKIT_LLAMA_PARENT_PID`` set (``LocalLMServer`` sets it), the server also exits on its own when its
parent process disappears, so even a SIGKILLed kernel leaves no orphan.

``python -m nbkit.signatures.llama_server --supervise BINARY ARGS`` runs a server *program* (llama.cpp's
``llama-server``) under the same guard: :func:`supervise` starts it with a parent-death signal, ends it
when nbkit's process disappears, and exits with its exit status.
"""

from __future__ import annotations

import json
import os

from nbkit.procs import die_with_parent


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


class GreedyGrammarFirstPick:
    """Greedy sampling under a grammar that checks the argmax token before masking the vocabulary.

    Same interface as llama-cpp-python's ``LlamaSampler`` where ``Llama`` uses it (``sample``, ``accept``,
    ``reset``, ``close``). Repetition penalties run first, as in the stock chain (penalties → grammar →
    greedy); a mask only sets logits to −inf, so "argmax of the penalised logits, if the grammar allows it"
    is the stock chain's token, ties included (both take the lowest token id).
    """

    def __init__(
        self, llama, grammar, *, repeat_penalty: float, frequency_penalty: float, presence_penalty: float
    ):
        import ctypes

        import llama_cpp
        import numpy as np
        from llama_cpp import _internals as internals

        self._lib, self._ctypes, self._np = llama_cpp, ctypes, np
        self.custom_samplers: list = []
        self._penalties = internals.LlamaSampler()
        self._penalties.add_penalties(
            n_vocab=llama._n_vocab,
            penalty_last_n=llama.last_n_tokens_size,
            penalty_repeat=repeat_penalty,
            penalty_freq=frequency_penalty,
            penalty_present=presence_penalty,
        )
        self._grammar = internals.LlamaSampler()
        self._grammar.add_grammar(llama._model, grammar)
        self.n_vocab = llama._n_vocab
        self._data = (llama_cpp.llama_token_data * self.n_vocab)()
        # llama_token_data is {int32 id; float logit; float p}: a numpy view writes the logits in one copy.
        self._view = np.frombuffer(
            self._data, dtype=np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])
        )
        self._ids = np.arange(self.n_vocab, dtype=np.int32)
        self._one = (llama_cpp.llama_token_data * 1)()
        self.steps = self.masked_steps = 0  # how often the whole vocabulary had to be masked

    def _array(self, data, size):
        return self._lib.llama_token_data_array(data=data, size=size, selected=-1, sorted=False)

    def sample(self, ctx, idx: int = -1) -> int:
        lib, np = self._lib, self._np
        logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(ctx.ctx, idx), shape=(self.n_vocab,))
        view = self._view
        view["id"] = self._ids
        view["logit"] = logits
        view["p"] = 0.0
        full = self._array(self._data, self.n_vocab)
        lib.llama_sampler_apply(self._penalties.sampler, self._ctypes.byref(full))
        token = int(view["id"][int(np.argmax(view["logit"][: full.size]))])
        self._one[0].id, self._one[0].logit, self._one[0].p = token, float(view["logit"][token]), 0.0
        lib.llama_sampler_apply(self._grammar.sampler, self._ctypes.byref(self._array(self._one, 1)))
        self.steps += 1
        if not np.isfinite(
            self._one[0].logit
        ):  # the grammar forbids the greedy token: mask everything, take the best allowed
            self.masked_steps += 1
            lib.llama_sampler_apply(self._grammar.sampler, self._ctypes.byref(full))
            token = int(view["id"][int(np.argmax(view["logit"][: full.size]))])
        self.accept(token)
        return token

    def accept(self, token: int) -> None:
        self._penalties.accept(token)
        self._grammar.accept(token)

    def reset(self) -> None:
        self._penalties.reset()
        self._grammar.reset()

    def close(self) -> None:
        self._penalties.close()
        self._grammar.close()


def use_greedy_grammar_first_pick() -> None:
    """Make ``Llama`` build :class:`GreedyGrammarFirstPick` for greedy requests whose only constraint is a
    grammar."""
    import inspect

    from llama_cpp import Llama

    original = Llama._init_sampler
    if getattr(original, "_nbkit_patched", False):
        return
    signature = inspect.signature(original)  # once, not per request

    def init_sampler(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        if (
            a["temp"] == 0.0
            and a["grammar"] is not None
            and a["logits_processor"] is None
            and a["mirostat_mode"] == 0
        ):
            return GreedyGrammarFirstPick(
                self,
                a["grammar"],
                repeat_penalty=a["repeat_penalty"],
                frequency_penalty=a["frequency_penalty"],
                presence_penalty=a["presence_penalty"],
            )
        return original(self, *args, **kwargs)

    init_sampler._nbkit_patched = True  # type: ignore[attr-defined]
    Llama._init_sampler = init_sampler


class MaxCompletionTokensToMaxTokens:
    """ASGI middleware: give llama-cpp-python a ``max_tokens`` when a client sent
    ``max_completion_tokens``."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if (
            scope.get("type") != "http"
            or scope.get("method") != "POST"
            or not scope.get("path", "").endswith("/completions")
        ):
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
            if (
                isinstance(payload, dict)
                and payload.get("max_tokens") is None
                and payload.get("max_completion_tokens") is not None
            ):
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


def supervise(argv: list[str], parent_pid: int | None) -> int:
    """Run ``argv`` (a server program) until it exits; end it when ``parent_pid`` disappears or we are
    signalled.

    The program cannot watch nbkit's process itself. Here it gets a parent-death signal (so a SIGKILLed
    supervisor takes it along) and this process watches nbkit's: when nbkit's process is gone, the
    program is terminated. Our exit status is the program's (a program killed by signal N: we end by N too).
    """
    import signal
    import subprocess
    import time

    child = subprocess.Popen(argv, preexec_fn=die_with_parent)  # noqa: PLW1509 (single-threaded here: nothing else runs yet)

    def forward(signum, _frame):
        if child.poll() is None:
            child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    while child.poll() is None:
        if parent_pid is not None and os.getppid() != parent_pid:
            child.terminate()
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
            break
        time.sleep(0.5)
    code = child.wait()
    if code < 0:  # killed by a signal: report it the same way to whoever waits for us
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


def main() -> None:
    import sys

    parent = os.environ.get("NBKIT_LLAMA_PARENT_PID")
    if len(sys.argv) > 2 and sys.argv[1] == "--supervise":
        sys.exit(supervise(sys.argv[2:], int(parent) if parent else None))
    if parent:
        exit_with_parent(int(parent))
    if os.environ.get("NBKIT_LLAMA_EXTRA_BUFTS", "0") != "1":
        disable_extra_buffer_types()
    if os.environ.get("NBKIT_LLAMA_LAZY_GRAMMAR", "1") != "0":
        use_greedy_grammar_first_pick()
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
