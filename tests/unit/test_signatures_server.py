"""The local LM server manager and LM construction: bad input without a server, plus one real-server test."""

import asyncio
import json
import os
import signal
import socket
import sys
from pathlib import Path

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
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "sse_starlette" else real(name, *a)
    )
    with pytest.raises(
        srv.LMServerError, match=r"server extra is missing \(sse_starlette\).*llama-cpp-python\[server\]"
    ):
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
    # The root cause of the reported 3,800-token request: DSPy's native engine names the limit
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


def test_a_server_log_is_kept_with_the_run_or_removed_from_the_temp_folder(tmp_path, monkeypatch):
    """Under `nbkit run` ($NBKIT_LOG_DIR: the notebook's folder in the run) the log stays with the run;
    elsewhere it lives in the temp folder only while the server does (an error quotes its last lines)."""
    import tempfile

    model = tmp_path / "broken.gguf"
    model.write_bytes(b"this is not a gguf file")
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own_tmp))
    monkeypatch.delenv("NBKIT_LOG_DIR", raising=False)
    server = srv.LocalLMServer(model, startup_timeout=60)
    assert server.log_path.parent == own_tmp
    with pytest.raises(srv.LMServerError, match="exited during start-up") as info:
        server.start()
    assert str(info.value).split(":\n", 1)[1].strip(), "the error quotes the log"
    assert list(own_tmp.iterdir()) == []
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.setenv("NBKIT_LOG_DIR", str(run))
    server = srv.LocalLMServer(model, startup_timeout=60)
    with pytest.raises(srv.LMServerError, match="exited during start-up"):
        server.start()
    assert [p.name for p in run.iterdir()] == [f"nbkit-llama-server-{os.getpid()}.log"]
    assert list(own_tmp.iterdir()) == []


@pytest.mark.slow
def test_real_server_enforces_limits_and_stops_cleanly(tmp_path):
    pytest.importorskip("llama_cpp")
    import dspy

    server = srv.LocalLMServer(log_path=tmp_path / "server.log", n_ctx=512)
    with server:
        pid = server.process.pid
        assert server.complete("Write a long story about a dragon.", max_tokens=8).completion_tokens <= 8
        assert (
            server.complete(
                "Write a long story about a dragon.", max_tokens=8, field="max_completion_tokens"
            ).completion_tokens
            <= 8
        )
        lm = dspy.LM(
            f"openai/{server.model_alias}",
            api_base=server.api_base,
            api_key="local",
            max_tokens=8,
            cache=False,
        )
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
        self.spans: list[tuple[float, float]] = []  # (start, end) of each request it served
        lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    outer.in_flight += 1
                    outer.most_in_flight = max(outer.most_in_flight, outer.in_flight)
                began = time.monotonic()
                time.sleep(delay)
                with lock:
                    outer.in_flight -= 1
                    outer.spans.append((began, time.monotonic()))
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
    from concurrent.futures import ThreadPoolExecutor

    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    pool = srv.LocalLMPool(2, model)
    backends = pool.servers = [_SlowBackend("a"), _SlowBackend("b")]
    with pool:
        url = pool.api_base + "/chat/completions"
        with ThreadPoolExecutor(4) as ex:
            answers = list(ex.map(lambda _: srv.http_json(url, {"messages": []})["server"], range(4)))
    # 4 requests on 2 servers: both servers work at the same time (some request of one overlaps some
    # request of the other), and never more than one request on a server at once (llama-cpp-python
    # would only queue it). Read from the servers' own spans, not from the wall clock.
    assert sorted(answers) == ["a", "a", "b", "b"]
    assert [b.most_in_flight for b in backends] == [1, 1]
    a, b = backends
    assert any(s1 < e2 and s2 < e1 for s1, e1 in a.spans for s2, e2 in b.spans), (a.spans, b.spans)
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
    schema = {
        "type": "object",
        "properties": {
            "diagnoses": {"type": "array", "items": {"type": "string"}},
            "confidence": {"type": "number"},
        },
        "required": ["diagnoses", "confidence"],
    }
    grammars = [
        LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False),
        LlamaGrammar.from_string('root ::= ("yes" | "no") " because " [a-z ]+ "."', verbose=False),
    ]
    prompts = [
        "Fever, cough and shortness of breath for three days: answer in JSON.",
        "Is the sky green? Answer yes or no.",
    ]

    def answers():
        out = []
        for grammar in grammars:
            for prompt in prompts:
                llm.reset()
                msg = [{"role": "user", "content": prompt}]
                out.append(
                    llm.create_chat_completion(
                        msg, max_tokens=40, temperature=0.0, grammar=grammar, repeat_penalty=1.1
                    )["choices"][0]["message"]["content"]
                )
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
    """DSPy's disk cache is keyed on the model name: the local alias must miss when the GGUF or a setting
    changes."""
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
    monkeypatch.setenv("NBKIT_CACHE", str(tmp_path))
    monkeypatch.delenv("NBKIT_CACHE_DIR", raising=False)
    assert lm_mod.cache_dir() == tmp_path / "dspy"
    with pytest.raises(ValueError, match="cache must be one of"):
        lm_mod.make_lm("ollama_chat/llama3", cache="yes")


