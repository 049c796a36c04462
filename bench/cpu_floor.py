"""What the default workbook cannot go below on this CPU: the cost of the work its rows need, at the speed the
hardware gives it.

    .venv/bin/python bench/cpu_floor.py [--run FOLDER] [--reference-cpu-s CPU_S] [--goal 0.6]

Measures, on one thread (a kernel's share under ``nbkit run --jobs`` on 2 cores), idle:

* **16-bit training on this CPU**: a ``torch.nn.functional.linear`` forward and backward at the ZeRO ladder's
  width (hidden 256, 64 tokens, 1,024 outputs) in float32, bfloat16 and float16, GFLOP/s and the ratio. The
  ladder trains in bf16 (its byte counts are bf16's); where the CPU has no bf16 units PyTorch has no fast
  kernel for it.
* **SmolLM2-135M (the shipped Q4_1 GGUF) in llama.cpp**, one thread, plain CPU buffers as notebook 03's
  servers load it: prompt tokens per second (a 253-token prompt) and milliseconds per generated token.
* **Prefix reuse changes no answer**: the last logits of a prompt evaluated alone and after a request that
  shares its first tokens (llama-cpp-python's prefix match), compared bit for bit.

With ``--run FOLDER`` (a ``nbkit run`` output folder holding notebook 03's server logs) it reads that run's LM
work — requests, prompt tokens evaluated and reused, tokens generated — and prints its floor in CPU-s at the
speeds above; with ``--reference-cpu-s`` (the reference run's CPU-s) it prints that floor as a share of the
goal's budget (``--goal`` × the reference).
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path


def gemm_rates(threads: int = 1, reps: int = 50) -> dict[str, float]:
    """GFLOP/s of one linear layer's forward + backward per dtype (the ladder's shape)."""
    import torch

    torch.set_num_threads(threads)
    out = {}
    tokens, width, outputs = 64, 256, 1024
    flops = 3 * 2 * tokens * width * outputs  # forward, grad of the input, grad of the weight
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        gen = torch.Generator().manual_seed(0)
        a = torch.randn(tokens, width, generator=gen).to(dtype)
        w = torch.randn(outputs, width, generator=gen).to(dtype).requires_grad_(True)
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            for _ in range(reps):
                torch.nn.functional.linear(a, w).sum().backward()
            best = min(best, (time.perf_counter() - t) / reps)
        out[str(dtype).removeprefix("torch.")] = flops / best / 1e9
    return out


def _llama(path: str):
    import llama_cpp

    from nbkit.signatures.llama_server import disable_extra_buffer_types

    disable_extra_buffer_types()
    return llama_cpp.Llama(path, n_ctx=2048, n_threads=1, n_threads_batch=1, verbose=False, seed=0)


def lm_rates(path: str) -> dict[str, float]:
    """Prompt tokens per second and milliseconds per generated token, one thread, best of two."""
    llm = _llama(path)
    prompt = "You are a helpful assistant. " * 40 + "\nQuestion: what is the capital of France? Answer:"
    tokens = llm.tokenize(prompt.encode())
    prefill, decode = 0.0, float("inf")
    for _ in range(2):
        llm.reset()
        t = time.perf_counter()
        llm.eval(tokens)
        prefill = max(prefill, len(tokens) / (time.perf_counter() - t))
        t = time.perf_counter()
        # the prompt is already evaluated: this times generation alone
        out = llm.create_completion(prompt, max_tokens=64, temperature=0.0)
        n = max(1, out["usage"]["completion_tokens"])
        decode = min(decode, (time.perf_counter() - t) / n * 1e3)
    return {"prompt_tok_s": prefill, "decode_ms": decode, "prompt_tokens": len(tokens)}


def prefix_reuse_identical(path: str) -> tuple[bool, float]:
    """Whether a prompt's last logits are the same bits evaluated alone and after a request sharing its
    prefix."""
    import numpy as np

    llm = _llama(path)
    system = (
        "<|im_start|>system\nYou answer questions about biology. Fields: question, answer.<|im_end|>\n" * 5
    )
    first = system + "<|im_start|>user\nWhat is a cell?<|im_end|>\n<|im_start|>assistant\n"
    second = system + "<|im_start|>user\nWhat does a mitochondrion do?<|im_end|>\n<|im_start|>assistant\n"

    def last_logits(warm: str | None) -> tuple[np.ndarray, int]:
        llm.reset()
        if warm:
            next(llm.generate(llm.tokenize(warm.encode()), temp=0.0))
        tokens = llm.tokenize(second.encode())
        reused = llm.longest_token_prefix(llm.input_ids, tokens)
        next(llm.generate(tokens, temp=0.0))  # generate's own prefix match: only the rest is evaluated
        return np.array(llm.scores[len(tokens) - 1], dtype=np.float32), reused

    (alone, _), (after, reused) = last_logits(None), last_logits(first)
    if reused == 0:
        raise RuntimeError("the second prompt reused no prefix: the check compared nothing")
    return bool(np.array_equal(alone, after)), float(np.abs(alone - after).max())


_PROMPT = re.compile(r"prompt eval time =\s+([\d.]+) ms /\s+(\d+) tokens")
_EVAL = re.compile(r":\s+eval time =\s+([\d.]+) ms /\s+(\d+) runs")  # generation's line, not the prompt's
_HIT = re.compile(r"(\d+) prefix-match hit, remaining (\d+) prompt tokens")


def run_lm_work(folder: Path) -> dict[str, int]:
    """Requests, prompt tokens evaluated and reused, tokens generated: from a run's llama-cpp-python logs."""
    work = {"requests": 0, "prompt_evaluated": 0, "prompt_reused": 0, "generated": 0}
    logs = sorted(folder.glob("nbkit-llama-server-*.log"))
    if not logs:
        raise FileNotFoundError(f"{folder}: no nbkit-llama-server-*.log (notebook 03's server logs) in it")
    for log in logs:
        for line in log.read_text(errors="replace").splitlines():
            if m := _PROMPT.search(line):
                work["requests"] += 1
                work["prompt_evaluated"] += int(m[2])
            elif m := _EVAL.search(line):
                work["generated"] += int(m[2])
            elif m := _HIT.search(line):
                work["prompt_reused"] += int(m[1])
    return work


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, help="a nbkit run folder with notebook 03's server logs")
    ap.add_argument("--reference-cpu-s", type=float, help="the reference run's CPU-s (the goal's base)")
    ap.add_argument("--goal", type=float, default=0.6, help="the goal as a share of the reference (0.6)")
    ap.add_argument("--gguf", help="the GGUF to time (default: the shipped SmolLM2)")
    args = ap.parse_args(argv)
    work = None
    if args.run:  # read before a minute of measuring, so a wrong folder fails at once
        if not args.run.is_dir():
            ap.error(f"--run {args.run}: not a folder; expected a nbkit run folder")
        try:
            work = run_lm_work(args.run)
        except FileNotFoundError as e:
            ap.error(str(e))  # exit 2, one line

    from nbkit.model_files import smollm2_gguf_path

    gguf = args.gguf or str(smollm2_gguf_path())
    rates = gemm_rates()
    print("linear forward + backward, one thread (64 × 256 → 1,024):")
    for name, r in rates.items():
        print(f"  {name:<9} {r:6.1f} GFLOP/s   float32 ÷ {name}: {rates['float32'] / r:5.1f}×")
    lm = lm_rates(gguf)
    print(
        f"{Path(gguf).name}, one thread: prompt {lm['prompt_tok_s']:.0f} tok/s "
        f"({lm['prompt_tokens']} tokens), "
        f"generation {lm['decode_ms']:.1f} ms/token"
    )
    same, diff = prefix_reuse_identical(gguf)
    print(f"prefix reuse: last logits {'bit-identical' if same else 'differ'} (max |Δ| {diff:g})")
    if work is not None:
        w = work
        floor = w["prompt_evaluated"] / lm["prompt_tok_s"] + w["generated"] * lm["decode_ms"] / 1e3
        total = w["prompt_evaluated"] + w["prompt_reused"]
        print(
            f"{args.run}: {w['requests']} LM requests; prompt tokens {total:,} of which "
            f"{w['prompt_reused']:,} reused ({w['prompt_reused'] / max(total, 1):.0%}) and "
            f"{w['prompt_evaluated']:,} evaluated; {w['generated']:,} generated"
        )
        print(f"  its LM floor at these speeds, one core: {floor:,.0f} CPU-s")
        if args.reference_cpu_s:
            budget = args.goal * args.reference_cpu_s
            print(
                f"  goal budget {args.goal} × {args.reference_cpu_s:,.0f} = {budget:,.0f} CPU-s; "
                f"the LM floor alone is {floor / budget:.2f} of it"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
