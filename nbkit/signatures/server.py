"""Start, watch and stop a local OpenAI-compatible LLM server for DSPy: llama.cpp's or llama-cpp-python's.

Two kinds of server, one lifecycle:

* ``LlamaCppServer`` runs llama.cpp's own ``llama-server`` binary (built by ``make setup`` on CUDA or with
  ``LLAMA_SERVER=1``, from the llama-cpp-python sdist, see ``scripts/build_llama_server.py``): ``slots``
  requests decode together in one batch (continuous batching) and a request reuses the longest cached prompt
  prefix.
* ``LocalLMServer`` runs ``python -m nbkit.signatures.llama_server`` — llama-cpp-python's own server
  (``llama_cpp.server``) with launch-time fixes, see that module — which answers one request at a time.
  It is what ``auto`` picks wherever the servers run on a CPU (reproducible answers, see
  :func:`resolve_server_kind`) and wherever the binary is absent (:func:`llama_server_binary`).

Each runs on 127.0.0.1 at a free port, in its own process group, with stdout/stderr in a log file, under
a supervisor that ends it when the process that started it disappears (a SIGKILLed kernel). It waits for
``GET /v1/models`` to answer, and stops the whole process group on ``stop()``, on leaving a ``with``
block, and at interpreter exit (``atexit``), so a finished or interrupted notebook leaves no orphaned server.
``LocalLMPool`` puts several of either kind behind one loopback dispatcher.

Failures are one clear message: the server program missing, model file missing, port busy, the server
exiting during start-up or mid-run (naming the server and its log, with the log's last lines).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit.errors import UsageError
from nbkit.model_files import smollm2_gguf_path
from nbkit.procs import core_share, end_group, free_port
from nbkit.runfolder import LOG_DIR_ENV

SERVER_INSTALL = (
    'pip install "llama-cpp-python[server]"   '
    "(the CPU build compiles llama.cpp from source; docs/gpu.md has the CUDA build)"
)
# A llama-server binary to use instead of the one make setup built; "none": never.
LLAMA_SERVER_ENV = "NBKIT_LLAMA_SERVER"
SERVER_KINDS = ("auto", "llama-server", "llama-cpp-python")


class LMServerError(RuntimeError):
    """The local LM server could not start or stopped working; the message says why and where the log is."""


class ModelPathError(UsageError, LMServerError):
    """The model path the user gave is empty, a directory, or missing (bad input: exit 2)."""


def check_model_path(model_path: str | os.PathLike) -> Path:
    """The GGUF file at ``model_path``, or one clear error saying what is wrong with the path."""
    text = os.fspath(model_path)
    if not str(text).strip():
        raise ModelPathError("model path is empty; expected the path of a .gguf model file")
    path = Path(text).expanduser()
    if path.is_dir():
        raise ModelPathError(f"model path {path} is a directory; expected a .gguf model file inside it")
    if not path.is_file():
        raise ModelPathError(f"model file {path} does not exist; expected a .gguf model file")
    return path


_LIVE: weakref.WeakSet[LocalLMServer] = weakref.WeakSet()


def _stop_all_at_exit() -> None:
    for server in list(_LIVE):
        with contextlib.suppress(Exception):
            server.stop()


atexit.register(_stop_all_at_exit)


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def _no_proxy_opener():
    # Loopback only: an http_proxy in the environment must not capture 127.0.0.1 requests.
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_json(url: str, payload: dict | None = None, timeout: float = 120.0) -> dict:
    """GET (payload None) or POST JSON to ``url`` and return the decoded JSON answer."""
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with _no_proxy_opener().open(req, timeout=timeout) as resp:
        return json.loads(resp.read().decode())


def send_body(handler, status: int, data: bytes, content_type: str = "application/json") -> None:
    """Answer an ``http.server`` request with ``data`` (the loopback helpers' one way to reply)."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def check_server_installed() -> None:
    """Raise ``LMServerError`` naming the install command when llama-cpp-python's server is missing."""
    from importlib.util import find_spec

    if find_spec("llama_cpp") is None:
        raise LMServerError(f"llama-cpp-python is not installed; install it with: {SERVER_INSTALL}")
    missing = [
        mod
        for mod in ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
        if find_spec(mod) is None
    ]
    if missing:
        raise LMServerError(
            f"llama-cpp-python's server extra is missing ({', '.join(missing)}); install it with: "
            f"{SERVER_INSTALL}"
        )


def llama_server_binary() -> Path | None:
    """The ``llama-server`` binary to serve with, or None (then llama-cpp-python's server is the fallback).

    ``$NBKIT_LLAMA_SERVER`` names one explicitly (``none`` turns the binary off); otherwise the one
    ``make setup`` installed beside this Python (``scripts/build_llama_server.py``).
    """
    env = os.environ.get(LLAMA_SERVER_ENV)
    if env is not None:
        if env.strip().lower() in ("", "0", "none", "off"):
            return None
        path = Path(env).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise UsageError(
                f"{LLAMA_SERVER_ENV}={env}: not an executable file; expected the path of a llama-server "
                "binary, or 'none'"
            )
        return path
    path = Path(sys.executable).parent / "llama-server"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def resolve_server_kind(kind: str = "auto", device_type: str | None = None) -> str:
    """``"llama-server"`` or ``"llama-cpp-python"`` for the servers of a run on ``device_type``.

    ``auto`` is llama.cpp's batching ``llama-server`` only where the servers run on CUDA and the binary is
    installed; everywhere else llama-cpp-python's server, one request at a time per server. Why: on a CPU
    a request decoded in one batch with others may round differently from the same request alone, so which
    requests happened to share a batch (timing, load) could change an answer and, through the demos a
    compile keeps, a verdict; the unbatched servers give the same answers whatever the load. On CUDA the
    batch is what makes the GPU worth using. ``device_type`` is where the servers run ("cpu"/"cuda"; None:
    CUDA when torch sees it). Asked for by name, a kind is used as asked (``llama-server`` needs its
    binary).
    """
    if kind not in SERVER_KINDS:
        raise UsageError(f"server kind {kind!r}: expected one of {SERVER_KINDS}")
    if kind == "auto":
        binary = llama_server_binary()  # checked first: a bad $NBKIT_LLAMA_SERVER is an error on any device
        on_cuda = _cuda_available() if device_type is None else device_type == "cuda"
        return "llama-server" if on_cuda and binary is not None else "llama-cpp-python"
    if kind == "llama-server" and llama_server_binary() is None:
        raise LMServerError(
            f"the llama-server binary is not installed (looked beside {sys.executable}; ${LLAMA_SERVER_ENV} "
            "unset): "
            "run `make setup LLAMA_SERVER=1` or `python scripts/build_llama_server.py`, or use server kind "
            "'auto'"
        )
    return kind


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def schema_constraint(kind: str, schema: dict) -> dict:
    """The request fields that make server ``kind`` decode only JSON matching ``schema``.

    llama-cpp-python turns ``response_format={"type": "json_object", "schema": ...}`` into a grammar with its
    own converter (``llama_cpp.llama_grammar.json_schema_to_gbnf``: at most one space between JSON tokens).
    llama-server's converter also allows newlines and indentation there, which changes what the model
    writes; so llama-server is sent llama-cpp-python's grammar itself (its ``grammar`` field): the same
    constraint, the same tokens as today's path (tested token by token).
    """
    if kind == "llama-server":
        from llama_cpp.llama_grammar import json_schema_to_gbnf

        return {"grammar": json_schema_to_gbnf(json.dumps(schema))}
    return {"response_format": {"type": "json_object", "schema": schema}}


@dataclass
class ServerStats:
    """What one direct completion measured (``cached_prompt_tokens``: prompt tokens the server took from its
    cache)."""

    completion_tokens: int
    prompt_tokens: int
    seconds: float
    finish_reason: str
    text: str = ""
    cached_prompt_tokens: int | None = None
    tokens: list = field(default_factory=list)  # the generated tokens, when the request asked for logprobs

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / self.seconds if self.seconds > 0 else float("nan")


class _Completions:
    """Direct completions (no DSPy) against ``self.api_base``; shared by one server and a pool."""

    model_alias: str
    host: str
    port: int | None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise LMServerError(f"{type(self).__name__} is not started")
        return f"http://{self.host}:{self.port}"

    @property
    def api_base(self) -> str:
        return self.base_url + "/v1"

    def complete(
        self,
        prompt: str | list[dict],
        *,
        max_tokens: int | None = 64,
        field: str = "max_tokens",
        temperature: float = 0.0,
        timeout: float = 300.0,
        extra: dict | None = None,
    ) -> ServerStats:
        """One chat completion sent directly (no DSPy) with the token limit in ``field``.

        ``prompt`` is the user message, or a whole ``messages`` list; ``extra`` adds request fields
        (``response_format``, ``logprobs``…)."""
        self.ensure_running()
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        payload: dict[str, Any] = {
            "model": self.model_alias,
            "messages": messages,
            "temperature": temperature,
            "seed": 0,
            **(extra or {}),
        }
        if max_tokens is not None:
            payload[field] = max_tokens
        start = time.perf_counter()
        try:
            answer = http_json(self.api_base + "/chat/completions", payload, timeout=timeout)
        except (urllib.error.URLError, ConnectionError) as exc:
            self.ensure_running()
            raise LMServerError(f"request to {self.api_base} failed: {exc}") from exc
        elapsed = time.perf_counter() - start
        usage = answer.get("usage") or {}
        # llama-server reports the prompt tokens it reused in ``timings.cache_n``; llama-cpp-python reports
        # none.
        cached = (answer.get("timings") or {}).get("cache_n")
        return ServerStats(
            completion_tokens=int(usage.get("completion_tokens", 0)),
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            seconds=elapsed,
            finish_reason=str(answer["choices"][0].get("finish_reason")),
            text=str((answer["choices"][0].get("message") or {}).get("content") or ""),
            cached_prompt_tokens=None if cached is None else int(cached),
            tokens=[
                t.get("token") for t in ((answer["choices"][0].get("logprobs") or {}).get("content") or [])
            ],
        )

    def tokens_per_s(
        self, max_tokens: int = 64, prompt: str = "Write a long story about a dragon who learns to cook."
    ) -> ServerStats:
        """Generation throughput on a prompt that does not stop early (includes prompt processing)."""
        return self.complete(prompt, max_tokens=max_tokens)


def _log(log_dir: str | os.PathLike | None, name: str) -> dict[str, Any]:
    """A pool server's log arguments: in ``log_dir`` when given (kept), else placed by :func:`log_place`."""
    return {"log_path": Path(log_dir) / name} if log_dir else {"log_name": name}


def log_place(name: str) -> tuple[Path, bool]:
    """Where a server's log named ``name`` goes, and whether it is removed when the server stops: the
    notebook's folder in the run ``nbkit run`` executes it for (``$NBKIT_LOG_DIR``: kept with the run),
    else the temp folder, removed at stop (an error about the server quotes the log's last lines)."""
    run = os.environ.get(LOG_DIR_ENV)
    if run:
        return Path(run) / name, False
    return Path(tempfile.gettempdir()) / name, True


class LocalLMServer(_Completions):
    """A llama-cpp-python OpenAI-compatible server on loopback, owned by this process (one request at a time).

    >>> with LocalLMServer() as server:            # doctest: +SKIP
    ...     lm = dspy.LM(f"openai/{server.model_alias}", api_base=server.api_base, api_key="local")
    """

    def __init__(
        self,
        model_path: str | os.PathLike | None = None,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        n_ctx: int = 2048,
        n_threads: int | None = None,
        model_alias: str = "smollm2-135m-instruct",
        log_path: str | os.PathLike | None = None,
        startup_timeout: float = 90.0,
        extra_args: tuple[str, ...] = (),
        stock: bool = False,
        log_name: str = "",
        logits_all: bool | None = None,
    ):
        if model_path is None:
            model_path = smollm2_gguf_path()  # raises ModelFileMissing with the install command
        self.model_path = check_model_path(model_path)
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        self.n_ctx = n_ctx
        # One thread per free core: two OpenMP threads on a busy core spin against other work and run
        # slower than one (bench/signatures_server.py measures it).
        self.n_threads = n_threads or max(1, (os.cpu_count() or 2) - 1)
        self.model_alias = model_alias
        # A log path given is the caller's to keep; else the run's folder keeps it, or stop() removes it.
        self.log_path, self._temporary_log = (
            (Path(log_path), False)
            if log_path
            else log_place(log_name or f"nbkit-llama-server-{os.getpid()}.log")
        )
        self.startup_timeout = startup_timeout
        self.extra_args = tuple(extra_args)
        # stock=True: llama-cpp-python's own behaviour (max_completion_tokens ignored), to reproduce the
        # runaway.
        self.stock = stock
        # llama-cpp-python's server computes the logits of every prompt token by default (logits_all), which
        # only a request for logprobs reads: off (None, except for a stock server), a prompt's new tokens are
        # processed about a tenth faster on SmolLM2 (its 49k-token head) and the answers are the same
        # (bench/efficiency.py lm-token checks them against an in-process Llama, whose default is off).
        self.logits_all = stock if logits_all is None else logits_all
        self.process: subprocess.Popen | None = None
        self._log_fh = None

    kind = "llama-cpp-python"
    slots = 1  # requests it decodes at once

    @property
    def label(self) -> str:
        """How errors name this server: its kind and port."""
        return f"{self.kind} server" + (f" on port {self.port}" if self.port else "")

    def check_installed(self) -> None:
        check_server_installed()

    # -- lifecycle -------------------------------------------------------------------------
    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "nbkit.signatures.llama_server",
            "--model",
            str(self.model_path),
            "--model_alias",
            self.model_alias,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
            "--n_threads_batch",
            str(self.n_threads),
            "--logits_all",
            str(self.logits_all).lower(),
            *self.extra_args,
        ]

    def start(self) -> LocalLMServer:
        if self.running:
            return self
        self.check_installed()
        self.port = self.requested_port or free_port(self.host)
        if port_in_use(self.port, self.host):
            raise LMServerError(
                f"port {self.port} on {self.host} is already in use; pick another port or port=None for a "
                "free one"
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_fh = open(self.log_path, "ab")
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        # The launcher is nbkit.signatures.llama_server: make sure the child finds this nbkit even when it
        # is imported from a source checkout rather than installed.
        package_root = str(Path(__file__).resolve().parents[2])
        env["NBKIT_LLAMA_PARENT_PID"] = str(os.getpid())
        env["NBKIT_LLAMA_MAP_MAX_COMPLETION_TOKENS"] = "0" if self.stock else "1"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        self.process = subprocess.Popen(
            self.command(),
            stdout=self._log_fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,  # own process group: stop() kills the server and any children
        )
        _LIVE.add(self)
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LMServerError(
                    f"{self.label} exited during start-up with code {self.process.returncode}; log "
                    f"{self.log_path}:\n{self.log_tail()}"
                )
            try:
                http_json(self.base_url + "/v1/models", timeout=2.0)
                return
            except (urllib.error.URLError, ConnectionError, OSError, json.JSONDecodeError):
                time.sleep(0.25)
        raise LMServerError(
            f"{self.label} did not answer /v1/models within {self.startup_timeout:.0f} s; log "
            f"{self.log_path}:\n{self.log_tail()}"
        )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ensure_running(self) -> None:
        """Raise a readable error when the server died (crash mid-run) instead of letting a call hang."""
        if self.process is None:
            raise LMServerError(f"{self.label} is not running (never started, or stopped)")
        if self.process.poll() is not None:
            raise LMServerError(
                f"{self.label} stopped (exit code {self.process.returncode}) while it was needed; "
                f"log {self.log_path}:\n{self.log_tail()}"
            )

    def stop(self, timeout: float = 10.0) -> None:
        proc, self.process = self.process, None
        if proc is not None:
            end_group(proc, grace_s=timeout)  # the server and anything it left in its process group
        if self._log_fh is not None:
            self._log_fh.close()
            self._log_fh = None
        if self._temporary_log:
            self.log_path.unlink(missing_ok=True)
        _LIVE.discard(self)

    def __enter__(self) -> LocalLMServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self):  # last resort; atexit and stop() are the real paths
        with contextlib.suppress(Exception):
            self.stop(timeout=2.0)

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        # llama.cpp logs hundreds of tensor-load lines; the useful ones are the last.
        return "\n".join(text[-lines:])


