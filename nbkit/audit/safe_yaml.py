"""A user's YAML read safely: duplicate keys and alias bombs refused, every key's line kept.

``yaml_document(text, source)`` is what every nbkit reader of a user's YAML uses (the audit config,
``nbkit audit``'s foreign formats, ``nbkit diagnose``): a problem is a :class:`ConfigError` naming the
file and line, and the returned key lines let a validator name the line of a bad value. Aliases are
allowed but their expanded size is capped, so a "billion laughs" file is refused in milliseconds.
"""

from __future__ import annotations

from typing import Any

from nbkit.errors import UsageError

# A config of this audit has well under a thousand YAML nodes; past this many *expanded* nodes the
# file is an alias bomb ("billion laughs"), refused before anything walks the expansion.
MAX_EXPANDED_NODES = 20_000


class ConfigError(UsageError):
    """The config is invalid; ``str()`` names file, line, key and the expected type."""

    def __init__(self, message: str, problems: list[dict] | None = None):
        super().__init__(message)
        self.problems = problems or []


def compose(text: str, source: str):
    """The YAML node graph, refusing duplicate keys and alias bombs (``ConfigError`` with the line)."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        raise ConfigError(f"{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    # Aliases make the graph a DAG that shares nodes; count the expanded size with a memo so an
    # alias bomb costs as little to refuse as its text is long.
    sizes: dict[int, int] = {}

    def size(node) -> int:
        key = id(node)
        if key not in sizes:
            sizes[key] = 1  # a (malformed) cycle counts once
            if isinstance(node, yaml.MappingNode):
                sizes[key] = 1 + sum(size(k) + size(v) for k, v in node.value)
            elif isinstance(node, yaml.SequenceNode):
                sizes[key] = 1 + sum(size(x) for x in node.value)
        return sizes[key]

    if root is not None and size(root) > MAX_EXPANDED_NODES:
        raise ConfigError(
            f"{source}: YAML aliases expand to {size(root):,} nodes (limit {MAX_EXPANDED_NODES:,}); "
            "an audit config needs no nested aliases — write the values out"
        )
    seen: set[int] = set()

    def duplicates(node):
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: dict[str, int] = {}
            for k, v in node.value:
                name = str(k.value)
                if name in keys:
                    raise ConfigError(
                        f"{source}:{k.start_mark.line + 1}: duplicate key {name!r} (first at line "
                        f"{keys[name]}); "
                        "YAML would silently keep the last one"
                    )
                keys[name] = k.start_mark.line + 1
                duplicates(v)
        elif isinstance(node, yaml.SequenceNode):
            for x in node.value:
                duplicates(x)

    if root is not None:
        duplicates(root)
    return root


def yaml_document(text: str, source: str) -> tuple[Any, dict[tuple, int]]:
    """A YAML document read safely (duplicate keys and alias bombs refused, ``ConfigError`` with the
    line) and the 1-based line of each key, keyed by its path: what every nbkit reader of a user's
    YAML needs to name the line of a bad value."""
    import yaml

    root = compose(text, source)
    loader = yaml.SafeLoader(text)  # constructs the checked graph; aliases stay shared objects
    try:
        data = loader.construct_document(root) if root is not None else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        raise ConfigError(f"{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    finally:
        loader.dispose()
    return data, key_lines(root)


def key_lines(root) -> dict[tuple, int]:
    """1-based line of every mapping key/sequence item of a composed YAML graph, keyed by its path."""
    import yaml

    lines: dict[tuple, int] = {}

    def walk(node, path):
        if len(path) > 16:  # deeper than any audit section; only aliases get here
            return
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                p = path + (key_node.value,)
                lines[p] = key_node.start_mark.line + 1
                walk(value_node, p)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                p = path + (i,)
                lines[p] = item.start_mark.line + 1
                walk(item, p)

    if root is not None:
        walk(root, ())
    return lines
