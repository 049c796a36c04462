"""``nbkit diagnose``: the bundled example end to end, the report's three shapes, and the bad-input table."""

from __future__ import annotations

import json

import pytest

from nbkit.cli import main as nbkit_main
from nbkit.diagnose.cli import main

EXAMPLE = ["axolotl_fft.yaml", "--gpus-per-node", "8", "--gpu-memory", "80", "--no-audit"]


@pytest.fixture(scope="module")
def example_json(tmp_path_factory):
    out = tmp_path_factory.mktemp("diag") / "d.json"
    rc = main([*EXAMPLE, "--format", "json", "--output", str(out)])
    return rc, json.loads(out.read_text())


def test_the_bundled_example_shows_its_mistakes_and_does_not_fit(example_json):
    rc, d = example_json
    assert rc == 1 and d["exit_code"] == 1
    by = {c["setting"]: c for c in d["couplings"]}
    assert by["gradient accumulation"]["status"] == "error"
    assert (
        by["gradient accumulation"]["trainer"].startswith("axolotl_fft.yaml:")
        and "ds_zero2.json: gradient_accumulation_steps = 4" in by["gradient accumulation"]["deepspeed"]
    )
    assert by["LR schedule"]["status"] == "warning" and by["gradient clipping"]["status"] == "warning"
    assert (
        by["micro batch per GPU"]["status"] == "auto"
        and by["global batch (train_batch_size)"]["resolved"] == "auto → 256"
    )
    assert (
        by["zero_optimization.reduce_bucket_size"]["resolved"] == "auto → 16,777,216"
    )  # 4096² from the model's hidden_size
    fit = d["fit"]
    assert (
        fit["verdict"] == "does not fit"
        and fit["fixes"]
        and all(x["verdict"] == "fits" for x in fit["fixes"])
    )
    assert (
        fit["accuracy"]["command"].startswith(".venv/bin/python bench/zero_peak.py")
        and "prediction" in fit["accuracy"]["gpu"]
    )
    assert d["problems"]["coupling errors"] >= 1 and d["problems"]["fit"] == 1


def test_report_shapes(example_json, tmp_path, capsys):
    _, d = example_json
    assert {
        "config",
        "format",
        "deepspeed",
        "model",
        "world",
        "gpu_memory_gib",
        "couplings",
        "fit",
        "audit",
        "answer",
        "rows",
        "problems",
        "exit_code",
    } <= set(d)
    assert all(set(c) >= {"claim", "measured", "verdict", "rule", "n", "why"} for c in d["rows"])
    assert main(EXAMPLE) == 1
    text = capsys.readouterr().out
    for section in (
        "coupling (trainer config ↔ ds_config):",
        "will it fit:",
        "accuracy: predicted ÷ measured",
        "changes that make it fit",
        "error       gradient accumulation",
        "summary:",
    ):
        assert section in text, section
    page = tmp_path / "d.html"
    assert main([*EXAMPLE, "--format", "html", "--output", str(page)]) == 1
    html = page.read_text()
    assert html.startswith("<!doctype html>") and "<table id='ledger'>" in html
    assert html.count("<tr data-verdict=") == len(d["rows"]) and "id='verdict-filter'" in html


def test_the_report_leads_with_its_answer_in_every_format(example_json, tmp_path, capsys, monkeypatch):
    """Will it start (the errors that stop the job, one line each), will it fit (the predicted peak against
    the GPU, the cheapest fix with its figure), then the table whose rows say error / warning / ok and
    fits / does not fit: the same words in text, JSON and HTML."""
    _, d = example_json
    a = d["answer"]
    assert a["starts"] is False and [s.split(":")[0] for s in a["stops"]] == [
        "gradient accumulation",
        "batch identity at deepspeed.initialize",
    ]
    assert a["fit"] == "does not fit" and a["fit_line"].startswith("predicted 134.5 GiB per rank")
    assert a["fix"] == {
        "change": d["fit"]["fixes"][0]["change"],
        "predicted_peak_gib": d["fit"]["fixes"][0]["predicted_peak_gib"],
    }
    by = {r["key"]: r["verdict"] for r in d["rows"]}
    assert by["coupling:gradient accumulation"] == "error" and by["coupling:LR schedule"] == "warning"
    assert by["coupling:learning rate"] == "ok" and by["fit"] == "does not fit"
    assert {r["verdict"] for r in d["rows"]} <= {"error", "warning", "ok", "not checked", "does not fit"}
    monkeypatch.setenv("COLUMNS", "1000")  # one line per row here; wrapping has its own test
    assert main(EXAMPLE) == 1
    text = capsys.readouterr().out.splitlines()
    assert text[1] == "summary: " + ", ".join(f"{v} {k}" for k, v in d["problems"].items() if v)
    assert text[4] == "will it start: no — 2 error(s) stop the job at start"
    assert text[5] == f"  ✘ {a['stops'][0]}" and text[6] == f"  ✘ {a['stops'][1]}"
    fit_line = next(i for i, line in enumerate(text) if line.startswith("will it fit: "))
    assert fit_line < text.index("coupling (trainer config ↔ ds_config):")
    assert text[fit_line] == (
        f"will it fit: does not fit — {a['fit_line']}; cheapest fix: {a['fix']['change']} → 43.5 GiB"
    )
    page = tmp_path / "answer.html"
    assert main([*EXAMPLE, "--format", "html", "--output", str(page)]) == 1
    html = page.read_text()
    answer = html.index("<div id='answer'>")
    assert answer < html.index("<table id='ledger'>") and "will it fit: does not fit" in html[answer:]
    assert "data-verdict='error'" in html and "data-verdict='does not fit'" in html
    assert "data-verdict='refuted'" not in html and "data-verdict='holds'" not in html


