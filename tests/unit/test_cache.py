"""nbkit's one cache variable: ``NBKIT_CACHE``, read by ``nbkit.cache.cache_dir`` alone."""

import re
from pathlib import Path

import pytest

from nbkit import cache

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("NBKIT_CACHE", raising=False)
    monkeypatch.delenv("NBKIT_CACHE_DIR", raising=False)
    monkeypatch.setattr(cache, "_warned", set())
    return monkeypatch


def test_default_is_home_cache_and_parts_go_below_it(clean_env, tmp_path):
    clean_env.setenv("HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / ".cache" / "nbkit"
    assert cache.cache_dir("dspy") == tmp_path / ".cache" / "nbkit" / "dspy"
    assert not (tmp_path / ".cache").exists()  # nothing created by asking


def test_nbkit_cache_moves_every_cache(clean_env, tmp_path):
    from nbkit.kg.hetionet import hetionet_cache_dir
    from nbkit.signatures import lm

    clean_env.setenv("NBKIT_CACHE", str(tmp_path))
    assert cache.cache_dir() == tmp_path
    assert lm.cache_dir() == tmp_path / "dspy"
    assert hetionet_cache_dir() == tmp_path / "hetionet-v1.0"


def test_the_old_name_still_works_with_one_warning_line(clean_env, tmp_path, capsys):
    clean_env.setenv("NBKIT_CACHE_DIR", str(tmp_path))
    assert cache.cache_dir("dspy") == tmp_path / "dspy"
    assert cache.cache_dir() == tmp_path
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "NBKIT_CACHE_DIR is deprecated" in err and "NBKIT_CACHE" in err


def test_the_new_name_wins_over_the_old_one(clean_env, tmp_path, capsys):
    clean_env.setenv("NBKIT_CACHE", str(tmp_path / "new"))
    clean_env.setenv("NBKIT_CACHE_DIR", str(tmp_path / "old"))
    assert cache.cache_dir() == tmp_path / "new"
    assert "is ignored" in capsys.readouterr().err


def test_use_cache_dir_points_children_at_one_folder(clean_env, tmp_path):
    clean_env.setenv("NBKIT_CACHE_DIR", str(tmp_path / "old"))
    assert cache.use_cache_dir(tmp_path / "x") == tmp_path / "x"
    import os

    assert os.environ["NBKIT_CACHE"] == str(tmp_path / "x") and "NBKIT_CACHE_DIR" not in os.environ


def test_no_other_file_reads_the_cache_variables():
    """One place decides where the cache is: the variable names appear in no other file of the package,
    the scripts or the benches (they call ``nbkit.cache``)."""
    names = re.compile(r"NBKIT_CACHE(_DIR)?\b")
    own = ROOT / "nbkit" / "cache.py"
    offenders = [
        str(p.relative_to(ROOT))
        for folder in ("nbkit", "scripts", "bench")
        for p in sorted((ROOT / folder).rglob("*"))
        if p.is_file()
        and p != own
        and p.suffix in (".py", ".sh", ".ipynb", "")
        and "__pycache__" not in p.parts
        and names.search(p.read_text(encoding="utf-8", errors="replace"))
    ]
    assert offenders == []
    assert names.search(own.read_text(encoding="utf-8"))  # the rule is not vacuous