def test_calls_summary_separates_served_and_cached_calls():
    from types import SimpleNamespace

    from nbkit.signatures.config import SessionConfig
    from nbkit.signatures.metrics import LMCalls
    from nbkit.signatures.serving import LMService

    history = [
        {"usage": {"completion_tokens": 40}, "timestamp": "1"},
        {"usage": {}, "timestamp": "2"},
        {"usage": {"completion_tokens": 128}, "timestamp": "3"},
        {"usage": {}, "timestamp": "4"},
    ]
    service = LMService(SessionConfig(), lm_mod.LMHandle(SimpleNamespace(history=history), "dummy", 128))
    assert service.calls_summary() == LMCalls(
        calls=4,
        served=2,
        from_cache=2,
        completion_tokens=168,
        max_completion_tokens=128,
        over_max_tokens=0,
        max_tokens=128,
    )


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
            send_body(
                self,
                200,
                json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": "ok"},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
                    }
                ).encode(),
            )

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv("NBKIT_CACHE", str(tmp_path))
    monkeypatch.delenv("NBKIT_CACHE_DIR", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    base = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:

        def ask(model, prompt):
            handle = lm_mod.make_lm(
                model, api_base=base, max_tokens=8, cache="disk"
            )  # configures a new cache: memory empty
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


# -- llama.cpp's llama-server: kind, arguments, supervisor (no binary needed) ---------------------------
def _fake_model(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    return model


def _fake_binary(tmp_path, name="llama-server"):
    binary = tmp_path / name
    binary.write_text("#!/bin/sh\nexit 0\n")
    binary.chmod(0o755)
    return binary


def test_server_kind_is_the_binary_when_present_else_the_fallback(tmp_path, monkeypatch):
    monkeypatch.setenv(srv.LLAMA_SERVER_ENV, "none")
    assert srv.llama_server_binary() is None and srv.resolve_server_kind("auto") == "llama-cpp-python"
    with pytest.raises(srv.LMServerError, match="llama-server binary is not installed.*make setup"):
        srv.resolve_server_kind("llama-server")
    binary = _fake_binary(tmp_path)
    monkeypatch.setenv(srv.LLAMA_SERVER_ENV, str(binary))
    assert srv.llama_server_binary() == binary
    # On a CPU the unbatched servers, whose answers do not depend on which requests share a batch, even with
    # the binary installed; on CUDA the batching binary; asked for by name, either.
    assert srv.resolve_server_kind("auto", "cpu") == "llama-cpp-python"
    assert srv.resolve_server_kind("auto", "cuda") == "llama-server"
    assert srv.resolve_server_kind("llama-server", "cpu") == "llama-server"
    assert srv.resolve_server_kind("llama-cpp-python", "cuda") == "llama-cpp-python"
    monkeypatch.setattr(srv, "_cuda_available", lambda: False)
    assert srv.resolve_server_kind("auto") == "llama-cpp-python"  # no device given: CUDA as torch sees it
    monkeypatch.setattr(srv, "_cuda_available", lambda: True)
    assert srv.resolve_server_kind("auto") == "llama-server"


@pytest.mark.parametrize(
    ("env", "kind", "pattern"),
    [
        (
            "{tmp}/missing-binary",
            "auto",
            r"NBKIT_LLAMA_SERVER=.*missing-binary: not an executable file; expected the path of a "
            r"llama-server binary",
        ),
        ("{tmp}", "auto", r"not an executable file"),
        (
            "none",
            "vllm",
            r"server kind 'vllm': expected one of \('auto', 'llama-server', 'llama-cpp-python'\)",
        ),
    ],
)
def test_bad_server_choice(tmp_path, monkeypatch, env, kind, pattern):
    from nbkit.errors import UsageError

    monkeypatch.setenv(srv.LLAMA_SERVER_ENV, env.format(tmp=tmp_path))
    with pytest.raises(UsageError, match=pattern):
        srv.resolve_server_kind(kind)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"slots": 0}, r"slots must be a positive int, got 0"),
        ({"slots": True}, r"slots must be a positive int, got True"),
        ({"n_gpu_layers": -1}, r"n_gpu_layers must be an int >= 0, 'all' or 'auto', got -1"),
        ({"n_gpu_layers": "most"}, r"got 'most'"),
    ],
)
def test_bad_llama_server_settings(tmp_path, kwargs, pattern):
    from nbkit.errors import UsageError

    with pytest.raises(UsageError, match=pattern):
        srv.LlamaCppServer(_fake_model(tmp_path), binary=_fake_binary(tmp_path), **kwargs)


