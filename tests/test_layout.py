"""The repository's shape and import direction (docs/architecture.md).

rpc and store are leaves; daemon imports rpc and store; clients imports rpc
only, except for the `serve`/`bench` commands, which import daemon lazily
inside a function.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rpc", "store", "daemon", "clients")
ALLOWED = {
    "rpc": set(),
    "store": set(),
    "daemon": {"rpc", "store"},
    "clients": {"rpc"},
}


def _imports(path: Path, *, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "tether" and len(parts) > 1:
                found.add(parts[1])
    return found


def test_top_level_is_the_designed_layout():
    for name in (*PACKAGES, "tests", "docs", ".ci"):
        assert (ROOT / name).is_dir(), name
    for name in ("pyproject.toml", "README.md", "LICENSE", ".ci/run"):
        assert (ROOT / name).is_file(), name
    assert not (ROOT / "tether").exists(), "packages live in their own top-level folders"


def test_import_direction():
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            # clients may reach daemon lazily (inside a function) for serve/bench
            strict = pkg != "clients"
            imported = _imports(path, top_level_only=not strict) - {pkg}
            assert imported <= ALLOWED[pkg], f"{path.relative_to(ROOT)} imports {imported}"
            if pkg == "clients":
                lazy = _imports(path, top_level_only=False) - {pkg}
                assert lazy <= {"rpc", "daemon"}, f"{path.relative_to(ROOT)} imports {lazy}"


def test_every_module_opens_with_a_docstring():
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            assert ast.get_docstring(tree), f"{path.relative_to(ROOT)} has no module docstring"
