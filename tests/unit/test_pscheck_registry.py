"""Rule registry, plugins (module, entry point), the shipped created_at plugin, import cost."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import nbkit.pscheck.registry as registry_mod
import nbkit.pscheck.rules as rules_pkg
from nbkit.pscheck import BaseRule, PluginError, RuleRegistry, lint_source
from nbkit.pscheck.registry import ENTRY_POINT_GROUP

ROOT = Path(__file__).resolve().parents[2]
CREATED_AT_BAD = (
    "from datetime import datetime\nfrom pydantic import BaseModel, Field\n"
    "class Doc(BaseModel):\n    created_at: datetime = Field(default_factory=datetime.utcnow)\n"
    "class Note(BaseModel):\n    created_at: datetime\n"
)


class NoFloatMoney(BaseRule):
    code = "ACME001"
    name = "no-float-money"
    summary = "money must not be float"

    def check_model(self, model, ctx):
        for spec in model.all_field_specs:
            if spec.name.endswith("_eur") and spec.type.strip_annotated().name == "float":
                yield self.diag(model, spec.node, f"'{spec.name}' is float")


def test_registry_register_select_and_conflicts():
    reg = RuleRegistry.default()
    n = len(reg)
    reg.register(NoFloatMoney)
    assert len(reg) == n + 1 and "ACME001" in reg
    assert [r.code for r in reg.select(["ACME"])] == ["ACME001"]

    class Clash(BaseRule):
        code = "PSC001"
        name = "clash"

    with pytest.raises(ValueError, match="already registered"):
        reg.register(Clash)

    class NoCode(BaseRule):
        name = "x"

    with pytest.raises(ValueError, match="needs a code"):
        reg.register(NoCode)

    class BadSeverity(BaseRule):
        code, name, severity = "ZZ1", "zz", "info"

    with pytest.raises(ValueError, match="severity"):
        reg.register(BadSeverity)


def test_plugin_rule_classes_and_modules(tmp_path, monkeypatch):
    src = "from pydantic import BaseModel\nclass P(BaseModel):\n    price_eur: float = 1.0\n"
    assert [d.code for d in lint_source(src, plugins=[NoFloatMoney])] == ["ACME001"]
    (tmp_path / "acme_rules.py").write_text(
        "from nbkit.pscheck import BaseRule\n"
        "def register(registry):\n    from test_pscheck_registry import NoFloatMoney\n"
        "    registry.register(NoFloatMoney)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    assert [d.code for d in lint_source(src, plugins=["acme_rules"])] == ["ACME001"]
    (tmp_path / "empty_plugin.py").write_text("X = 1\n")
    with pytest.raises(PluginError, match="neither register"):
        lint_source(src, plugins=["empty_plugin"])
    with pytest.raises(PluginError, match="failed to import"):
        lint_source(src, plugins=["does_not_exist_abc"])


def test_created_at_plugin_is_opt_in_and_finds_the_seed_cases():
    plain = lint_source(CREATED_AT_BAD, plugins=())
    assert [d.code for d in plain] == []  # policy rule is not on by default
    by_plugin = lint_source(CREATED_AT_BAD, plugins=["nbkit.pscheck.plugins.created_at"])
    assert [(d.code, d.line) for d in by_plugin] == [("PSP001", 4), ("PSP001", 6)]
    assert "utcnow" in by_plugin[0].message and "no default_factory" in by_plugin[1].message


def test_entry_point_loading(monkeypatch):
    import importlib.metadata as md

    class FakeEP:
        def __init__(self, name, value):
            self.name, self.value = name, value

        def load(self):
            mod, _, attr = self.value.partition(":")
            obj = __import__(mod, fromlist=["x"])
            return getattr(obj, attr) if attr else obj

    eps = [FakeEP("created_at", "nbkit.pscheck.plugins.created_at"), FakeEP("broken", "no_such_module_q")]
    monkeypatch.setattr(md, "entry_points", lambda group=None: eps if group == ENTRY_POINT_GROUP else [])
    monkeypatch.setattr(registry_mod, "_EP_CACHE", {})  # discovery is cached per process
    reg = RuleRegistry.default()
    assert reg.load_entry_points() == ["PSP001"]
    assert len(reg.plugin_errors) == 1 and "broken" in reg.plugin_errors[0]
    # With entry points loaded, --strict enables the plugin's opt-in rule.
    assert {d.code for d in lint_source(CREATED_AT_BAD, strict=True)} == {"PSP001"}


def test_pyproject_declares_entry_point_and_console_script():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert data["project"]["scripts"]["pscheck"] == "nbkit.pscheck.cli:main"
    assert (
        data["project"]["entry-points"][ENTRY_POINT_GROUP]["created_at"] == "nbkit.pscheck.plugins.created_at"
    )


def test_pre_commit_hook_definition():
    yaml = pytest.importorskip("yaml")
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert hooks["pscheck"]["language"] == "script"
    script = ROOT / hooks["pscheck"]["entry"]
    assert script.exists() and script.stat().st_mode & 0o111
    proc = subprocess.run(
        [sys.executable, str(script), "--list-rules"], capture_output=True, text=True, timeout=60, cwd="/"
    )
    assert proc.returncode == 0 and "PSC001" in proc.stdout


def test_import_is_light_and_never_imports_pydantic():
    code = (
        "import sys, time; t = time.perf_counter(); import nbkit.pscheck; "
        "from nbkit.pscheck import lint_source; "
        "lint_source('from pydantic import BaseModel\\nclass M(BaseModel):\\n    x: str = None\\n'); "
        "heavy = [m for m in ('pydantic', 'torch', 'numpy', 'pandas') if m in sys.modules]; "
        "print(heavy)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_docs_rules_reference_is_in_sync():
    from nbkit.pscheck.docs import splice

    text = (ROOT / "docs" / "pscheck.md").read_text(encoding="utf-8")
    assert splice(text) == text, "run: python -m nbkit.pscheck.docs --write docs/pscheck.md"
    for rule in RuleRegistry.default():
        assert f"### {rule.code}" in text


def test_each_builtin_rule_is_one_module_named_after_it():
    """Rules are kept as ruff keeps them: one module per rule, named after the rule, and every such
    module's rule is in the table the registry registers (and nothing else is)."""
    found = {}
    for info in pkgutil.iter_modules(rules_pkg.__path__):
        mod = importlib.import_module(f"{rules_pkg.__name__}.{info.name}")
        own = [
            v
            for v in vars(mod).values()
            if isinstance(v, type) and issubclass(v, BaseRule) and v.__module__ == mod.__name__
        ]
        if not own:
            continue  # a module of shared facts/helpers
        assert len(own) == 1, f"{info.name} defines {len(own)} rules"
        assert info.name == own[0].name.replace("-", "_")
        found[own[0].code] = own[0]
    assert found == {r.code: r for r in rules_pkg.BUILTIN_RULES}
    assert {r.code for r in RuleRegistry.default()} == set(found)