def _flag(args, name):
    return args[args.index(name) + 1]


def test_pool_size_follows_the_kernels_core_share(tmp_path, monkeypatch):
    """Under ``nbkit run --jobs`` a kernel keeps its share of the cores busy, its LM servers included: one
    server per core of the share, not one per core of the machine."""
    from nbkit.procs import CORE_SHARE_ENV, usable_cores

    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    monkeypatch.delenv(CORE_SHARE_ENV, raising=False)
    assert len(srv.LocalLMPool(model_path=model).servers) == len(usable_cores())
    monkeypatch.setenv(CORE_SHARE_ENV, "1")
    assert len(srv.LocalLMPool(model_path=model).servers) == 1
    assert len(srv.LocalLMPool(3, model).servers) == 3  # asked for by number, as asked


def test_llama_server_arguments_on_cpu_and_on_cuda(tmp_path, monkeypatch):
    """The CUDA path cannot run here; its arguments are what can be checked, through the same code as the CPU
    path."""
    from nbkit.signatures.config import SessionConfig
    from nbkit.signatures.serving import local_server_kwargs

    model, binary = _fake_model(tmp_path), _fake_binary(tmp_path)
    monkeypatch.setenv(srv.LLAMA_SERVER_ENV, str(binary))
    cpu = local_server_kwargs(SessionConfig(), "cpu", "llama-server", cores=2)
    assert cpu == {"n_ctx": 2048, "n_servers": 2, "kind": "llama-server", "slots": 4, "n_gpu_layers": 0}
    cuda = local_server_kwargs(SessionConfig(slots=8), "cuda", "llama-server", cores=2)
    assert cuda == {"n_ctx": 2048, "n_servers": 1, "kind": "llama-server", "slots": 8, "n_gpu_layers": "all"}
    fallback_cuda = local_server_kwargs(SessionConfig(), "cuda", "llama-cpp-python", cores=2)
    assert fallback_cuda["extra_args"] == ("--n_gpu_layers", "-1") and fallback_cuda["n_servers"] == 1
    assert (
        local_server_kwargs(SessionConfig(servers=3), "cpu", "llama-cpp-python", cores=2)["extra_args"] == ()
    )

    pool = srv.LocalLMPool(
        model_path=model, **{k: v for k, v in cuda.items() if k != "n_ctx"}, n_ctx=cuda["n_ctx"]
    )
    (server,) = pool.servers
    server.port = 12345
    args = server.server_args()
    assert _flag(args, "--n-gpu-layers") == "all" and _flag(args, "--parallel") == "8"
    assert (
        _flag(args, "--ctx-size") == str(2048 * 8) and "--no-kv-unified" in args
    )  # n_ctx per slot, as llama-cpp-python's per request
    # llama-cpp-python's defaults that decide tokens, so one request alone gets its answer
    assert (
        _flag(args, "--repeat-penalty") == "1.1"
        and _flag(args, "--repeat-last-n") == "64"
        and _flag(args, "--flash-attn") == "off"
    )
    assert _flag(args, "--batch-size") == "512" and "--no-repack" in args
    assert server.command()[:4] == [
        sys.executable,
        "-m",
        "nbkit.signatures.llama_server",
        "--supervise",
    ] and server.command()[4] == str(binary)
    cpu_pool = srv.LocalLMPool(model_path=model, **cpu)
    assert [_flag(s.server_args(), "--n-gpu-layers") for s in cpu_pool.servers] == [
        "0",
        "0",
    ] and cpu_pool.capacity == 8


