"""Memory model: paper formulas, DeepSpeed's estimators, the 7B meta-device count."""

import pytest

from nbkit.zero.memory import (
    ModelSize,
    deepspeed_estimate,
    formula_bytes,
    llama2_7b_config,
    memory_table,
    model_size,
)


@pytest.mark.parametrize(
    ("stage", "expected"),
    [(0, 16.0), (1, 4 + 12 / 8), (2, 2 + 14 / 8), (3, 16 / 8)],
)
def test_paper_formula_mixed_precision(stage, expected):
    f = formula_bytes(1000, 8, stage, precision="bf16")
    assert f["total"] == pytest.approx(expected * 1000)


def test_offload_moves_states_to_cpu():
    f = formula_bytes(1000, 4, 3, offload_optimizer=True, offload_param=True)
    assert f["optimizer"] == 0 and f["params"] == 0
    assert f["cpu"] == pytest.approx(12 * 1000 / 4 + 2 * 1000 / 4)


@pytest.mark.parametrize(
    "bad", [dict(stage=4), dict(stage=2, offload_param=True), dict(stage=0, offload_optimizer=True)]
)
def test_bad_combinations_raise(bad):
    stage = bad.pop("stage")
    with pytest.raises(ValueError):
        formula_bytes(1000, 2, stage, **bad)


def test_deepspeed_estimators_are_called_not_copied():
    size = ModelSize("m", 10**9, 10**7)
    z2 = deepspeed_estimate(size, 8, 2)
    assert z2["device"] == pytest.approx(
        2 * 10**9 + 18 * 10**9 / 8
    )  # DeepSpeed counts 18Ψ/N, not the paper's 14Ψ/N
    z3 = deepspeed_estimate(size, 8, 3, offload_optimizer=True, offload_param=True)
    assert z3["cpu"] == pytest.approx(10**9 * 18 * 1.5)  # the 1.5 buffer factor applies to CPU memory
    assert deepspeed_estimate(size, 8, 1)["device"] is None


def test_llama2_7b_counted_on_meta_device():
    size = model_size(llama2_7b_config(), "Llama-2-7B")
    assert size.n_params == 6_738_415_616
    table = memory_table(size, 8)
    assert list(table["stage"]) == [0, 1, 2, 3]
    # 16Ψ per card at stage 0 in bf16 with Adam: 107.8 GB, more than the field notes' 78 GB "peak".
    assert table.loc[0, "formula_device_gib"] * 2**30 == pytest.approx(16 * 6_738_415_616)
