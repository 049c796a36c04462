"""Character-span (BIO) labels projected onto tokens through offsets, and back.

A span label survives tokenisation only if token boundaries fall on its character boundaries.
Each span is projected to tokens (B- on the first token overlapping it, I- on the rest), then the
token tags are projected back to character spans through the same offsets; coverage and exact
boundary F1 compare the round trip with the gold spans, per language.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, CheckConfig, Checked, CheckMetrics
from nbkit.audit.sft import EXAMPLES_DIR, read_jsonl_plain
from nbkit.experiment import param
from nbkit.findings import Finding

if TYPE_CHECKING:
    from nbkit.audit.context import AuditContext

SLUG, TITLE = "label-alignment", "Tokenizer ↔ label space"


@dataclass
class LabelAlignmentConfig(CheckConfig):
    language: str = param("all", choices=["all", "en", "zh"])
    ner_path: str = param("", hidden=True, help="labelled JSONL ('' = the bundled ner.jsonl)")

    @classmethod
    def audit_values(cls, audit):
        return (
            {"ner_path": str(audit.data.ner_path)} if audit.data is not None and audit.data.ner_path else {}
        )


@dataclass(frozen=True)
class LanguageAlignment:
    """One language's span labels after the round trip: how many, the share whose both boundaries are
    token boundaries, the exact boundary F1 with the offsets trimmed of whitespace and as the tokenizer
    returns them, and characters per token. The counts the F1 is made of are kept too, in total and per
    sentence (a sentence's spans share its text, so an interval over spans clusters them by sentence):
    gold spans, spans the round trip gives back (``spans_returned``) and gold spans it gives back exactly
    (``spans_kept``, trimmed offsets)."""

    spans: int
    sentences: int
    label_coverage_pct: float
    boundary_f1_pct: float
    untrimmed_offsets_f1_pct: float
    chars_per_token: float
    spans_kept: int
    spans_returned: int
    spans_per_sentence: tuple[int, ...]
    kept_per_sentence: tuple[int, ...]
    returned_per_sentence: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class LabelAlignmentMetrics(CheckMetrics):
    """Boundary F1 of span labels after the round trip through the tokenizer's offsets, per language."""

    # Each None when the labelled file has no span in that language (or the language filter leaves it out).
    en: LanguageAlignment | None
    zh: LanguageAlignment | None


def project_spans(offsets: list[tuple[int, int]], spans: list[tuple[int, int, str]]) -> list[str]:
    """BIO tags per token: a token belongs to a span if its character range overlaps it."""
    tags = ["O"] * len(offsets)
    for start, end, label in spans:
        first = True
        for i, (ts, te) in enumerate(offsets):
            if te <= ts:  # special / empty tokens carry no characters
                continue
            if ts < end and te > start and tags[i] == "O":
                tags[i] = ("B-" if first else "I-") + label
                first = False
    return tags


def spans_from_tags(offsets: list[tuple[int, int]], tags: list[str]) -> list[tuple[int, int, str]]:
    """Character spans back from BIO tags: a B- token opens, following I- tokens extend."""
    spans: list[tuple[int, int, str]] = []
    cur: list | None = None
    for (ts, te), tag in zip(offsets, tags, strict=False):
        if te <= ts:  # empty-offset tokens (specials, trimmed spaces) neither open nor close a span
            continue
        if tag.startswith("B-") or (tag.startswith("I-") and (cur is None or cur[2] != tag[2:])):
            if cur:
                spans.append(tuple(cur))
            cur = [ts, te, tag[2:]]
        elif tag.startswith("I-") and cur is not None:
            cur[1] = te
        else:
            if cur:
                spans.append(tuple(cur))
            cur = None
    if cur:
        spans.append(tuple(cur))
    return spans


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    """Character range without leading/trailing whitespace (byte-level BPE tokens carry the space)."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def roundtrip(tokenizer, text: str, spans: list) -> dict[str, Any]:
    enc = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    raw_offsets = [tuple(o) for o in enc["offset_mapping"]]
    gold = [tuple(s) for s in spans]
    tags = project_spans(raw_offsets, gold)
    back_raw = spans_from_tags(raw_offsets, tags)
    back = [(*_strip(text, s, e), lab) for s, e, lab in back_raw]
    stripped = [_strip(text, ts, te) for ts, te in raw_offsets if te > ts]
    starts = {ts for ts, te in stripped if te > ts}
    ends = {te for ts, te in stripped if te > ts}
    covered = sum(1 for s, e, _ in gold if s in starts and e in ends)
    tp = len(set(gold) & set(back))
    tp_raw = len(set(gold) & set(back_raw))
    return {
        "n_tokens": len(raw_offsets),
        "gold": gold,
        "back": back,
        "back_raw": back_raw,
        "tp": tp,
        "tp_raw": tp_raw,
        "covered": covered,
        "tags": tags,
        "offsets": raw_offsets,
    }


def check_label_alignment(
    tokenizer, rows: list[dict[str, Any]], *, min_f1: float = 0.9
) -> Checked[LabelAlignmentMetrics]:
    """Label coverage (share of gold spans whose both boundaries are token boundaries) and boundary F1."""
    import plotly.graph_objects as go

    per_lang: dict[str, dict[str, float]] = defaultdict(
        lambda: {
            "gold": 0,
            "back": 0,
            "tp": 0,
            "tp_raw": 0,
            "covered": 0,
            "examples": 0,
            "chars": 0,
            "tokens": 0,
        }
    )
    per_sentence: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    langs_of: dict[str, LanguageAlignment] = {}
    table = []
    for row in rows:
        rt = roundtrip(tokenizer, row["text"], row["spans"])
        lang = row.get("lang", "?")
        agg = per_lang[lang]
        agg["gold"] += len(rt["gold"])
        agg["back"] += len(rt["back"])
        agg["tp"] += rt["tp"]
        agg["tp_raw"] += rt["tp_raw"]
        agg["covered"] += rt["covered"]
        agg["examples"] += 1
        agg["chars"] += len(row["text"])
        agg["tokens"] += rt["n_tokens"]
        per_sentence[lang].append((len(rt["gold"]), rt["tp"], len(rt["back"])))
        for s, e, lab in rt["gold"]:
            if (s, e, lab) not in rt["back"]:
                got = [b for b in rt["back"] if b[0] < e and b[1] > s]
                table.append(
                    {
                        "lang": lang,
                        "text": row["text"],
                        "gold span": row["text"][s:e],
                        "label": lab,
                        "after round trip": " | ".join(row["text"][b[0] : b[1]] for b in got) or "(lost)",
                    }
                )
    figures: dict[str, Any] = {}
    langs = sorted(per_lang)
    for lang in langs:
        a = per_lang[lang]
        p = a["tp"] / a["back"] if a["back"] else 0.0
        r = a["tp"] / a["gold"] if a["gold"] else 0.0
        figures[f"{lang}_label_coverage_pct"] = 100.0 * a["covered"] / max(a["gold"], 1)
        figures[f"{lang}_boundary_f1_pct"] = 100.0 * (2 * p * r / (p + r) if p + r else 0.0)
        # Without trimming the whitespace byte-level tokens carry (offsets as the tokenizer returns them).
        pr, rr = (
            (a["tp_raw"] / a["back"] if a["back"] else 0.0),
            (a["tp_raw"] / a["gold"] if a["gold"] else 0.0),
        )
        figures[f"{lang}_untrimmed_offsets_f1_pct"] = 100.0 * (2 * pr * rr / (pr + rr) if pr + rr else 0.0)
        figures[f"{lang}_chars_per_token"] = a["chars"] / max(a["tokens"], 1)
        figures[f"{lang}_spans"] = a["gold"]
        langs_of[lang] = LanguageAlignment(
            spans=int(a["gold"]),
            sentences=int(a["examples"]),
            label_coverage_pct=figures[f"{lang}_label_coverage_pct"],
            boundary_f1_pct=figures[f"{lang}_boundary_f1_pct"],
            untrimmed_offsets_f1_pct=figures[f"{lang}_untrimmed_offsets_f1_pct"],
            chars_per_token=figures[f"{lang}_chars_per_token"],
            spans_kept=int(a["tp"]),
            spans_returned=int(a["back"]),
            spans_per_sentence=tuple(g for g, _, _ in per_sentence[lang]),
            kept_per_sentence=tuple(k for _, k, _ in per_sentence[lang]),
            returned_per_sentence=tuple(b for _, _, b in per_sentence[lang]),
        )
    worst = min(langs, key=lambda lg: figures[f"{lg}_boundary_f1_pct"]) if langs else None
    if worst is None:
        return Checked(Finding(SLUG, TITLE, "skipped", "no labelled examples"))
    worst_f1 = figures[f"{worst}_boundary_f1_pct"]
    status = "pass" if worst_f1 >= 100 * min_f1 else ("warn" if worst_f1 >= 50 else "fail")
    summary = ", ".join(
        f"{lg}: coverage {figures[f'{lg}_label_coverage_pct']:.1f}%, boundary F1 "
        f"{figures[f'{lg}_boundary_f1_pct']:.1f}%"
        for lg in langs
    )
    fig = go.Figure()
    fig.add_bar(x=langs, y=[figures[f"{lg}_label_coverage_pct"] for lg in langs], name="label coverage %")
    fig.add_bar(x=langs, y=[figures[f"{lg}_boundary_f1_pct"] for lg in langs], name="boundary F1 %")
    fig.update_layout(title="span labels after the token round trip", yaxis_title="%", barmode="group")
    finding = Finding(
        SLUG,
        TITLE,
        status,
        summary,
        figures,
        table,
        fix="label at character level and align with offsets per word, or pre-split words "
        "(is_split_into_words) so tokens never straddle a span boundary",
        figure=fig,
    )
    return Checked(finding, LabelAlignmentMetrics(en=langs_of.get("en"), zh=langs_of.get("zh")))


def measure(cfg: LabelAlignmentConfig, ctx: AuditContext, live=None) -> Checked[LabelAlignmentMetrics]:
    """Span labels projected onto tokens through the offsets and back, per language."""
    path = Path(cfg.ner_path or EXAMPLES_DIR / "ner.jsonl")
    rows = [r for r in read_jsonl_plain(path) if cfg.language in ("all", r.get("lang"))]
    checked = check_label_alignment(ctx.model_and_tokenizer()[1], rows)
    checked.finding.figures["ner_file"] = path.name
    return checked


CHECK = Check.of(SLUG, TITLE, LabelAlignmentConfig, LabelAlignmentMetrics, measure, number=3)