def test_local_alias_separates_server_kinds_and_keeps_the_fallbacks_name(tmp_path, monkeypatch):
    model = _fake_model(tmp_path)
    monkeypatch.setenv(srv.LLAMA_SERVER_ENV, str(_fake_binary(tmp_path)))
    fallback = lm_mod.local_model_alias(model)
    assert (
        lm_mod.local_model_alias(model, kind="llama-cpp-python", slots=4) == fallback
    )  # the fallback's cache entries stay valid
    batched = lm_mod.local_model_alias(model, kind="llama-server", slots=4)
    assert batched != fallback
    assert batched != lm_mod.local_model_alias(model, kind="llama-server", slots=8)
    assert batched != lm_mod.local_model_alias(model, kind="llama-server", slots=4, n_gpu_layers="all")
    (tmp_path / "llama-server.json").write_text(
        '{"llama_cpp_python": "another"}'
    )  # another build of the binary
    assert batched != lm_mod.local_model_alias(model, kind="llama-server", slots=4)


def test_supervisor_ends_the_server_program_when_its_parent_is_killed(tmp_path):
    """A SIGKILLed kernel must not leave a llama-server behind: the supervisor watches its parent."""
    import subprocess
    import time

    import psutil

    pid_file = tmp_path / "pids"
    parent_code = (
        "import os, subprocess, sys, time\n"
        "env = dict(os.environ, NBKIT_LLAMA_PARENT_PID=str(os.getpid()))\n"
        "p = subprocess.Popen([sys.executable, '-m', 'nbkit.signatures.llama_server', '--supervise', "
        "'sleep', '300'], env=env)\n"
        "time.sleep(1.5)\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(300)\n"
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [str(Path(srv.__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]
        ),
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], env=env)
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        supervisor = psutil.Process(int(pid_file.read_text()))
        (program,) = supervisor.children()
        assert program.cmdline()[:2] == ["sleep", "300"]
        parent.kill()
        parent.wait()
        gone, alive = psutil.wait_procs([supervisor, program], timeout=10)
        assert not alive, f"left running after the parent was killed: {alive}"
    finally:
        if parent.poll() is None:
            parent.kill()


# -- llama-server, real binary: same tokens as today, a dead server mid-evaluation --------------------------
def _needs_llama_server():
    pytest.importorskip("llama_cpp")
    if srv.llama_server_binary() is None:
        pytest.skip("llama-server is not built (make setup builds it; scripts/build_llama_server.py)")


def _dspy_messages(n):
    import dspy

    from nbkit.signatures.cases import load_cases, load_knowledge_base, split_cases, to_examples
    from nbkit.signatures.contracts import signature_by_name

    examples = to_examples(split_cases(load_cases(None, load_knowledge_base()), 0).dev)[:n]
    return [dspy.JSONAdapter().format(signature_by_name("typed"), [], dict(ex.inputs())) for ex in examples]


