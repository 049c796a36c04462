"""The README and docs/ as a newcomer reads them: the field notes' page explains every ledger row (key,
the section it cites, its notebook), the figures the README states come from their sources, links
resolve, and the two commands stay."""

import importlib
import json
import re
from pathlib import Path

import pytest

from nbkit.claims.doc import THEMES, theme_registry

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
FIELD_NOTES = ROOT / "docs" / "field-notes.md"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
README_WORDS = 900  # before its links: what a newcomer reads in two minutes
# Images a page links before they are taken (allowed not to resolve): none; the run page's screenshot
# (docs/run-page.png) is taken from a finished default run's index.html at 1366×768.
PENDING: set[Path] = set()


def _table_rows(text: str) -> list[list[str]]:
    """Every markdown table row of ``text`` as its stripped cells."""
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.lstrip().startswith("|")
    ]


# -- the field notes' page: every row a ledger can show is explained there --------------------------------


@pytest.mark.parametrize("theme, notebook", THEMES, ids=[theme for theme, _ in THEMES])
def test_field_notes_page_explains_every_claim_row(theme, notebook):
    """Each registered claim row has a table row in docs/field-notes.md naming its key, the source it
    cites exactly as the ledger shows it (a section of the notes, or ``nbkit``) and its notebook's
    number: a row added, renamed or re-sourced fails here until the page says where it comes from."""
    rows = _table_rows(FIELD_NOTES.read_text(encoding="utf-8"))
    number = notebook[:2]
    specs = list(theme_registry(theme).claims)
    assert specs, f"theme {theme} registers no claim rows"
    missing = [
        f"`{spec.key}` | {spec.source} | {number}"
        for spec in specs
        if not any(f"`{spec.key}`" in cells and spec.source in cells and number in cells for cells in rows)
    ]
    assert not missing, "docs/field-notes.md has no table row with these key | source | notebook cells:\n" + (
        "\n".join(missing)
    )


def test_field_notes_page_names_every_section_the_themes_declare():
    """Every ``*_SECTION`` of a theme's ``field_notes.py`` (the notes' sections, written once) is a cell
    of the page's tables."""
    cells = {cell for row in _table_rows(FIELD_NOTES.read_text(encoding="utf-8")) for cell in row}
    modules = sorted((ROOT / "nbkit").glob("*/field_notes.py"))
    assert modules
    missing = []
    for path in modules:
        module = importlib.import_module(f"nbkit.{path.parent.name}.field_notes")
        sections = {value for name, value in vars(module).items() if name.endswith("_SECTION")}
        assert sections, f"{path.relative_to(ROOT)} declares no *_SECTION"
        missing += [f"{path.relative_to(ROOT)}: {s}" for s in sorted(sections - cells)]
    assert not missing, missing


def test_the_checks_catch_a_row_the_page_does_not_explain():
    rows = _table_rows("| §2.1 | AUC 0.53 → 0.79 | `reverse_edges_auc` | 01 | the gain |\n|---|---|\n")
    assert any("`reverse_edges_auc`" in c and "§2.1" in c and "01" in c for c in rows)
    assert not any("`reverse_edges_auc`" in c and "§3.1" in c for c in rows)
    assert not any("`reverse_edges`" in c for c in rows)


def test_field_notes_page_stands_alone():
    """The wheel ships the page without the rest of docs/: it links nowhere relative."""
    text = FIELD_NOTES.read_text(encoding="utf-8")
    assert not [t for t in _link_targets(text) if not _external(t)]
    assert "claims ledger" in text and "`nbkit`" in text


def test_doctor_prints_where_the_field_notes_page_is(monkeypatch, capsys):
    from nbkit import catalog, cli

    report = {
        "device": {
            "python": "3",
            "torch": None,
            "torch_cuda_build": None,
            "cuda_available": False,
            "cpu_cores_usable": 2,
            "ram_total_gib": 8,
            "gpus": [],
        },
        "extras": {"core": {"ok": True}},
        "packages": {},
        "models": {},
        "binaries": {},
        "kernel": {},
    }
    monkeypatch.setattr(cli, "doctor_report", lambda build_cache=False: report)
    assert catalog.field_notes_page() == FIELD_NOTES  # an editable install reads the checkout's page
    cli.main(["doctor"])
    assert f"(the field notes): {FIELD_NOTES}" in capsys.readouterr().out
    cli.main(["doctor", "--format", "json"])
    assert json.loads(capsys.readouterr().out)["field_notes"] == str(FIELD_NOTES)


# -- links ---------------------------------------------------------------------------------------------

LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _without_code(text: str) -> str:
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def _link_targets(text: str) -> list[str]:
    return LINK.findall(_without_code(text))


def _external(target: str) -> bool:
    return target.startswith(("http://", "https://", "mailto:", "#"))


