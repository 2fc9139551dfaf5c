"""The repository's shape and import direction (docs/architecture.md).

rpc and store are leaves; daemon imports rpc and store; bench (`tether bench`, not part of
the owner) imports daemon; clients imports rpc only, except for the `serve`/`bench`/`config
check`/`doctor` commands, which import daemon or bench lazily inside a function. Inside
daemon, DAEMON_LAYERS fixes which subpackage may import which; inside clients, CLIENT_LAYERS.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rpc", "store", "daemon", "clients", "bench")
ALLOWED = {
    "rpc": set(),
    "store": set(),
    "daemon": {"rpc", "store"},
    "clients": {"rpc"},
    "bench": {"rpc", "store", "daemon"},
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
                assert lazy <= {"rpc", "daemon", "bench"}, f"{path.relative_to(ROOT)} imports {lazy}"


def test_every_module_opens_with_a_docstring():
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            assert ast.get_docstring(tree), f"{path.relative_to(ROOT)} has no module docstring"


MAX_MODULE_LINES = 400


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _module_graph(*, top_level_only: bool = False) -> dict[str, set[str]]:
    """Every module of the four packages → the modules of theirs it imports, at any
    depth of the file (a function-level import is an edge too), or with
    ``top_level_only`` only the imports a module runs when it is imported."""
    paths = {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in (tree.body if top_level_only else ast.walk(tree)):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                elif node.module and node.module.startswith("tether."):
                    module = node.module.removeprefix("tether.")
                else:
                    continue
                if node.module:  # `from . import x` names submodules, not the package
                    targets.append(module)
                targets += [f"{module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets += [a.name.removeprefix("tether.") for a in node.names
                            if a.name.startswith("tether.")]
            edges |= {t for t in targets if t in paths and t != name}
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    graph = _module_graph()
    assert "daemon.services" in graph and "daemon.engine.turns" in graph["daemon.services"]
    assert _cycles(graph) == []


def test_no_module_is_longer_than_a_few_hundred_lines():
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            assert lines <= MAX_MODULE_LINES, f"{path.relative_to(ROOT)} has {lines} lines"


def test_every_subpackage_is_installed():
    """A subpackage missing from pyproject works from a checkout and is absent
    from a real install (CI installs the project for real)."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = config["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    for pkg in PACKAGES:
        for init in (ROOT / pkg).rglob("__init__.py"):
            folder = init.parent.relative_to(ROOT).as_posix()
            name = "tether." + folder.replace("/", ".")
            assert name in listed, f"{name} is not in [tool.setuptools] packages"
            assert setuptools["package-dir"][name] == folder


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen: set[str] = set()
    stack = [start]
    while stack:
        for w in graph[stack.pop()]:
            if w not in seen:
                seen.add(w)
                stack.append(w)
    return seen


#: the admission ledger: what is admitted, its status, its store units, late delivery
LEDGER = ("daemon.ledger",)
#: the engine: what runs an admission as an agent turn (and the agent's tools)
ENGINE = ("daemon.engine", "daemon.delegation", "daemon.toolsets", "daemon.mcp")

#: the daemon's subpackages, lowest first, each with the ones it may import (besides rpc
#: and store); every subpackage's docstring says the same in words. The top level (owner.py,
#: __main__.py, demo.py) wires them and may import any.
DAEMON_LAYERS: dict[str, set[str]] = {
    "config": set(),
    "runtime": set(),
    "model": {"config"},
    "ledger": {"config", "runtime", "model"},
    "approvals": {"config", "runtime", "ledger"},
    "engine": {"config", "runtime", "model", "ledger", "approvals"},
    "toolsets": {"config", "runtime", "ledger", "approvals", "engine"},
    "delegation": {"config", "runtime", "model", "ledger", "approvals", "engine"},
    "mcp": {"config", "runtime", "approvals", "engine", "toolsets"},
    "cron": {"config", "runtime", "model", "ledger"},
    "sessions": {"config", "runtime", "model", "ledger", "engine"},
    "fleet": {"config", "runtime", "ledger"},
    "http": {"config", "runtime", "model", "ledger", "sessions"},
    "transport": {"config", "runtime", "model", "ledger", "approvals", "engine", "toolsets",
                  "sessions", "http"},
}
#: the clients' subpackages, each with the ones it may import (besides rpc); every
#: subpackage's docstring says the same. cli reaches acp only inside `tether acp`.
CLIENT_LAYERS: dict[str, set[str]] = {
    "library": set(),
    "tui": {"library"},
    "acp": {"library"},
    "cli": {"library", "tui", "acp"},
}
#: (importer, imported) pairs allowed only inside a function, never at import time
CLIENT_LAZY_ONLY = {("cli", "acp")}
#: most modules a folder of ours may hold before it should be split
MAX_FOLDER_MODULES = 15


def _daemon_package(module: str) -> str | None:
    """The daemon subpackage a module belongs to; None for the top level and other packages."""
    parts = module.split(".")
    if parts[0] != "daemon" or len(parts) < 2:
        return None
    return parts[1] if (ROOT / "daemon" / parts[1]).is_dir() else None