def test_text_rows_wrap_at_the_terminal_width_under_their_indent(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(EXAMPLE) == 1
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 80 or all(
        " " not in line.strip() for line in lines if len(line) > 80
    )  # only a single unbreakable word (a path) may run past the width
    assert lines[1].startswith("summary: ")
    monkeypatch.setenv("COLUMNS", "200")
    assert main(EXAMPLE) == 1
    wide = capsys.readouterr().out.splitlines()
    assert len(wide) < len(lines) and max(len(line) for line in wide) > 80


def test_nbkit_diagnose_dispatches(capsys):
    assert nbkit_main(["diagnose", *EXAMPLE, "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["format"] == "axolotl"


def test_a_clean_setup_exits_0(tmp_path, capsys):
    (tmp_path / "model.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "vocab_size": 256,
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
            }
        )
    )
    (tmp_path / "ds.json").write_text(
        json.dumps(
            {
                "train_batch_size": "auto",
                "train_micro_batch_size_per_gpu": "auto",
                "gradient_accumulation_steps": "auto",
                "gradient_clipping": "auto",
                "bf16": {"enabled": "auto"},
                "zero_optimization": {"stage": 2},
            }
        )
    )
    (tmp_path / "a.yaml").write_text(
        "base_model: model.json\nmicro_batch_size: 2\nsequence_len: 64\nbf16: true\ndeepspeed: ds.json\n"
    )
    assert main([str(tmp_path / "a.yaml"), "--gpu-memory", "80", "--no-audit"]) == 0
    assert "summary: clean" in capsys.readouterr().out


def _files(tmp_path):
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 2}}')
    (tmp_path / "bad.json").write_text('{"zero_optimization": {"stage": 2},\n  "x": }')
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "ok.yaml").write_text("base_model: tiny\nmicro_batch_size: 2\ndeepspeed: ds.json\n")
    (tmp_path / "missing_ds.yaml").write_text(
        "base_model: tiny\nmicro_batch_size: 2\ndeepspeed: nowhere/ds.json\n"
    )
    (tmp_path / "bad_ds.yaml").write_text("base_model: tiny\nmicro_batch_size: 2\ndeepspeed: bad.json\n")
    (tmp_path / "list_ds.yaml").write_text("base_model: tiny\nmicro_batch_size: 2\ndeepspeed: list.json\n")
    (tmp_path / "int_ds.yaml").write_text("base_model: tiny\nmicro_batch_size: 2\ndeepspeed: 3\n")
    (tmp_path / "bad.yaml").write_text("base_model: tiny\nmicro_batch_size: [2\n")
    (tmp_path / "dup.yaml").write_text("base_model: tiny\nmicro_batch_size: 2\nmicro_batch_size: 4\n")
    (tmp_path / "str_micro.yaml").write_text("base_model: tiny\nmicro_batch_size: '4'\n")
    (tmp_path / "zero_micro.yaml").write_text("base_model: tiny\nmicro_batch_size: 0\n")
    (tmp_path / "bad_bf16.yaml").write_text("base_model: tiny\nbf16: maybe\n")
    (tmp_path / "no_model.yaml").write_text("base_model: ./nowhere/model\nmicro_batch_size: 2\n")
    (tmp_path / "bad_stage_ds.json").write_text('{"zero_optimization": {"stage": 5}}')
    (tmp_path / "bad_stage.yaml").write_text(
        "base_model: tiny\nmicro_batch_size: 2\ndeepspeed: bad_stage_ds.json\n"
    )
    (tmp_path / "scalar.yaml").write_text("- 1\n- 2\n")
    (tmp_path / "peft.json").write_text(
        '{"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj"]}'
    )
    (tmp_path / "hub.yaml").write_text("base_model: some-org/some-model-7b\nmicro_batch_size: 2\n")
    (tmp_path / "adir").mkdir()


