"""The rank worker runs unchanged under torchrun: a two-node job on loopback (c10d rendezvous).

Two ``torchrun --nnodes 2 --nproc-per-node 1`` agents (node ranks 0 and 1) meet at one c10d
endpoint, each starts one ``nbkit.zero.worker`` rank, and the stage-3 rung (persistence threshold 0)
must leave each rank holding half of the parameters.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_two_node_torchrun_stage3_halves_the_parameters(tmp_path):
    import json

    from nbkit.procs import free_port
    from nbkit.zero.config import LadderConfig
    from nbkit.zero.ladder import write_spec

    cfg = LadderConfig(
        launches=1,
        stages=(3,),
        world_size=2,
        steps=1,
        precision="fp32",
        show_persistence=False,
        sub_group_elements=0,
        hidden_size=64,
        num_hidden_layers=2,
        checkpoint=False,
    )
    spec = write_spec(cfg, tmp_path / "spec.json")
    port = free_port()
    torchrun = Path(sys.executable).with_name("torchrun")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    agents = []
    for node in (0, 1):
        log = open(tmp_path / f"node{node}.log", "wb")
        agents.append(
            (
                subprocess.Popen(
                    [
                        str(torchrun),
                        "--nnodes",
                        "2",
                        "--nproc-per-node",
                        "1",
                        "--node-rank",
                        str(node),
                        "--rdzv-backend",
                        "c10d",
                        "--rdzv-endpoint",
                        f"127.0.0.1:{port}",
                        "--rdzv-id",
                        "nbkit-two-node",
                        "--max-restarts",
                        "0",
                        "-m",
                        "nbkit.zero.worker",
                        str(spec),
                    ],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                ),
                log,
            )
        )
    try:
        for proc, _log in agents:
            proc.wait(timeout=300)
    finally:
        for proc, log in agents:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
            log.close()
    logs = "\n".join((tmp_path / f"node{n}.log").read_text(errors="replace")[-2000:] for n in (0, 1))
    assert [p.returncode for p, _ in agents] == [0, 0], logs
    rows = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert all(r["ok"] and r["done"] for r in rows), logs
    results = [r["results"][0] for r in rows]
    assert {r["rank"] for r in results} == {0, 1} and all(r["world_size"] == 2 for r in results)
    n = results[0]["n_params"]
    for r in results:
        # fp32 stage 3: each rank's parameter shard is 4Ψ/2 bytes (DeepSpeed pads partitions slightly).
        assert r["bytes"]["params"] == pytest.approx(4 * n / 2, rel=0.02), r["bytes"]
    assert sum(r["bytes"]["params"] for r in results) == pytest.approx(4 * n, rel=0.02)
    assert results[0]["eval_loss"] == pytest.approx(results[1]["eval_loss"], rel=1e-6)
