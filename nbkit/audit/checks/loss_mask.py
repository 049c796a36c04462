"""Prompt template ↔ loss mask — what the unmasked labels actually train on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, CheckConfig, Checked, CheckMetrics
from nbkit.audit.sft import build_features, template_fields
from nbkit.experiment import param
from nbkit.findings import Finding

if TYPE_CHECKING:
    from nbkit.audit.context import AuditContext

SLUG, TITLE = "loss-mask", "Prompt template ↔ loss mask"


TEMPLATE_FORMAT = "### Instruction:\n{instruction}\n### Response: {response}"


@dataclass
class LossMaskConfig(CheckConfig):
    kind: str = param("chat", choices=["chat", "format"])
    format: str = param(TEMPLATE_FORMAT, help="str.format template for kind 'format'")
    max_length: int = param(256, min=16, max=4096)
    mask_pad_labels: bool = False
    max_examples: int = param(0, min=0, max=100_000, label="examples (0 = all)")

    @classmethod
    def smoke(cls):
        return cls(max_examples=48)

    @classmethod
    def audit_values(cls, audit):
        t = audit.template
        return {
            "kind": t.kind,
            "format": t.format or TEMPLATE_FORMAT,
            "max_length": t.max_length,
            "mask_pad_labels": t.mask_pad_labels,
        }


@dataclass(frozen=True)
class LeakClass:
    """The field notes' two asserts on the leaking examples of one class: how many examples leak this
    way, how many fail at least one assert (``caught``), and how many each assert catches."""

    name: str
    examples: int
    caught: int
    caught_by_length: int
    caught_by_positions: int

    @property
    def missed(self) -> int:
        return self.examples - self.caught


@dataclass(frozen=True)
class UnseenLeak:
    """A leak no check of one training example can see: the example is consistent in itself (its labels
    are its target tokens, in place), and the leak lies between it and something else — the whole text's
    own tokenisation, or the template inference renders. How many examples leak this way, and how many
    of them the field notes' asserts catch (none, as the example gives them nothing to catch)."""

    name: str
    examples: int
    caught: int
    against: str


@dataclass(frozen=True, kw_only=True)
class LossMaskMetrics(CheckMetrics):
    """The configured template's examples (how many train on the wrong tokens, and why), and what the
    field notes' two asserts catch: on leaking examples of each class a per-example check can see
    (``leak_classes``), and on the clean ones; the leaks no per-example check can see are
    ``unseen_leaks``, counted apart."""

    examples: int
    length_mismatch: int
    position_mismatch: int
    eot_masked: int
    truncated: int
    boundary_merge: int
    pad_equals_eos: bool
    leak_classes: tuple[LeakClass, ...]
    unseen_leaks: tuple[UnseenLeak, ...]
    clean_examples: int
    clean_failing: int


# The leaks the SFT path and its collators produce. The first five change which tokens are trained or
# where (a per-example check can see them): the end-of-turn token masked because pad == eos, a target cut
# by truncation, prompt tokens trained, the mask boundary one token early, labels shifted by one
# position (a collator that shifts them before the model shifts again).
LEAK_CLASSES = (
    "eot_masked_by_pad",
    "target_truncated",
    "prompt_trained",
    "mask_off_by_one",
    "shifted_labels",
)
# The other two train the right tokens in the right place of an example that is consistent in itself: a
# BPE merge across the prompt/target boundary (the target tokenised alone is not what the whole text
# tokenises to), and a training template other than the chat template inference renders.
UNSEEN_LEAKS = {
    "boundary_merge": "the whole text's own tokenisation",
    "inference_template": "the chat template inference renders",
}


def target_positions(tokenizer, features: dict[str, Any]) -> dict[int, int]:
    """Where the target's tokens sit in the example: position → token id, the target tokenised alone
    placed right after the prompt's ``n_prompt`` tokens (whatever the labels say)."""
    target = tokenizer(features["target_text"], add_special_tokens=False)["input_ids"]
    return {features["n_prompt"] + j: t for j, t in enumerate(target)}


