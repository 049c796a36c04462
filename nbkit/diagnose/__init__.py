"""``nbkit diagnose``: one command for a whole training setup — will it start, will it fit, what is coupled
wrong.

``setup`` reads the trainer config, its ds_config and base model; ``coupling`` compares what both
files set by the rules of transformers' DeepSpeed integration and DeepSpeed itself; ``fit`` predicts
each rank's peak with notebook 02's memory model; ``diagnosis`` adds the audit's checks and builds the
claims; ``report`` renders text, JSON or HTML; ``cli`` is the command.

A finished run's folder (``nbkit diagnose RUN_DIR``): ``artefacts`` (and ``logs``, for CSV/JSONL histories
and MLflow) finds and reads what the run left, naming its series by ``names``' pattern list; ``curves`` and
``schedule`` hold the rules on logged curves, ``rules.curve_rows`` applies them all (to a finished run and,
through :mod:`nbkit.callbacks`, to one that is training); ``snapshot`` reads a CUDA memory snapshot without
running it and ``memory`` judges it, ``run_figures`` draws them, ``finished`` puts the rows (``rows``)
together and renders them.
"""
