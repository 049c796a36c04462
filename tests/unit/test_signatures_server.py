"""The local LM server manager and LM construction: bad input without a server, plus one real-server test."""

import asyncio
import json
import os
import signal
import socket

import pytest

from nbkit.signatures import lm as lm_mod
from nbkit.signatures import server as srv
from nbkit.signatures.llama_server import MaxCompletionTokensToMaxTokens


def test_missing_model_file_is_named(tmp_path):
    with pytest.raises(srv.LMServerError, match="does not exist"):
        srv.LocalLMServer(tmp_path / "nope.gguf")


def test_busy_port_is_refused_before_starting(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        server = srv.LocalLMServer(model, port=port)
        with pytest.raises(srv.LMServerError, match=f"port {port} .* already in use"):
            server.start()
        assert server.process is None


def test_missing_server_extra_names_install_command(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "sse_starlette" else real(name, *a))
    with pytest.raises(srv.LMServerError, match=r"server extra is missing \(sse_starlette\).*llama-cpp-python\[server\]"):
        srv.check_server_installed()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(srv.LMServerError, match="llama-cpp-python is not installed"):
        srv.check_server_installed()


def test_server_that_dies_at_startup_reports_its_log(tmp_path, monkeypatch):
    model = tmp_path / "broken.gguf"
    model.write_bytes(b"this is not a gguf file")
    server = srv.LocalLMServer(model, log_path=tmp_path / "server.log", startup_timeout=60)
    with pytest.raises(srv.LMServerError, match="exited during start-up") as info:
        server.start()
    assert str(tmp_path / "server.log") in str(info.value)
    assert server.process is None and not server.running


def test_remote_model_without_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(lm_mod.MissingApiKey, match="OPENAI_API_KEY"):
        lm_mod.make_lm("openai/gpt-4o-mini")
    monkeypatch.delenv("MY_KEY", raising=False)
    with pytest.raises(lm_mod.MissingApiKey, match="MY_KEY"):
        lm_mod.make_lm("anthropic/claude-x", api_key_env="MY_KEY")
    assert lm_mod.resolve_api_key("ollama_chat/llama3", None) is None
    with pytest.raises(ValueError, match="max_tokens"):
        lm_mod.make_lm("ollama_chat/llama3", max_tokens=0)


def test_remote_model_key_comes_from_env_and_is_not_in_repr(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-secret-123")
    handle = lm_mod.make_lm("openai/gpt-4o-mini", api_key_env="MY_KEY", max_tokens=32)
    assert handle.server is None and handle.lm.kwargs["api_key"] == "sk-secret-123"
    assert "sk-secret-123" not in repr(handle.info)


def test_dspy_sends_max_completion_tokens_on_the_wire():
    # The root cause of the 3,800-token request: DSPy's native engine names the limit
    # max_completion_tokens, which llama-cpp-python's request model ignores.
    fields = lm_mod.wire_token_fields(16)
    assert fields.get("max_completion_tokens") == 16 or fields.get("max_tokens") == 16


def _run_asgi(body: dict, path="/v1/chat/completions"):
    seen = {}

    async def app(scope, receive, send):
        message = await receive()
        seen["body"] = json.loads(message["body"])
        seen["headers"] = dict(scope["headers"])

    async def receive():
        return {"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}

    async def send(_):
        pass

    scope = {"type": "http", "method": "POST", "path": path, "headers": [(b"content-length", b"1")]}
    # In a thread of its own: the browser tier's Playwright session keeps an event loop registered on
    # this thread, where asyncio.run would refuse to start.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, MaxCompletionTokensToMaxTokens(app)(scope, receive, send)).result()
    return seen


def test_launcher_maps_max_completion_tokens_to_max_tokens():
    seen = _run_asgi({"messages": [], "max_completion_tokens": 7})
    assert seen["body"]["max_tokens"] == 7
    assert int(seen["headers"][b"content-length"]) == len(json.dumps(seen["body"]).encode())
    assert _run_asgi({"messages": [], "max_tokens": 3, "max_completion_tokens": 9})["body"]["max_tokens"] == 3
    assert "max_tokens" not in _run_asgi({"messages": []})["body"]


@pytest.mark.slow
def test_real_server_enforces_limits_and_stops_cleanly(tmp_path):
    pytest.importorskip("llama_cpp")
    import dspy

    server = srv.LocalLMServer(log_path=tmp_path / "server.log", n_ctx=512)
    with server:
        pid = server.process.pid
        assert server.complete("Write a long story about a dragon.", max_tokens=8).completion_tokens <= 8
        assert server.complete("Write a long story about a dragon.", max_tokens=8, field="max_completion_tokens").completion_tokens <= 8
        lm = dspy.LM(f"openai/{server.model_alias}", api_base=server.api_base, api_key="local", max_tokens=8, cache=False)
        assert lm_mod.check_token_limit(lm, 8)["completion_tokens"] <= 8
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # the whole process group is gone
    # A crash mid-run becomes a readable error with the log, not a hang.
    server = srv.LocalLMServer(log_path=tmp_path / "server2.log", n_ctx=256).start()
    try:
        os.killpg(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=10)
        with pytest.raises(srv.LMServerError, match="stopped"):
            server.complete("hi", max_tokens=4)
    finally:
        server.stop()


class _SlowBackend:
    """A stand-in for one llama.cpp server: answers every POST after ``delay`` s with its own name."""

    def __init__(self, name, delay=0.5):
        import http.server
        import threading
        import time

        outer = self
        self.in_flight = self.most_in_flight = 0
        lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    outer.in_flight += 1
                    outer.most_in_flight = max(outer.most_in_flight, outer.in_flight)
                time.sleep(delay)
                with lock:
                    outer.in_flight -= 1
                srv.send_body(self, 200, json.dumps({"server": name}).encode())

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        outer.running = True

    def start(self):
        return self

    def ensure_running(self):
        pass

    def stop(self, timeout=10.0):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.running = False


def test_pool_sends_concurrent_requests_to_idle_servers(tmp_path):
    import time
    from concurrent.futures import ThreadPoolExecutor

    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    pool = srv.LocalLMPool(2, model)
    backends = pool.servers = [_SlowBackend("a"), _SlowBackend("b")]
    with pool:
        url = pool.api_base + "/chat/completions"
        start = time.perf_counter()
        with ThreadPoolExecutor(4) as ex:
            answers = list(ex.map(lambda _: srv.http_json(url, {"messages": []})["server"], range(4)))
        seconds = time.perf_counter() - start
    # 4 requests of 0.5 s on 2 servers: two rounds (~1 s; one at a time would take 2 s), and never
    # more than one request on a server at once (llama-cpp-python would only queue it).
    assert sorted(answers) == ["a", "a", "b", "b"]
    assert [b.most_in_flight for b in backends] == [1, 1]
    assert 0.95 < seconds < 1.9
    assert not pool.running


@pytest.mark.slow
def test_grammar_first_pick_gives_the_stock_chains_tokens():
    """At temperature 0 the launcher's grammar-after-argmax sampler must answer exactly as llama-cpp-python's
    chain (penalties → grammar over the vocabulary → greedy), on steps where the grammar allows the greedy
    token and on steps where it does not (the masked path)."""
    pytest.importorskip("llama_cpp")
    import llama_cpp
    from llama_cpp import LlamaGrammar

    from nbkit.model_files import smollm2_gguf_path
    from nbkit.signatures import llama_server as ls

    ls.disable_extra_buffer_types()
    llm = llama_cpp.Llama(str(smollm2_gguf_path()), n_threads=1, n_ctx=512, verbose=False, seed=0)
    schema = {"type": "object", "properties": {"diagnoses": {"type": "array", "items": {"type": "string"}}, "confidence": {"type": "number"}},
              "required": ["diagnoses", "confidence"]}  # fmt: skip
    grammars = [LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False),
                LlamaGrammar.from_string('root ::= ("yes" | "no") " because " [a-z ]+ "."', verbose=False)]  # fmt: skip
    prompts = ["Fever, cough and shortness of breath for three days: answer in JSON.", "Is the sky green? Answer yes or no."]

    def answers():
        out = []
        for grammar in grammars:
            for prompt in prompts:
                llm.reset()
                msg = [{"role": "user", "content": prompt}]
                out.append(llm.create_chat_completion(msg, max_tokens=40, temperature=0.0, grammar=grammar, repeat_penalty=1.1)["choices"][0]["message"]["content"])
        return out

    stock = answers()
    made = []
    original_init = ls.GreedyGrammarFirstPick.__init__

    def record(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        made.append(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ls.GreedyGrammarFirstPick, "__init__", record)
        mp.setattr(llama_cpp.Llama, "_init_sampler", llama_cpp.Llama._init_sampler)  # undone after the test
        ls.use_greedy_grammar_first_pick()
        lazy = answers()
    assert lazy == stock
    steps, masked = sum(s.steps for s in made), sum(s.masked_steps for s in made)
    assert len(made) == 4 and 0 < masked < steps  # both paths ran


@pytest.mark.slow
def test_real_pool_answers_like_one_server(tmp_path):
    pytest.importorskip("llama_cpp")
    from concurrent.futures import ThreadPoolExecutor

    prompts = ["Name one cause of chest pain.", "Name one cause of a cough."]
    with srv.LocalLMServer(n_threads=1, n_ctx=256, log_path=tmp_path / "one.log") as one:
        expected = [one.complete(p, max_tokens=8).text for p in prompts]
    with srv.LocalLMPool(2, n_ctx=256, log_dir=tmp_path) as pool:
        with ThreadPoolExecutor(2) as ex:
            got = list(ex.map(lambda p: pool.complete(p, max_tokens=8).text, prompts))
        pids = [s.process.pid for s in pool.servers]
    assert got == expected and all(expected)  # temperature 0: the same answers, served concurrently
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)


def test_local_model_alias_changes_with_the_model_file_and_settings(tmp_path):
    """DSPy's disk cache is keyed on the model name: the local alias must miss when the GGUF or a setting changes."""
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    a.write_bytes(b"model weights one")
    b.write_bytes(b"model weights two")
    alias = lm_mod.local_model_alias(a)
    assert alias.startswith("smollm2-135m-instruct-") and alias == lm_mod.local_model_alias(a)
    assert alias != lm_mod.local_model_alias(b)  # another model file
    assert alias != lm_mod.local_model_alias(a, n_ctx=4096)  # another context size
    assert alias != lm_mod.local_model_alias(a, extra_args=("--n_gpu_layers", "-1"))  # another server setting
    a.write_bytes(b"model weights one, retrained")  # same path, new bytes (size and mtime change)
    assert alias != lm_mod.local_model_alias(a)


def test_cache_mode_and_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("NBKIT_CACHE_DIR", str(tmp_path))
    assert lm_mod.cache_dir() == tmp_path / "dspy"
    with pytest.raises(ValueError, match="cache must be one of"):
        lm_mod.make_lm("ollama_chat/llama3", cache="yes")


def test_calls_summary_separates_served_and_cached_calls():
    from types import SimpleNamespace

    from nbkit.signatures.experiments import SignatureSession

    history = [{"usage": {"completion_tokens": 40}, "timestamp": "1"}, {"usage": {}, "timestamp": "2"},
               {"usage": {"completion_tokens": 128}, "timestamp": "3"}, {"usage": {}, "timestamp": "4"}]  # fmt: skip
    session = SignatureSession(lm_mod.LMHandle(SimpleNamespace(history=history), "dummy", 128), None, [], None)
    assert session.calls_summary() == {"calls": 4, "served": 2, "from_cache": 2, "completion_tokens": 168, "max_completion_tokens": 128,
                                       "over_max_tokens": 0, "max_tokens": 128}  # fmt: skip


def test_disk_cache_answers_a_rerun_and_misses_on_another_model_or_prompt(tmp_path, monkeypatch):
    """A fresh process (a new dspy cache object) answers a repeated request from disk; another model name or
    another prompt reaches the server. A loopback listener counts what reaches it."""
    import http.server
    import threading

    from nbkit.signatures.server import send_body

    seen = []

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's naming)
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            seen.append(body["model"])
            send_body(self, 200, json.dumps({
                "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            }).encode())  # fmt: skip

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv("NBKIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    base = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        def ask(model, prompt):
            handle = lm_mod.make_lm(model, api_base=base, max_tokens=8, cache="disk")  # configures a new cache: memory empty
            handle.lm(prompt)
            return bool(handle.lm.history[-1]["usage"])  # served (usage) or from cache (none)

        assert ask("openai/smollm2-aaa", "hello") is True
        assert ask("openai/smollm2-aaa", "hello") is False  # the re-run: from disk
        assert ask("openai/smollm2-bbb", "hello") is True  # another model fingerprint misses
        assert ask("openai/smollm2-aaa", "hello again") is True  # another prompt misses
        assert seen == ["smollm2-aaa", "smollm2-bbb", "smollm2-aaa"]
        assert (tmp_path / "dspy").is_dir()
    finally:
        httpd.shutdown()
        httpd.server_close()