class LlamaCppServer(LocalLMServer):
    """llama.cpp's own ``llama-server`` on loopback: ``slots`` requests decoded together, prompt prefixes
    reused.

    Launched through ``python -m nbkit.signatures.llama_server --supervise`` (a small supervisor that ends
    the binary when this process disappears). The flags make a request answered alone get the tokens
    llama-cpp-python's server gives it (:meth:`command` says which flag matches which of its defaults);
    ``n_ctx`` is each slot's context, as it is llama-cpp-python's per-request context. ``n_gpu_layers``
    (0 on CPU, ``"all"`` on CUDA) is passed as ``--n-gpu-layers``; a CPU-only build ignores it.
    """

    kind = "llama-server"

    def __init__(
        self,
        model_path: str | os.PathLike | None = None,
        *,
        slots: int = 4,
        n_gpu_layers: int | str = 0,
        binary: str | os.PathLike | None = None,
        cache_ram_mib: int = 256,
        **kwargs: Any,
    ):
        if not isinstance(slots, int) or isinstance(slots, bool) or slots < 1:
            raise UsageError(f"slots must be a positive int, got {slots!r}")
        if not (
            n_gpu_layers in ("all", "auto")
            or (isinstance(n_gpu_layers, int) and not isinstance(n_gpu_layers, bool) and n_gpu_layers >= 0)
        ):
            raise UsageError(f"n_gpu_layers must be an int >= 0, 'all' or 'auto', got {n_gpu_layers!r}")
        kwargs.setdefault("log_name", f"nbkit-llama.cpp-server-{os.getpid()}.log")
        super().__init__(model_path, **kwargs)
        self.slots = slots
        self.n_gpu_layers = n_gpu_layers
        self.cache_ram_mib = cache_ram_mib
        self.binary = Path(binary) if binary is not None else llama_server_binary()

    def check_installed(self) -> None:
        if self.binary is None or not self.binary.is_file():
            raise LMServerError(
                "the llama-server binary is not installed "
                f"({self.binary or 'none found beside ' + sys.executable}); "
                "run `make setup LLAMA_SERVER=1` or `python scripts/build_llama_server.py`"
            )

    def server_args(self) -> list[str]:
        """llama-server's arguments (without the binary): what to serve, and how to answer as llama-cpp-python
        does."""
        return [
            "--model",
            str(self.model_path),
            "--alias",
            self.model_alias,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--parallel",
            str(self.slots),
            "--ctx-size",
            str(self.n_ctx * self.slots),
            "--no-kv-unified",  # n_ctx per slot
            "--threads",
            str(self.n_threads),
            "--threads-batch",
            str(self.n_threads),
            "--n-gpu-layers",
            str(self.n_gpu_layers),
            # llama-cpp-python's defaults, so one request gets its tokens: 512-token batches, no flash
            # attention, repetition penalty 1.1 over the last 64 tokens (its server's default; DSPy sends
            # none), and plain CPU weight buffers (nbkit's launcher turns llama.cpp's repacking off, see
            # llama_server.py).
            "--batch-size",
            "512",
            "--ubatch-size",
            "512",
            "--flash-attn",
            "off",
            "--repeat-penalty",
            "1.1",
            "--repeat-last-n",
            "64",
            "--no-repack",
            # Prompt states kept in RAM for prefix reuse across slots; the default (8 GiB) is far more than a
            # 135M model needs.
            "--cache-ram",
            str(self.cache_ram_mib),
            "--no-webui",
            "--metrics",
            *self.extra_args,
        ]

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "nbkit.signatures.llama_server",
            "--supervise",
            str(self.binary),
            *self.server_args(),
        ]


