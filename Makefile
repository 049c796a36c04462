# nbkit — the README's two commands are `make workbook` and `make test`; both run `make setup` first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU wheel of torch 2.13.0 satisfies `torch>=2.4`. GPU users: make setup TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cu128"
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.nbkit-installed
PYTEST_ARGS ?=

.PHONY: setup workbook smoke lab test test-fast sync lint clean

# llama.cpp's own llama-server: notebook 03's LM server on CUDA (on CPU it serves with llama-cpp-python's pool).
# Built only where it is used: with CUDA, or when asked for (make setup LLAMA_SERVER=1); LLAMA_SERVER=0 never.
LLAMA_SERVER ?=
CUDA_PRESENT = $(PY) -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null

setup: $(STAMP)
	@# Built once from the installed llama-cpp-python's sdist into $(VENV)/bin (an up-to-date binary is kept); a
	@# failed build only warns. Here, not in the stamp's recipe, so LLAMA_SERVER=1 on a set-up .venv still builds it.
	@if [ "$(LLAMA_SERVER)" = 1 ] || { [ "$(LLAMA_SERVER)" != 0 ] && $(CUDA_PRESENT); }; then $(PY) scripts/build_llama_server.py; fi

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip wheel setuptools
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install "$(TORCH_SPEC)"
	@# A distribution named `nbkit` (the package index's unrelated one, or this project's earlier name) owns the
	@# same `nbkit` package and command as nbkit-workbook: it goes first.
	@$(PY) -m pip uninstall --quiet --yes nbkit 2>/dev/null || true
	$(PY) -m pip install -e ".[all,dev]"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (nbkit)"
	@# Convert SmolLM2's GGUF to the safetensors cache once, so notebooks load it fast instead of de-quantising it each time.
	$(PY) -c "from nbkit.model_files import smollm2_dir; print('SmolLM2 cache:', smollm2_dir())"
	touch $(STAMP)

# Notebooks run at once by `make workbook`/`make smoke`, longest first; each kernel gets its share of the cores as thread counts.
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; [ $$n -lt 1 ] && n=1; echo $$n)

## The main job: every notebook, default parameters, headless → runs/<timestamp>/ (executed .ipynb, HTML, index.html).
workbook: setup
	$(VENV)/bin/nbkit run --all --jobs $(JOBS)

## What an instructor runs before class: every notebook with SMOKE=True
smoke: setup
	$(VENV)/bin/nbkit run --all --smoke --jobs $(JOBS)

lab: setup
	$(VENV)/bin/jupyter lab notebooks/00_start_here.ipynb

test: setup
	$(VENV)/bin/pytest $(PYTEST_ARGS)

test-fast: setup
	$(VENV)/bin/pytest tests/unit tests/panels $(PYTEST_ARGS)

## Regenerate each .ipynb from its paired py:percent script (outputs stripped)
sync: setup
	$(VENV)/bin/jupytext --to ipynb --update notebooks/[0-9][0-9]_*.py
	$(VENV)/bin/nbstripout notebooks/*.ipynb

## Lint: ruff's rules (line length, E501 at 110, included) and ruff's formatting on FORMATTED (pyproject's
## extend-exclude keeps pscheck's corpus and fixtures out); mypy on TYPED (the experiment contract, the run
## harness, and each theme's claims and metrics: a claim reading a field its metrics lack fails here);
## pscheck on nbkit's own pydantic schemas.
FORMATTED := nbkit tests bench scripts
TYPED := $(wildcard nbkit/claims/*.py) $(addprefix nbkit/,$(addsuffix .py,experiment result replicates errors record procs runfolder \
	runner catalog params execute pool timings publish)) \
	$(foreach t,kg zero signatures audit,nbkit/$(t)/claims.py) \
	$(foreach t,kg zero signatures,nbkit/$(t)/metrics.py)

lint: setup
	$(VENV)/bin/ruff check $(FORMATTED)
	$(VENV)/bin/ruff format --check $(FORMATTED)
	$(VENV)/bin/mypy $(TYPED)
	$(VENV)/bin/pscheck nbkit
	$(PY) -m nbkit.claims.doc --check

clean:
	rm -rf $(VENV) runs .pytest_cache