# (argv after CONFIG's folder is set, what the one error line must name)
BAD = [
    (["missing.yaml"], "missing.yaml: no such file"),
    (["adir"], "adir: is a directory"),
    (["bad.yaml"], "bad.yaml:3: not valid YAML"),
    (["dup.yaml"], "dup.yaml:3: duplicate key 'micro_batch_size'"),
    (["scalar.yaml"], "scalar.yaml: expected a YAML mapping"),
    (["str_micro.yaml"], "str_micro.yaml:2 micro_batch_size: expected a whole number"),
    (["zero_micro.yaml"], "zero_micro.yaml:2 micro_batch_size: expected a whole number ≥ 1"),
    (["bad_bf16.yaml"], "bad_bf16.yaml:2 bf16: expected true, false or auto"),
    (["missing_ds.yaml"], "missing_ds.yaml:3 deepspeed: DeepSpeed config 'nowhere/ds.json' not found"),
    (["bad_ds.yaml"], "bad.json:2:8: not valid JSON"),
    (["list_ds.yaml"], "list.json: expected a JSON object"),
    (["int_ds.yaml"], "int_ds.yaml:3 deepspeed: expected a path to a DeepSpeed JSON or an inline mapping"),
    (["bad_stage.yaml"], "bad_stage_ds.json: zero_optimization.stage: expected 0, 1, 2 or 3"),
    (["no_model.yaml"], "no_model.yaml:1: key 'base_model'"),
    (["hub.yaml"], "hub.yaml:1: key 'base_model'"),  # a Hub id offline (HF_HUB_OFFLINE=1)
    (["peft.json"], "peft.json: looks like a peft config"),
    (["ok.yaml", "--gpu-memory", "0"], "--gpu-memory: expected the memory of one GPU in GiB"),
    (["ok.yaml", "--gpu-memory", "lots"], "--gpu-memory: expected the memory of one GPU in GiB"),
    (["ok.yaml", "--gpu-memory", "nan"], "--gpu-memory: expected the memory of one GPU in GiB"),
    (["ok.yaml", "--nodes", "0"], "--nodes: expected a whole number ≥ 1"),
    (["ok.yaml", "--gpus-per-node", "two"], "--gpus-per-node: expected a whole number ≥ 1"),
    (["ok.yaml", "--format", "xml"], "--format: invalid choice: 'xml'"),
    (["ok.yaml", "--model", "nowhere/config.json"], "--model"),
    (["ok.yaml", "--checks", "no-such-check"], "--checks"),
    (["ok.yaml", "--output", "nowhere/report.html"], "--output"),
    ([], "the following arguments are required: config"),
    (["ok.yaml", "--device", "cuda"], "CUDA is not available"),
]


@pytest.mark.parametrize("argv,named", BAD, ids=[" ".join(a) or "no-args" for a, _ in BAD])
def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, argv, named):
    _files(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(argv) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith("nbkit diagnose: error: "), err
    assert named in lines[0], (named, lines[0])
    assert "Traceback" not in err
    assert not (tmp_path / "nowhere").exists()


def test_the_audit_runs_on_the_same_config_and_its_failure_is_a_finding(tmp_path, capsys):
    (tmp_path / "model.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "vocab_size": 256,
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
            }
        )
    )
    (tmp_path / "ds.json").write_text(
        json.dumps(
            {
                "train_micro_batch_size_per_gpu": "auto",
                "gradient_accumulation_steps": "auto",
                "gradient_clipping": "auto",
                "zero_optimization": {"stage": 2},
            }
        )
    )
    (tmp_path / "a.yaml").write_text(
        "base_model: model.json\nmicro_batch_size: 2\nsequence_len: 64\ndeepspeed: ds.json\n"
        "train_on_inputs: true\ndatasets:\n  - path: x.jsonl\n    type: chat_template\n"
    )
    argv = [str(tmp_path / "a.yaml"), "--gpu-memory", "80", "--format", "json", "--checks", "train-on-inputs"]
    assert main(argv) == 1
    d = json.loads(capsys.readouterr().out)
    assert [f["check"] for f in d["audit"]["findings"]] == ["train-on-inputs"] and d["audit"]["findings"][0][
        "status"
    ] == "fail"
    assert d["problems"] == {"coupling errors": 0, "coupling warnings": 0, "fit": 0, "audit failures": 1}
    assert [c["verdict"] for c in d["rows"] if c["key"] == "audit:train-on-inputs"] == ["fail"]
    (tmp_path / "a.yaml").write_text(
        (tmp_path / "a.yaml").read_text().replace("train_on_inputs: true", "train_on_inputs: false")
    )
    assert main(argv) == 0