class SlotBoard:
    """Which server a pooled request goes to: the one with the fewest requests in flight that has a free slot.

    Why not a FIFO of free slots: as requests finish in any order, such a queue drifts until its front holds
    one server several times, and then 4 requests in flight on 2 servers can all land on one core while the
    other idles. Least-busy first keeps ``k`` requests on ``min(k, servers)`` servers; ties go to the lowest
    index, so the choice is deterministic for a given sequence of events.
    """

    def __init__(
        self, servers: list[Any], slots: int, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.servers = list(servers)
        self.slots = slots
        self.busy = [0] * len(self.servers)
        self._cond = threading.Condition()
        # What the board saw, integrated over time at every change (see :class:`Occupancy`).
        self._clock = clock
        self._start = self._last = clock()
        self._waiting = 0
        self._requests = 0
        self._request_s = self._busy_s = self._queued_s = 0.0

    def _advance(self) -> None:
        now = self._clock()
        dt, self._last = now - self._last, now
        in_flight = sum(self.busy)
        self._request_s += in_flight * dt
        self._queued_s += self._waiting * dt
        if in_flight:
            self._busy_s += dt

    def acquire(self) -> Any:
        with self._cond:
            self._advance()
            self._waiting += 1
            try:
                while True:
                    open_ = [i for i, b in enumerate(self.busy) if b < self.slots]
                    if open_:
                        i = min(open_, key=lambda j: (self.busy[j], j))
                        self._advance()
                        self.busy[i] += 1
                        self._requests += 1
                        return self.servers[i]
                    self._cond.wait()
            finally:
                self._waiting -= 1

    def release(self, server: Any) -> None:
        with self._cond:
            self._advance()
            i = next(j for j, s in enumerate(self.servers) if s is server)
            self.busy[i] -= 1
            self._cond.notify()

    def occupancy(self) -> Occupancy:
        """What the board has seen since it was made (subtract two snapshots for a stretch of work)."""
        with self._cond:
            self._advance()
            return Occupancy(
                seconds=self._last - self._start,
                serving_seconds=self._busy_s,
                request_seconds=self._request_s,
                queued_seconds=self._queued_s,
                requests=self._requests,
                capacity=len(self.servers) * self.slots,
            )


@dataclass(frozen=True)
class Occupancy:
    """How full a pool's slots were: the question "does this section keep the batch full?".

    ``serving_seconds``: wall time with at least one request in a slot; ``request_seconds``: the sum over
    requests of their time in a slot; ``queued_seconds``: the sum of the time requests waited for a free
    slot (non-zero only when every slot was busy). Cumulative; ``later - earlier`` is one stretch's.
    """

    seconds: float
    serving_seconds: float
    request_seconds: float
    queued_seconds: float
    requests: int
    capacity: int

    def __sub__(self, earlier: Occupancy) -> Occupancy:
        return Occupancy(
            seconds=self.seconds - earlier.seconds,
            serving_seconds=self.serving_seconds - earlier.serving_seconds,
            request_seconds=self.request_seconds - earlier.request_seconds,
            queued_seconds=self.queued_seconds - earlier.queued_seconds,
            requests=self.requests - earlier.requests,
            capacity=self.capacity,
        )

    @property
    def mean_in_flight(self) -> float | None:
        """Requests in slots on average while any was (None when nothing was served)."""
        return self.request_seconds / self.serving_seconds if self.serving_seconds > 0 else None

    @property
    def fill(self) -> float | None:
        """``mean_in_flight`` as a share of the slots: 1.0 is a full batch on every server."""
        m = self.mean_in_flight
        return None if m is None else m / self.capacity


class LocalLMPool(_Completions):
    """``n_servers`` single-threaded local servers behind one loopback dispatcher, ``slots`` requests each.

    Why: llama-cpp-python's server answers one request at a time (``llama_outer_lock`` in
    ``llama_cpp/server/app.py``), so DSPy's threads queue behind one decode loop; llama.cpp's
    ``llama-server`` decodes ``slots`` requests in one batch. Here each request goes to the least busy server
    with a free slot (:class:`SlotBoard`; a request waits only when all slots are busy), so ``n`` cores
    decode ``n × slots`` requests at once and ``k`` requests in flight keep ``min(k, n)`` cores busy.
    Clients see one ``api_base``, as with one server; at temperature 0 every server gives the answer the
    others would (same model, same thread count — ``bench/signatures_server.py`` checks it). By default one
    server per core this process may keep busy (:func:`nbkit.procs.core_share`): under ``nbkit run --jobs``
    a kernel's servers stay within its share instead of competing with the other notebooks' kernels.

    ``kind`` is ``"llama-server"`` (:class:`LlamaCppServer`) or ``"llama-cpp-python"``
    (:class:`LocalLMServer`, always one slot); ``"auto"`` is the first only on CUDA with its binary
    installed (see :func:`resolve_server_kind`).
    """

    def __init__(
        self,
        n_servers: int | None = None,
        model_path: str | os.PathLike | None = None,
        *,
        host: str = "127.0.0.1",
        n_ctx: int = 2048,
        n_threads: int = 1,
        model_alias: str = "smollm2-135m-instruct",
        log_dir: str | os.PathLike | None = None,
        startup_timeout: float = 90.0,
        extra_args: tuple[str, ...] = (),
        stock: bool = False,
        kind: str = "llama-cpp-python",
        slots: int = 4,
        n_gpu_layers: int | str = 0,
    ):
        n = core_share() if n_servers is None else n_servers
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise UsageError(f"n_servers must be a positive int, got {n_servers!r}")
        self.kind = resolve_server_kind(kind)
        common = dict(
            host=host,
            n_ctx=n_ctx,
            n_threads=n_threads,
            model_alias=model_alias,
            startup_timeout=startup_timeout,
            extra_args=extra_args,
        )
        if self.kind == "llama-server":
            self.servers = [
                LlamaCppServer(
                    model_path,
                    slots=slots,
                    n_gpu_layers=n_gpu_layers,
                    **common,
                    **_log(log_dir, f"nbkit-llama.cpp-server-{os.getpid()}-{i}.log"),
                )
                for i in range(n)
            ]
        else:
            self.servers = [
                LocalLMServer(
                    model_path,
                    **common,
                    stock=stock,
                    **_log(log_dir, f"nbkit-llama-server-{os.getpid()}-{i}.log"),
                )
                for i in range(n)
            ]
        self.slots = self.servers[0].slots
        self.host = host
        self.model_alias = model_alias
        self.model_path = self.servers[0].model_path
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.port: int | None = None
        self._httpd = None
        self._thread = None
        self._board: SlotBoard | None = None

    def occupancy(self) -> Occupancy | None:
        """How full the slots have been since :meth:`start` (None before it)."""
        return None if self._board is None else self._board.occupancy()

    @property
    def capacity(self) -> int:
        """Requests decoded at once: what a client needs in flight to keep every slot busy."""
        return len(self.servers) * self.slots

    @property
    def label(self) -> str:
        return f"pool of {len(self.servers)} {self.kind} servers"

    @property
    def log_path(self) -> Path:
        return self.servers[0].log_path

    @property
    def running(self) -> bool:
        return self._httpd is not None and all(s.running for s in self.servers)

    def start(self) -> LocalLMPool:
        import http.server
        import threading

        if self.running:
            return self
        try:
            for server in self.servers:
                server.start()
        except BaseException:
            self.stop()
            raise
        board = self._board = SlotBoard(self.servers, self.slots)
        pool = self

        class Dispatch(http.server.BaseHTTPRequestHandler):
            def _forward(self, body: bytes | None):
                server = board.acquire()  # blocks while every server is busy
                try:
                    req = urllib.request.Request(
                        server.base_url + self.path,
                        data=body,
                        method=self.command,
                        headers={"Content-Type": self.headers.get("Content-Type", "application/json")},
                    )
                    try:
                        with _no_proxy_opener().open(req, timeout=900) as resp:
                            status, data, ctype = (
                                resp.status,
                                resp.read(),
                                resp.headers.get("Content-Type", "application/json"),
                            )
                    except urllib.error.HTTPError as exc:  # the server's own 4xx/5xx: pass it on unchanged
                        status, data, ctype = (
                            exc.code,
                            exc.read(),
                            exc.headers.get("Content-Type", "application/json"),
                        )
                    except (urllib.error.URLError, ConnectionError, OSError) as exc:
                        status, ctype = 502, "application/json"
                        data = json.dumps(
                            {"error": {"message": f"{server.label} failed: {exc}; log {server.log_path}"}}
                        ).encode()
                finally:
                    board.release(server)
                send_body(self, status, data, ctype)

            def do_GET(self):  # noqa: N802 (http.server's naming)
                self._forward(None)

            def do_POST(self):  # noqa: N802
                self._forward(self.rfile.read(int(self.headers.get("Content-Length", 0))))

            def log_message(self, *args):
                pass

        self._httpd = http.server.ThreadingHTTPServer((self.host, 0), Dispatch)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="nbkit-lm-pool", daemon=True)
        self._thread.start()
        _LIVE.add(pool)
        return self

    def ensure_running(self) -> None:
        if self._httpd is None:
            raise LMServerError("server pool was never started")
        for server in self.servers:
            server.ensure_running()

    def stop(self, timeout: float = 10.0) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        for server in self.servers:
            server.stop(timeout)
        _LIVE.discard(self)

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(f"[server {i}] {s.log_tail(lines)}" for i, s in enumerate(self.servers))

    def __enter__(self) -> LocalLMPool:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
