"""The LM one notebook-03 context talks to: started once, its local servers, its grammar copies, its calls.

:class:`LMService` starts the LM on first use (:meth:`LMService.start`): with the local model, ``servers``
single-threaded llama.cpp servers (0 = one per core of the kernel's share, ``nbkit.procs.core_share``) behind
one dispatcher — llama-cpp-python's server, one request at a time each, wherever they run on a CPU, so an
answer never depends on which requests shared a batch; llama.cpp's batching ``llama-server`` with ``slots``
requests each on CUDA or when asked for (``server.resolve_server_kind``). DSPy then evaluates with as many
threads as the servers have slots, so every slot stays busy (see ``server.LocalLMPool``). On CUDA one server
offloads every layer instead (``--n-gpu-layers``; the fallback needs a CUDA build of llama-cpp-python,
docs/gpu.md). Any other ``lm_model`` is a ``dspy.LM`` model string, reached with four requests at once.

For ``json_grammar`` it keeps one copy of the LM per signature that sends the signature's JSON schema
(:meth:`LMService.lm_for`), and it accounts for every call its LMs made (:meth:`LMService.calls_summary`) and
for how full the local servers' slots were (:meth:`LMService.slot_fill`). Tests build one around a ready
``LMHandle`` (``dspy.utils.DummyLM``, no server).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nbkit.procs import core_share
from nbkit.signatures.config import SessionConfig
from nbkit.signatures.lm import LOCAL, make_lm
from nbkit.signatures.metrics import LMCalls, SlotFill
from nbkit.signatures.server import resolve_server_kind, schema_constraint

if TYPE_CHECKING:
    from nbkit.signatures.lm import LMHandle
    from nbkit.signatures.server import LocalLMPool, Occupancy

REMOTE_THREADS = 4  # a remote API serves requests concurrently on its own


def local_server_kwargs(cfg: SessionConfig, device_type: str, kind: str, cores: int) -> dict:
    """``LocalLMPool``'s arguments for ``cfg`` on ``device_type`` ("cpu"/"cuda") with ``kind`` of server and
    ``cores`` usable cores.

    On CUDA: one server with every layer on the GPU (llama-server: ``--n-gpu-layers all``; llama-cpp-python:
    ``--n_gpu_layers -1``). On CPU: ``cfg.servers`` servers (0 = one per core), one thread each, no GPU
    layers.
    """
    on_cuda = device_type == "cuda"
    kwargs: dict[str, Any] = {
        "n_ctx": cfg.n_ctx,
        "n_servers": 1 if on_cuda else (cfg.servers or cores),
        "kind": kind,
    }
    if kind == "llama-server":
        kwargs.update(slots=cfg.slots, n_gpu_layers="all" if on_cuda else 0)
    else:
        kwargs["extra_args"] = ("--n_gpu_layers", "-1") if on_cuda else ()
    return kwargs


class LMService:
    """The LM of one context: ``start(device_type)`` once, then ``lm``, ``server``, ``num_threads``,
    grammar copies (``lm_for``), and the accounting of every call. ``close()`` stops the servers."""

    def __init__(self, cfg: SessionConfig, handle: LMHandle | None = None) -> None:
        self.cfg = cfg
        self._handle = handle
        self._copies: dict[str, Any] = {}
        self.num_threads = 1

    def start(self, device_type: str) -> LMHandle:
        """Start the LM (once): the local llama.cpp servers on ``device_type``, or the client of any
        ``dspy.LM`` model."""
        if self._handle is None:
            cfg = self.cfg
            local = cfg.lm_model == LOCAL
            kind = resolve_server_kind(cfg.server, device_type) if local else cfg.server
            self._handle = make_lm(
                cfg.lm_model,
                api_base=cfg.api_base or None,
                api_key_env=cfg.api_key_env or None,
                max_tokens=cfg.max_tokens,
                server_kwargs=local_server_kwargs(cfg, device_type, kind, core_share()),
                cache=cfg.cache,
            )
            self.num_threads = self._handle.server.capacity if local else REMOTE_THREADS
        return self._handle

    @property
    def started(self) -> bool:
        return self._handle is not None

    @property
    def handle(self) -> LMHandle:
        if self._handle is None:
            raise RuntimeError("the LM has not started yet (the context starts it on first use)")
        return self._handle

    @property
    def lm(self) -> Any:
        return self.handle.lm

    @property
    def server(self) -> LocalLMPool | None:
        return self.handle.server

    def serving(self) -> str:
        """Who answers and how many requests at once (one line for the notebook)."""
        return f"{self.server.label if self.server else 'remote'}: {self.num_threads} parallel requests"

    def lm_for(self, adapter: str, signature: Any) -> Any:
        """The LM to use with ``adapter``: for ``json_grammar`` a copy that sends ``signature``'s JSON
        schema (a signature class).

        The local server turns the schema into a grammar (``server.schema_constraint``: llama-cpp-python
        gets ``response_format={"type": "json_object", "schema": ...}``, llama-server the same grammar
        built by llama-cpp-python's converter), so the decoder can only emit JSON of the contract's *shape*
        (fields, types). Bounds (confidence in [0, 1], <= 50 words) are not part of the grammar and still
        have to be checked after parsing.
        """
        if adapter != "json_grammar":
            return self.lm
        if self.server is None:
            raise ValueError(
                "adapter 'json_grammar' needs the local llama.cpp server (LM_MODEL='local'); use 'json' for "
                "other models"
            )
        key = f"{signature.__module__}.{signature.__qualname__}@{id(signature)}"
        if key not in self._copies:
            from dspy.adapters.json_adapter import _get_structured_outputs_response_format

            schema = _get_structured_outputs_response_format(signature).model_json_schema()
            self._copies[key] = self.lm.copy(**schema_constraint(self.server.kind, schema))
        return self._copies[key]

    def history(self) -> list[dict]:
        """Every call this service's LMs made (the base LM and its grammar copies), oldest first."""
        if self._handle is None:
            return []
        entries = [e for lm in (self.lm, *self._copies.values()) for e in lm.history]
        return sorted(entries, key=lambda e: str(e.get("timestamp", "")))

    def calls_summary(self) -> LMCalls:
        """LM calls so far: ``served`` by the LM in this run and answered ``from_cache`` (see
        :class:`LMCalls`; a cached answer was generated, and counted, by the run that first served it)."""
        entries = self.history()
        served = [
            int((e.get("usage") or {}).get("completion_tokens") or 0) for e in entries if e.get("usage")
        ]
        return LMCalls(
            calls=len(entries),
            served=len(served),
            from_cache=len(entries) - len(served),
            completion_tokens=sum(served),
            max_completion_tokens=max(served, default=0),
            over_max_tokens=sum(t > self.handle.max_tokens for t in served),
            max_tokens=self.handle.max_tokens,
        )

    def occupancy(self) -> Occupancy | None:
        """How full the local servers' slots have been since they started (None for a remote LM or before
        the LM starts); subtract two snapshots for one stretch of work."""
        if self._handle is None or self.server is None:
            return None
        return self.server.occupancy()

    def slot_fill(self, since: Occupancy | None = None) -> SlotFill | None:
        """:meth:`occupancy` (since the snapshot ``since``) as rounded figures to record."""
        o = self.occupancy()
        if o is None:
            return None
        o = o - since if since is not None else o
        return SlotFill(
            capacity=o.capacity,
            requests=o.requests,
            serving_seconds=round(o.serving_seconds, 1),
            mean_in_flight=None if o.mean_in_flight is None else round(o.mean_in_flight, 2),
            fill=None if o.fill is None else round(o.fill, 3),
            queued_seconds=round(o.queued_seconds, 1),
        )

    def close(self) -> None:
        """Stop the LM's servers (if it started any)."""
        if self._handle is not None:
            self._handle.close()