def test_relative_links_in_the_readme_and_docs_point_to_files():
    broken = []
    for page in [README, *DOCS]:
        for target in _link_targets(page.read_text(encoding="utf-8")):
            if _external(target):
                continue
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.exists() and path not in PENDING:
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken
    for image in PENDING:
        if image.exists():
            assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{image} is not a PNG"


def test_the_link_check_sees_links_and_not_code():
    text = "[a](docs/a.md) ![b](b.png) `[c](c.md)` [d](https://x.org) [e](#e)\n```\n[f](f.md)\n```\n"
    assert _link_targets(text) == ["docs/a.md", "b.png", "https://x.org", "#e"]


def test_readme_links_every_docs_page():
    linked = {(README.parent / t).resolve() for t in _link_targets(README.read_text(encoding="utf-8"))}
    assert not [p.name for p in DOCS if p.resolve() not in linked]


# -- the figures the README states, from their sources ------------------------------------------------

NUMBER_WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten".split())}
# Digits in the README's prose that are names, not figures: the notebooks' numbers, ZeRO's stages, the
# LM's name, the machine the reference times were measured on (checked against their record below).
NAMES = (r"\b0[0-9] ·", r"stages 0–3", r"SmolLM2-135M", r"2-core")


def _readme_prose() -> str:
    text = README.read_text(encoding="utf-8").split("\n## More", 1)[0]
    return re.sub(r"\]\([^)]*\)", "]", _without_code(text))


def _reference_minutes(mode: str) -> int:
    seconds = json.loads((ROOT / "notebooks" / "reference_seconds.json").read_text())[mode]
    assert set(seconds) == {p.stem for p in NOTEBOOKS}, f"reference_seconds.json's {mode} misses a notebook"
    return round(sum(seconds.values()) / 60)


def test_readme_times_are_the_reference_runs():
    found = re.search(
        r"smoke run takes about (\d+) minutes and the default run\s+about (\d+)", _readme_prose()
    )
    assert found, "the README's sentence with the smoke and default run times"
    assert (int(found[1]), int(found[2])) == (_reference_minutes("smoke"), _reference_minutes("full"))
    about = json.loads((ROOT / "notebooks" / "reference_seconds.json").read_text())["about"]
    assert "2-core" in about and "2-core laptop" in _readme_prose()


def test_readme_counts_the_notebooks_there_are():
    prose = _readme_prose()
    themed = [p for p in NOTEBOOKS if not p.name.startswith("00_")]
    counts = re.findall(r"\b(\w+) themed (?:Jupyter )?notebooks", prose, flags=re.I)
    assert counts and all(NUMBER_WORDS[c.lower()] == len(themed) for c in counts), counts
    # Each notebook in two lines: one bullet per notebook of the folder, in order.
    bullets = re.findall(r"^- \*\*(\d\d) · ", prose, flags=re.M)
    assert bullets == [p.name[:2] for p in NOTEBOOKS]


def test_readme_prose_states_no_other_figure():
    """A number in the README's prose goes stale unless a test derives it: apart from the names above,
    the only digits are the reference times checked here."""
    prose = _readme_prose()
    for name in NAMES:
        assert re.search(name, prose), f"{name!r} is no longer in the README: drop it from NAMES"
        prose = re.sub(name, "", prose)
    prose = re.sub(r"smoke run takes about \d+ minutes and the default run\s+about \d+", "", prose)
    assert not re.findall(r".{0,30}\d.{0,30}", prose), "figures no test derives"
    words = re.findall(r"\b(?:" + "|".join(list(NUMBER_WORDS)[3:]) + r")\b", prose, flags=re.I)
    assert len(words) == len(re.findall(r"\b\w+ themed (?:Jupyter )?notebooks", prose, flags=re.I)), words


def test_readme_is_read_in_two_minutes():
    before_links = README.read_text(encoding="utf-8").split("\n## More", 1)[0]
    assert len(before_links.split()) <= README_WORDS


# -- the two commands ------------------------------------------------------------------------------------


def test_the_two_commands_stay_and_exist():
    """The README's two commands, `make workbook` and `make test`, are Makefile targets, and CI runs the
    second."""
    section = README.read_text(encoding="utf-8").split("## The two commands", 1)[1].split("\n## ", 1)[0]
    block = section.split("```")[1].splitlines()[1:]  # the lines after the fence's language tag
    commands = [line.split("#")[0].strip() for line in block if line.strip()]
    assert commands == ["make workbook", "make test"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("workbook", "test"):
        assert re.search(rf"^{target}:", makefile, flags=re.M), target
    assert re.search(r"^make test$", (ROOT / ".ci" / "run").read_text(encoding="utf-8"), flags=re.M)
    assert "pip install 'nbkit-workbook[all]'" in README.read_text(encoding="utf-8")
