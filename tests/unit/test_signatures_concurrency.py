"""Notebook 03 keeps a batching server full: evaluations send their requests concurrently, and compiling's
sequential teacher pass is answered from the cache a concurrent pass filled — the same compiled program.

A loopback "LM" stands in for the server: it answers in ChatAdapter's format, right or wrong depending on a
hash of the whole request (so demos and wording matter, deterministically), and counts what reaches it.
"""

import http.server
import json
import threading
import time
import zlib

import pytest

from nbkit.signatures import lm as lm_mod
from nbkit.signatures.server import send_body


class FakeLM:
    """Answers ``[[ ## answer ## ]]`` with the question's expected answer when crc32(request) is even, else
    'wrong'."""

    def __init__(self, delay: float = 0.0):
        self.requests: list[str] = []
        self.in_flight = self.most_in_flight = 0
        lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = json.loads(raw)
                with lock:
                    outer.requests.append(body["messages"][-1]["content"])
                    outer.in_flight += 1
                    outer.most_in_flight = max(outer.most_in_flight, outer.in_flight)
                time.sleep(delay)
                question = (
                    body["messages"][-1]["content"].split("[[ ## question ## ]]")[-1].strip().split("\n")[0]
                )
                answer = (
                    f"A-{question}" if zlib.crc32(json.dumps(body["messages"]).encode()) % 2 == 0 else "wrong"
                )
                content = f"[[ ## answer ## ]]\n{answer}\n\n[[ ## completed ## ]]"
                with lock:
                    outer.in_flight -= 1
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
                                    "message": {"role": "assistant", "content": content},
                                    "finish_reason": "stop",
                                }
                            ],
                            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                        }
                    ).encode(),
                )

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.api_base = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    server = FakeLM(delay=0.05)
    yield server
    server.close()


def _examples(n):
    import dspy

    return [dspy.Example(question=f"q{i}", answer=f"A-q{i}").with_inputs("question") for i in range(n)]


def _metric(example, prediction, trace=None):
    return example.answer == prediction.answer


def _compile(fake, num_threads, optimizer="bootstrap", examples=6, **kwargs):
    import dspy

    from nbkit.signatures.compiling import compile_program

    handle = lm_mod.make_lm(
        "openai/fake", api_base=fake.api_base, max_tokens=16, cache="memory"
    )  # a fresh, empty in-run cache
    fake.requests.clear()
    fake.most_in_flight = 0
    program = compile_program(
        optimizer,
        dspy.Predict("question -> answer"),
        _examples(examples),
        metric=_metric,
        lm=handle.lm,
        max_demos=2,
        num_threads=num_threads,
        **kwargs,
    )
    return program, list(fake.requests)


def _demos(program):
    return [[dict(d) for d in p.demos] for _n, p in program.named_predictors()]


@pytest.mark.parametrize("width", [2, 4])
def test_teacher_pass_prefetched_ahead_compiles_the_same_program_from_the_cache(fake, width):
    sequential, seq_requests = _compile(fake, num_threads=1, examples=16)
    prefetched, pre_requests = _compile(fake, num_threads=width, examples=16)
    assert _demos(prefetched) == _demos(sequential) and _demos(
        sequential
    )  # the same demos, in the same order
    assert prefetched.dump_state() == sequential.dump_state()
    # The prefetch asks the compile examples ``width`` at a time ahead of BootstrapFewShot's own pass, which
    # then reaches the server for nothing: each of its requests is one the prefetch already sent.
    assert set(seq_requests) <= set(pre_requests) and fake.most_in_flight > 1
    # The pass stops once it has its demos (here before the 16th example): the prefetch asked at most
    # width - 1 examples beyond the last one the pass needed, never the whole compile set.
    assert len(seq_requests) < 16
    assert len(seq_requests) <= len(pre_requests) <= len(seq_requests) + width - 1


def test_random_search_compiles_the_same_program_with_the_concurrent_teacher_pass(fake):
    import dspy

    valset = [dspy.Example(question=f"v{i}", answer=f"A-v{i}").with_inputs("question") for i in range(4)]
    sequential, _ = _compile(fake, num_threads=1, optimizer="random_search", valset=valset, num_candidates=1)
    prefetched, _ = _compile(fake, num_threads=4, optimizer="random_search", valset=valset, num_candidates=1)
    assert prefetched.dump_state() == sequential.dump_state()
    from dspy.teleprompt import random_search

    assert (
        random_search.BootstrapFewShot.__name__ == "BootstrapFewShot"
    )  # the prefetching subclass is gone afterwards


def test_no_prefetch_without_a_cache_or_with_one_thread(fake):
    import dspy

    from nbkit.signatures.compiling import compile_program

    handle = lm_mod.make_lm("openai/fake", api_base=fake.api_base, max_tokens=16, cache="off")
    fake.requests.clear()
    compile_program(
        "bootstrap",
        dspy.Predict("question -> answer"),
        _examples(6),
        metric=_metric,
        lm=handle.lm,
        max_demos=2,
        num_threads=4,
    )
    off = len(fake.requests)
    _, one_thread = _compile(fake, num_threads=1)
    assert off == len(one_thread)  # cache off: nothing to prefetch into, the sequential pass alone


def test_evaluation_keeps_num_threads_requests_in_flight(fake):
    import dspy

    from nbkit.signatures.cases import load_knowledge_base
    from nbkit.signatures.evaluation import evaluate_program

    slow = FakeLM(delay=0.3)
    try:
        handle = lm_mod.make_lm("openai/fake", api_base=slow.api_base, max_tokens=16, cache="off")
        kb_examples = [
            dspy.Example(
                symptoms=f"s{i}", case_id=f"c{i}", slice="standard", conditions=["Hypertension"]
            ).with_inputs("symptoms")
            for i in range(16)
        ]
        result = evaluate_program(
            dspy.Predict("symptoms -> answer"),
            kb_examples,
            lm=handle.lm,
            kb=load_knowledge_base(),
            num_threads=8,
            progress=False,
            output_fields=("answer",),
        )
        assert len(result.records) == 16 and len(slow.requests) == 16
        assert slow.most_in_flight == 8  # the batch is kept full: as many requests as threads
    finally:
        slow.close()
