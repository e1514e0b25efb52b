"""The packages stand in one order, each importing only those below it (gateway/core's docstring), at run
time, lazily inside a function, or for the type checker alike: read from the source's import statements,
so a new import that breaks the order fails here before it becomes a cycle. No module imports, by any
path, one that imports it back; no module of the loop grows past what one reads in a sitting."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Lowest first. A package may import those before it, never those after it. The composition root (the
# app's services, the app) stands above them all.
ORDER = [
    "runtime", "egress", "sandbox", "connectors", "gateway.storage", "gateway.engine", "gateway.web", "gateway.core", "gateway.files", "gateway.skills", "gateway.vector_stores", "gateway.responses", "gateway.webhooks", "gateway.conversations",
    "gateway.chat", "gateway.services", "gateway.app",
]  # fmt: skip
PACKAGES = ["gateway", "connectors", "sandbox", "runtime", "egress"]
# No module is longer than one reads in a sitting; the loop's (gateway/responses) are shorter still. One
# longer says why here.
MAX_MODULE_LINES = 450
MAX_LOOP_MODULE_LINES = 400
LONG_MODULES = {
    "sandbox/kernel.py": "the kernel the sandbox image runs: copied into it alone, as one script with no imports of ours",
}
# The floors of the Responses API, lowest first: its models; what a response writes (the event log, the
# output writer, a tool call, citations); the dialog; the tools; the loop that runs them; its doors (the
# package's own modules). What both the loop and the tools stand on is beneath both.
RESPONSES_FLOORS = [
    "gateway.responses.shapes", "gateway.responses.events", "gateway.responses.history", "gateway.responses.tools",
    "gateway.responses.loop", "gateway.responses",
]  # fmt: skip
# The stand-alone packages import nothing of the gateway at all.
STAND_ALONE = {"runtime", "egress", "sandbox", "connectors"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module: str | None = None) -> set[str]:
    """The modules `path` imports: at its top, inside functions (lazily) and under `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text())
    package = (module or _module_name(path)).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            source = ".".join(base + ([node.module] if node.module else []))
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names)  # `from package import module`
    return found


def _module_graph() -> dict[str, set[str]]:
    """Every module of the project, and those of the project it imports."""
    paths = {_module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        targets = set()
        for imported in _imports(path):
            while imported and imported not in paths:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def _package_of(module: str) -> str | None:
    for package in ORDER:
        if module == package or module.startswith(package + "."):
            return package
    return None


def test_packages_import_only_those_below_them() -> None:
    wrong = []
    for package in ORDER:
        for path in sorted((ROOT / package.replace(".", "/")).rglob("*.py")):
            for imported in _imports(path):
                target = _package_of(imported)
                above = target is not None and ORDER.index(target) > ORDER.index(package)
                into_gateway = package in STAND_ALONE and imported.split(".")[0] == "gateway"
                if above or into_gateway:
                    wrong.append(f"{path.relative_to(ROOT)} imports {imported}")
    assert wrong == []


def _floor_of(module: str) -> str | None:
    for floor in RESPONSES_FLOORS[:-1]:
        if module == floor or module.startswith(floor + "."):
            return floor
    return "gateway.responses" if module == "gateway.responses" or module.startswith("gateway.responses.") else None


def test_the_responses_floors_import_only_those_below_them() -> None:
    wrong = []
    for path in sorted((ROOT / "gateway/responses").rglob("*.py")):
        floor = _floor_of(_module_name(path))
        assert floor is not None
        for imported in _imports(path):
            target = _floor_of(imported)
            if target is not None and RESPONSES_FLOORS.index(target) > RESPONSES_FLOORS.index(floor):
                wrong.append(f"{path.relative_to(ROOT)} imports {imported}")
    assert wrong == []


def test_the_order_is_read_from_real_imports(tmp_path: Path) -> None:
    # The check above cannot pass by reading nothing: a module known to import below it is seen to.
    assert "gateway.core.ids" in _imports(ROOT / "gateway/files/routes.py")
    # Nor by missing an import for the type checker, or one inside a function.
    hidden = tmp_path / "hidden.py"
    hidden.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import gateway.app\ndef f():\n    from gateway import chat\n")
    assert {"gateway.app", "gateway.chat"} <= _imports(hidden, "gateway.core.hidden")


def test_no_module_imports_one_that_imports_it_back() -> None:
    """No cycle among the project's modules, however long, lazy and type-only imports included: every
    strongly connected part of the import graph is one module (Tarjan's algorithm, iteratively)."""
    graph = _module_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: list[str] = []
    cycles = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        on_stack.append(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    on_stack.append(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = on_stack[on_stack.index(node) :]
                del on_stack[on_stack.index(node) :]
                if len(part) > 1:
                    cycles.append(sorted(part))
    assert cycles == []


def test_the_cycle_check_sees_a_cycle() -> None:
    # The graph it reads has edges both ways where a cycle would be: the run imports its state, and a
    # tool's call names its taker without importing tools/.
    graph = _module_graph()
    assert "gateway.responses.loop.run_state" in graph["gateway.responses.loop.run"]
    assert "gateway.responses.tools.base" not in graph["gateway.responses.events.tool_call"]


def test_modules_are_short() -> None:
    long = {}
    for path in sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py")):
        relative = str(path.relative_to(ROOT))
        lines = len(path.read_text().splitlines())
        limit = MAX_LOOP_MODULE_LINES if relative.startswith("gateway/responses/") else MAX_MODULE_LINES
        if lines > limit and relative not in LONG_MODULES:
            long[relative] = lines
    assert long == {}


def test_event_types_are_spelled_once() -> None:
    """Every event type the gateway writes is an `EventType` (gateway/protocol.py): a string spelling one
    anywhere else is a second copy that can drift."""
    from gateway.protocol import EventType

    spelled = {kind.value for kind in EventType if kind is not EventType.ERROR}  # "error" is also a field's name
    found = []
    for path in sorted((ROOT / "gateway").rglob("*.py")):
        if path.name == "protocol.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in spelled:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}")
    assert found == []


def test_statuses_are_spelled_once() -> None:
    """Every status the gateway writes or compares is an `ItemStatus` or a `ResponseStatus` (gateway/protocol.py);
    only a request model's `Literal[...]`, which says what a client may send, spells one as text."""
    from gateway.protocol import ItemStatus, ResponseStatus

    spelled = {status.value for status in ItemStatus} | {status.value for status in ResponseStatus}
    found = []
    for path in sorted((ROOT / "gateway").rglob("*.py")):
        if path.name == "protocol.py":
            continue
        tree = ast.parse(path.read_text())
        literals = {
            id(node) for subscript in ast.walk(tree)
            if isinstance(subscript, ast.Subscript) and ast.unparse(subscript.value) == "Literal" for node in ast.walk(subscript.slice)
        }  # fmt: skip
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in spelled and id(node) not in literals:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}")
    assert found == []


def test_the_services_are_checked_against_every_packages_needs() -> None:
    """Each package's `needs` Protocol is named where the services are composed (gateway/services.py), so the
    type checker proves `Services` meets it; one a package adds and leaves out there is found here."""
    protocols, bases = set(), set()
    for path in sorted((ROOT / "gateway").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(ast.unparse(base) == "Protocol" for base in node.bases) and node.name.endswith("Needs"):
                protocols.add(node.name)
                bases.update(ast.unparse(base) for base in node.bases)
    checked = ast.unparse(next(
        node.value for node in ast.parse((ROOT / "gateway/services.py").read_text()).body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "EveryPackagesNeeds"
    ))  # fmt: skip
    assert len(protocols) >= 7
    assert {name for name in protocols - bases if name not in checked} == set()