@pytest.mark.slow
def test_llama_server_alone_gives_llama_cpp_pythons_tokens(tmp_path):
    """One request at a time, llama-server must answer token for token as llama-cpp-python's server (today's
    path): plain prompts, notebook 03's DSPy prompts, under the contract's JSON-schema grammar, and the
    token limit in either field."""
    _needs_llama_server()
    from dspy.adapters.json_adapter import _get_structured_outputs_response_format

    from nbkit.signatures.contracts import signature_by_name

    schema = _get_structured_outputs_response_format(signature_by_name("typed")).model_json_schema()
    plain = ["Name one cause of chest pain.", "Write a long story about a dragon."]
    dspy_prompts = _dspy_messages(3)
    requests = [(p, False, 24, "max_tokens") for p in plain] + [
        (plain[1], False, 12, "max_completion_tokens")
    ]
    requests += [(m, False, 40, "max_tokens") for m in dspy_prompts] + [
        (m, True, 64, "max_tokens") for m in dspy_prompts
    ]

    def answers(server):
        out = []
        for prompt, constrained, limit, field in requests:
            extra = (
                srv.schema_constraint(server.kind, schema) if constrained else {}
            )  # what ctx.lm_for sends each kind
            st = server.complete(
                prompt, max_tokens=limit, field=field, extra={"logprobs": True, "top_logprobs": 1, **extra}
            )
            assert st.completion_tokens <= limit and len(st.tokens) == st.completion_tokens
            tokens = list(st.tokens)
            if server.kind == "llama-server" and st.finish_reason == "stop" and tokens and tokens[-1] == "":
                # llama-server also lists (and counts in completion_tokens) the end-of-turn token it stopped
                # on; llama-cpp-python leaves it out. The generated text is compared without it.
                tokens.pop()
            out.append({"tokens": tokens, "text": st.text, "finish": st.finish_reason})
        return out

    # logits_all: llama-cpp-python returns per-token logprobs only with every position's logits
    today = srv.LocalLMServer(n_threads=1, n_ctx=1024, log_path=tmp_path / "today.log", logits_all=True)
    with today:
        expected = answers(today)
    with srv.LlamaCppServer(n_threads=1, n_ctx=1024, slots=1, log_path=tmp_path / "batching.log") as batching:
        got = answers(batching)
    differing = [i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b]
    assert not differing, [(requests[i][1:], got[i], expected[i]) for i in differing]
    assert any(e["finish"] == "length" for e in expected) and all(e["tokens"] for e in expected)
    assert all(
        json.loads(e["text"])
        for e, r in zip(expected, requests, strict=True)
        if r[1] and e["finish"] == "stop"
    )  # the grammar held


@pytest.mark.slow
def test_server_killed_mid_evaluation_is_one_error_naming_it_and_no_process_survives(tmp_path):
    """A local server SIGKILLed while an evaluation runs: the evaluation stops with one LMServerError that
    names the server and its log (no retry, no list of per-question connection errors), and stopping the pool
    leaves no server process behind."""
    pytest.importorskip("llama_cpp")
    import threading
    import time

    import dspy
    import psutil

    from nbkit.signatures.cases import load_cases, load_knowledge_base, split_cases, to_examples
    from nbkit.signatures.contracts import signature_by_name
    from nbkit.signatures.evaluation import evaluate_program

    kind = srv.resolve_server_kind("auto")
    kb = load_knowledge_base()
    examples = to_examples(split_cases(load_cases(None, kb), 0).dev)[:16]
    pool = srv.LocalLMPool(2, n_ctx=1024, log_dir=tmp_path, kind=kind, slots=2)
    with pool:
        procs = [psutil.Process(s.process.pid) for s in pool.servers]
        procs += [c for p in procs for c in p.children(recursive=True)]
        victim = pool.servers[0]
        lm = dspy.LM(
            f"openai/{pool.model_alias}",
            api_base=pool.api_base,
            api_key="local",
            max_tokens=48,
            temperature=0.0,
            cache=False,
            num_retries=0,
        )
        killed = {}

        def kill_after_first_answer():
            while not lm.history:
                time.sleep(0.05)
            killed["at"] = time.monotonic()
            os.killpg(victim.process.pid, signal.SIGKILL)

        threading.Thread(target=kill_after_first_answer, daemon=True).start()
        with pytest.raises(srv.LMServerError) as info:
            evaluate_program(
                dspy.Predict(signature_by_name("typed")),
                examples,
                lm=lm,
                kb=kb,
                adapter=dspy.JSONAdapter(),
                num_threads=pool.capacity,
                server=pool,
                progress=False,
            )
        seconds = time.monotonic() - killed["at"]
        message = str(info.value)
        assert (
            f"{kind} server on port {victim.port} stopped (exit code -9)" in message
            and str(victim.log_path) in message
        )
        assert len(lm.history) < len(examples)  # the remaining questions were not sent
        assert seconds < 120, seconds
    gone, alive = psutil.wait_procs(procs, timeout=15)
    assert not alive, f"server processes left running: {alive}"