def test_daemon_subpackages_import_downwards_only():
    graph = _module_graph()
    folders = {p.name for p in (ROOT / "daemon").iterdir()
               if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(DAEMON_LAYERS), "a daemon subpackage is missing from DAEMON_LAYERS"
    for module, edges in graph.items():
        own = _daemon_package(module)
        if own is None:
            continue
        for target in edges:
            other = _daemon_package(target)
            if target.split(".")[0] == "daemon" and other is None and target != "daemon":
                raise AssertionError(f"{module} imports the daemon's top level ({target})")
            if other is not None and other != own:
                assert other in DAEMON_LAYERS[own], f"{module} imports {target}: {own} → {other}"


def test_the_layers_have_no_cycle_and_each_package_says_its_rule():
    layered = {f"daemon.{k}": {f"daemon.{v}" for v in vs} for k, vs in DAEMON_LAYERS.items()}
    assert _cycles(layered) == []
    for name in DAEMON_LAYERS:
        init = ROOT / "daemon" / name / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert "May import" in doc, f"daemon/{name}/__init__.py does not say what it may import"


def test_no_folder_holds_more_than_about_fifteen_modules():
    for pkg in ("daemon", "clients", "rpc", "store", "bench"):
        for folder in [ROOT / pkg, *(p for p in (ROOT / pkg).rglob("*")
                                     if p.is_dir() and "node_modules" not in p.parts)]:
            modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
            assert len(modules) <= MAX_FOLDER_MODULES, f"{folder.relative_to(ROOT)}: {len(modules)}"


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_the_ledger_does_not_reach_into_the_engine():
    """The ledger tells the turn runner a session is ready through what it is
    given (admissions.Turns), never by importing it (docs/architecture.md)."""
    graph = _module_graph()
    ledger = [m for m in graph if _within(m, LEDGER)]
    assert "daemon.ledger.admissions" in ledger and "daemon.ledger.delivery" in ledger
    for module in ledger:
        engine = sorted(m for m in _reachable(graph, module) if _within(m, ENGINE))
        assert not engine, f"{module} imports the engine: {engine}"
    # the check can fail: the engine itself reaches the ledger
    assert "daemon.ledger.outcomes" in _reachable(graph, "daemon.engine.turns")


def test_tools_do_not_import_delegation():
    """Late delivery is the ledger's (daemon/ledger/delivery.py): the working tools share
    it with delegation instead of importing delegation."""
    graph = _module_graph()
    toolsets = [m for m in graph if _within(m, ("daemon.toolsets",))]
    assert "daemon.toolsets.processes" in toolsets
    for module in toolsets:
        found = sorted(m for m in _reachable(graph, module) if _within(m, ("daemon.delegation",)))
        assert not found, f"{module} imports delegation: {found}"
    assert _within("daemon.delegation.background", ("daemon.delegation",))
    assert not _within("daemon.delegationx", ("daemon.delegation",))


def _client_package(module: str) -> str | None:
    """The clients subpackage a module belongs to; None for the top level and others."""
    parts = module.split(".")
    if parts[0] != "clients" or len(parts) < 2:
        return None
    return parts[1] if (ROOT / "clients" / parts[1]).is_dir() else None


def test_client_subpackages_import_in_one_direction():
    folders = {p.name for p in (ROOT / "clients").iterdir()
               if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(CLIENT_LAYERS), "a clients subpackage is missing from CLIENT_LAYERS"
    assert not [p.name for p in (ROOT / "clients").glob("*.py") if p.name != "__init__.py"], \
        "every client module lives in a subpackage"
    eager = _module_graph(top_level_only=True)
    for module, edges in _module_graph().items():
        own = _client_package(module)
        if own is None:
            continue
        for target in edges:
            other = _client_package(target)
            if other is None or other == own:
                continue
            assert other in CLIENT_LAYERS[own], f"{module} imports {target}: {own} → {other}"
            if (own, other) in CLIENT_LAZY_ONLY:
                assert target not in eager[module], f"{module} imports {target} at import time"
    # the check can fail: the CLI does reach the library and the chat
    graph = _module_graph()
    assert "clients.library.client" in _reachable(graph, "clients.cli.commands")
    assert "clients.tui.chat" in _reachable(graph, "clients.cli.commands")


def test_each_client_package_says_its_rule():
    layered = {f"clients.{k}": {f"clients.{v}" for v in vs} for k, vs in CLIENT_LAYERS.items()}
    assert _cycles(layered) == []
    for name in CLIENT_LAYERS:
        init = ROOT / "clients" / name / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert "May import" in doc, f"clients/{name}/__init__.py does not say what it may import"


#: the store's folders: the queries, and each database's writer and schema
STORE_PARTS = ("tables", "sqlite", "pg")


def test_the_store_parts_import_only_its_core_and_themselves():
    graph = _module_graph()
    for module, edges in graph.items():
        parts = module.split(".")
        if parts[0] != "store" or len(parts) < 2:
            continue
        own = parts[1] if parts[1] in STORE_PARTS else None
        for target in edges:
            t = target.split(".")
            if t[0] != "store" or len(t) < 2 or t[1] not in STORE_PARTS or t[1] == own:
                continue
            # the package's own __init__ names the two databases; nothing else crosses
            assert module == "store" and t[1] == "sqlite", f"{module} imports {target}"