def field_note_asserts(tokenizer, features: dict[str, Any]) -> tuple[bool, bool]:
    """The field notes' two checks (§3.2), as written: (``len(input_ids) == len(labels)``, the positions
    whose label is not -100 are exactly the target tokens' positions — each labelled with its target
    token, which the inputs hold there too)."""
    ids, labels = features["input_ids"], features["labels"]
    trained = {i: lab for i, lab in enumerate(labels) if lab != -100}
    expected = target_positions(tokenizer, features)
    in_place = all(i < len(ids) and ids[i] == t for i, t in expected.items())
    return len(ids) == len(labels), trained == expected and in_place


def leaking_variants(tokenizer, example: dict[str, Any], template) -> dict[str, dict[str, Any]]:
    """The example's features under each leak the SFT path can produce, where it changes what is trained.

    ``eot_masked_by_pad``: the collator line ``labels[labels == pad] = -100`` (masks the end-of-turn token
    when pad == eos); ``target_truncated``: ``max_length`` cuts the target in half (inputs and labels are
    cut alike, as trainers do); ``prompt_trained``: labels = input_ids (``train_on_inputs``);
    ``mask_off_by_one``:
    the mask boundary one token early (a prompt length counted on a different tokenisation);
    ``boundary_merge``: a hand-written instruction template whose prompt ends in a space, where the
    whole text tokenises differently from prompt and target tokenised apart (left out where it does
    not); ``shifted_labels``: labels shifted one position left; ``inference_template``: trained on that
    hand-written template while inference renders the tokenizer's chat template (left out without a
    chat template). A variant that changes nothing is no leak and is left out.
    """
    clean = build_features(
        tokenizer, example, template.model_copy(update={"mask_pad_labels": False, "max_length": 1 << 30})
    )
    ids, labels, n_prompt, n_target = (
        clean["input_ids"],
        clean["labels"],
        clean["n_prompt"],
        clean["n_target"],
    )
    out = {
        "eot_masked_by_pad": build_features(
            tokenizer, example, template.model_copy(update={"mask_pad_labels": True, "max_length": 1 << 30})
        ),
        "target_truncated": build_features(
            tokenizer,
            example,
            template.model_copy(
                update={"mask_pad_labels": False, "max_length": n_prompt + max(1, n_target // 2)}
            ),
        ),
        "prompt_trained": {**clean, "labels": list(ids)},
        "mask_off_by_one": {
            **clean,
            "labels": [ids[i] if i == n_prompt - 1 else lab for i, lab in enumerate(labels)],
        },
        "shifted_labels": {**clean, "labels": list(labels[1:]) + [-100]},
    }
    leaking = {k: v for k, v in out.items() if n_prompt > 0 and v["labels"] != labels}
    hand = build_features(tokenizer, example, hand_written_template(template))
    whole = tokenizer(tokenizer.decode(hand["input_ids"]), add_special_tokens=False)["input_ids"]
    if whole != hand["input_ids"]:
        leaking["boundary_merge"] = hand
    if getattr(tokenizer, "chat_template", None):
        chat = build_features(
            tokenizer, example, template.model_copy(update={"kind": "chat", "max_length": 1 << 30})
        )
        if hand["input_ids"][: hand["n_prompt"]] != chat["input_ids"][: chat["n_prompt"]]:
            leaking["inference_template"] = hand
    return leaking


def hand_written_template(template):
    """An instruction template written by hand (``### Response:`` then a space), as many SFT scripts
    have: the prompt ends in a space the response's first word would otherwise carry."""
    fmt = f"### Instruction:\n{{{template.prompt_field}}}\n### Response: {{{template.response_field}}}"
    return template.model_copy(
        update={"kind": "format", "format": fmt, "mask_pad_labels": False, "max_length": 1 << 30}
    )


def probe_field_note_asserts(tokenizer, examples: list[dict[str, Any]], template) -> dict[str, Any]:
    """Run the field notes' two asserts on clean examples and on leaking variants of each class:
    ``{"leaks": {class: counts}, "unseen": {class: counts}, "clean_examples": n, "clean_failing": k}``
    (``unseen``: the classes no per-example check can see, :data:`UNSEEN_LEAKS`)."""
    leaks = {
        c: {"examples": 0, "caught": 0, "caught_by_length": 0, "caught_by_positions": 0} for c in LEAK_CLASSES
    }
    unseen = {c: {"examples": 0, "caught": 0} for c in UNSEEN_LEAKS}
    clean_n = clean_failing = 0
    for ex in examples:
        clean = build_features(
            tokenizer, ex, template.model_copy(update={"mask_pad_labels": False, "max_length": 1 << 30})
        )
        clean_n += 1
        clean_failing += not all(field_note_asserts(tokenizer, clean))
        for cls, feats in leaking_variants(tokenizer, ex, template).items():
            length_ok, positions_ok = field_note_asserts(tokenizer, feats)
            row = leaks[cls] if cls in leaks else unseen[cls]
            row["examples"] += 1
            row["caught"] += not (length_ok and positions_ok)
            if cls in leaks:
                row["caught_by_length"] += not length_ok
                row["caught_by_positions"] += not positions_ok
    return {"leaks": leaks, "unseen": unseen, "clean_examples": clean_n, "clean_failing": clean_failing}


def check_loss_mask(
    tokenizer, examples: list[dict[str, Any]], template, *, max_examples: int | None = None
) -> Checked[LossMaskMetrics]:
    """For each example: len(input_ids) == len(labels); the positions with a label other than -100 are
    exactly the target tokens' positions; the end-of-turn token is trained on (not masked) even though
    pad == eos; and the prompt/target split tokenises the same as the whole text (no BPE merge across
    the boundary).
    """
    import plotly.graph_objects as go

    fields_needed = [template.prompt_field, template.response_field]
    if template.kind == "format":
        fields_needed = sorted(set(template_fields(template.format)) | {template.response_field})
    missing = [f for f in fields_needed if examples and f not in examples[0]]
    if missing:
        return Checked(
            Finding(
                SLUG,
                TITLE,
                "fail",
                f"template uses field(s) {missing} that the data does not have (has {sorted(examples[0])})",
                {"missing_fields": missing},
                fix="name fields that exist in the data",
            )
        )
    eot_id = tokenizer.eos_token_id
    pad_eq_eos = tokenizer.pad_token_id == eot_id
    counts = {
        "examples": 0,
        "length_mismatch": 0,
        "position_mismatch": 0,
        "eot_masked": 0,
        "truncated": 0,
        "boundary_merge": 0,
    }
    table = []
    shown = None
    for ex in examples[: max_examples or len(examples)]:
        f = build_features(tokenizer, ex, template)
        counts["examples"] += 1
        ids, labels = f["input_ids"], f["labels"]
        length_ok, positions_ok = field_note_asserts(tokenizer, f)
        problems = []
        if not length_ok:
            counts["length_mismatch"] += 1
            problems.append(f"len(input_ids)={len(ids)} != len(labels)={len(labels)}")
        if f["n_prompt"] + f["n_target"] > template.max_length:
            counts["truncated"] += 1
            problems.append(
                f"truncated at max_length={template.max_length}: "
                f"{max(0, template.max_length - f['n_prompt'])} of {f['n_target']} target tokens kept"
            )
        if not positions_ok:
            counts["position_mismatch"] += 1
            trained = [i for i, lab in enumerate(labels) if lab != -100]
            decoded = tokenizer.decode([labels[i] for i in trained], skip_special_tokens=False)
            problems.append(
                f"labels train positions {_span(trained)}, the target's tokens sit at "
                f"{_span(sorted(target_positions(tokenizer, f)))} (labels decode to {decoded!r:.60})"
            )
        eot_positions = [i for i in range(f["n_prompt"], len(ids)) if ids[i] == eot_id]
        if eot_positions and any(labels[i] == -100 for i in eot_positions):
            counts["eot_masked"] += 1
            problems.append("end-of-turn token masked (label -100): the model never learns to stop")
        elif not eot_positions and f["n_target"] and f["n_prompt"] + f["n_target"] <= template.max_length:
            counts["eot_masked"] += 1
            problems.append("no end-of-turn token in the target")
        whole = tokenizer(tokenizer.decode(ids), add_special_tokens=False)["input_ids"]
        if len(ids) <= template.max_length and whole != ids:
            counts["boundary_merge"] += 1
        if problems:
            table.append({"example": ex.get("id", counts["examples"] - 1), "problems": "; ".join(problems)})
        if shown is None:
            shown = (ids, labels)
    n = max(counts["examples"], 1)
    figures: dict[str, Any] = dict(counts)
    figures["pad_equals_eos"] = pad_eq_eos
    # The field notes' claim is that their two asserts catch leaks: judged on leaking variants of these
    # examples, the leaks no per-example check can see counted apart.
    probe = probe_field_note_asserts(tokenizer, examples[: max_examples or len(examples)], template)
    figures["field_note_asserts"] = probe
    metrics = LossMaskMetrics(
        examples=counts["examples"],
        length_mismatch=counts["length_mismatch"],
        position_mismatch=counts["position_mismatch"],
        eot_masked=counts["eot_masked"],
        truncated=counts["truncated"],
        boundary_merge=counts["boundary_merge"],
        pad_equals_eos=pad_eq_eos,
        leak_classes=tuple(LeakClass(name, **probe["leaks"][name]) for name in LEAK_CLASSES),
        unseen_leaks=tuple(
            UnseenLeak(name, **probe["unseen"][name], against=against)
            for name, against in UNSEEN_LEAKS.items()
        ),
        clean_examples=probe["clean_examples"],
        clean_failing=probe["clean_failing"],
    )
    figures["eot_token"] = tokenizer.convert_ids_to_tokens(eot_id) if eot_id is not None else None
    figures["trained_share_of_tokens_pct"] = (
        (100.0 * sum(1 for lab in shown[1] if lab != -100) / len(shown[1])) if shown else 0.0
    )
    kinds = ("length_mismatch", "position_mismatch", "eot_masked", "truncated")
    if any(counts[k] for k in kinds):
        worst = max(kinds, key=lambda k: counts[k])
        status = "fail"
        summary = (
            f"{len(table)} of {counts['examples']} examples train on the wrong tokens: "
            + ", ".join(f"{k}={counts[k]}" for k in kinds if counts[k])
            + f" (most: {worst})"
        )
    elif counts["boundary_merge"]:
        status = "warn"
        summary = (
            f"labels are right, but {counts['boundary_merge']} of {n} examples tokenise differently "
            "when prompt and target are joined (inference sees other tokens)"
        )
    else:
        status = "pass"
        summary = (
            f"all {counts['examples']} examples: lengths match, labels train exactly the target's positions, "
            f"end-of-turn token trained (pad == eos: {pad_eq_eos})"
        )
    fig = go.Figure()
    if shown:
        ids, labels = shown
        toks = tokenizer.convert_ids_to_tokens(ids)
        fig.add_bar(
            x=list(range(len(ids))),
            y=[1 if lab != -100 else 0 for lab in labels],
            hovertext=toks,
            name="trained (label ≠ -100)",
        )
        fig.update_layout(
            title="which tokens of the first example carry a loss",
            xaxis_title="token position",
            yaxis_title="trained",
        )
    finding = Finding(
        SLUG,
        TITLE,
        status,
        summary,
        figures,
        table,
        fix="mask by position (prompt length), never by token id when pad == eos; raise max_length or drop "
        "over-long examples explicitly",
        figure=fig,
    )
    return Checked(finding, metrics)


def _span(positions: list[int]) -> str:
    """Positions as ``a–b`` when contiguous, else the list (shortened)."""
    if not positions:
        return "none"
    if positions == list(range(positions[0], positions[-1] + 1)):
        return f"{positions[0]}–{positions[-1]}"
    return str(positions[:8])[:-1] + (", …]" if len(positions) > 8 else "]")


def measure(cfg: LossMaskConfig, ctx: AuditContext, live=None) -> Checked[LossMaskMetrics]:
    """What the configured template's labels train on, and the field notes' asserts on leaking examples."""
    _, tok = ctx.model_and_tokenizer()
    ex, note = ctx.examples(1, SLUG)
    template = ctx.config.template.model_copy(
        update={
            "kind": cfg.kind,
            "format": cfg.format if cfg.kind == "format" else None,
            "max_length": cfg.max_length,
            "mask_pad_labels": cfg.mask_pad_labels,
        }
    )
    checked = check_loss_mask(tok, ex, template, max_examples=cfg.max_examples or None)
    checked.finding.summary += note
    return checked


CHECK = Check.of(SLUG, TITLE, LossMaskConfig, LossMaskMetrics, measure, number=8)