def test_schema_constraint_sends_llama_cpp_pythons_grammar_to_llama_server():
    pytest.importorskip("llama_cpp")
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    assert srv.schema_constraint("llama-cpp-python", schema) == {
        "response_format": {"type": "json_object", "schema": schema}
    }
    grammar = srv.schema_constraint("llama-server", schema)["grammar"]
    assert (
        'root ::= "{" space answer-kv "}" space' in grammar and 'space ::= " "?' in grammar
    )  # one optional space, no newlines


def test_slot_board_sends_each_request_to_the_least_busy_server():
    """4 requests on 2 servers of 4 slots land 2 + 2 whatever order earlier ones finished in; a 9th waits."""
    import threading

    from nbkit.signatures.server import SlotBoard

    a, b = object(), object()
    board = SlotBoard([a, b], slots=4)
    first = [board.acquire() for _ in range(4)]
    assert first == [a, b, a, b]
    board.release(b)
    board.release(b)  # b finished twice: a FIFO of free slots would now hand out b, a, b...
    assert board.busy == [2, 0]
    assert [board.acquire(), board.acquire()] == [b, b]
    for _ in range(4):
        board.acquire()
    assert board.busy == [4, 4]
    got = []
    t = threading.Thread(target=lambda: got.append(board.acquire()))
    t.start()
    t.join(0.2)
    assert t.is_alive() and not got  # every slot busy: it waits
    board.release(a)
    t.join(2)
    assert got == [a]


def test_slot_board_integrates_how_full_the_slots_were():
    """A fake clock: 1 request for 2 s, then 3 for 1 s, then a 4th waits 1 s for a slot of 2 × 2."""
    import threading

    from nbkit.signatures.server import SlotBoard

    now = [0.0]
    a, b = object(), object()
    board = SlotBoard([a, b], slots=2, clock=lambda: now[0])
    before = board.occupancy()
    assert before.mean_in_flight is None and before.fill is None  # nothing served yet
    board.acquire()
    now[0] = 2.0
    board.acquire(), board.acquire()
    now[0] = 3.0
    third = board.occupancy() - before
    assert third.serving_seconds == 3.0 and third.request_seconds == 1 * 2 + 3 * 1
    assert third.mean_in_flight == 5 / 3 and third.fill == 5 / 12 and third.requests == 3
    board.acquire()  # the 4th slot: now full
    waiter = threading.Thread(target=board.acquire)
    waiter.start()
    while board._waiting == 0:  # the 5th is waiting for a slot
        threading.Event().wait(0.01)
    now[0] = 4.0
    board.release(a)
    waiter.join(2)
    o = board.occupancy() - before
    assert o.queued_seconds == 1.0 and o.requests == 5 and o.capacity == 4
    assert o.request_seconds == 5 + 4 * 1 and o.serving_seconds == 4.0 and o.seconds == 4.0
    idle = board.occupancy()
    now[0] = 10.0
    for s in (a, b, b):
        board.release(s)
    now[0] = 12.0
    assert (board.occupancy() - idle).request_seconds == 4 * 6 + 1 * 2  # 4 in slots until t=10, then 1
