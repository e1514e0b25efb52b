"""The packages stand in one order, each importing only those below it at run time (gateway/core's
docstring): read from the source's import statements, so a new import that breaks the order fails here
before it becomes a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Lowest first. A package may import those before it, never those after it.
ORDER = ["runtime", "sandbox", "tools", "gateway.core", "gateway.files", "gateway.skills", "gateway.responses", "gateway.conversations", "gateway.chat"]
# The stand-alone packages import nothing of the gateway at all.
STAND_ALONE = {"runtime", "sandbox", "tools"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path) -> set[str]:
    """The modules `path` imports when it runs (not those under `if TYPE_CHECKING:`)."""
    tree = ast.parse(path.read_text())
    skipped = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test) for node in ast.walk(block)}
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            found.add(".".join(base + ([node.module] if node.module else [])))
    return found


def _package_of(module: str) -> str | None:
    for package in ORDER:
        if module == package or module.startswith(package + "."):
            return package
    return None


def test_packages_import_only_those_below_them() -> None:
    wrong = []
    for package in ORDER:
        for path in sorted((ROOT / package.replace(".", "/")).rglob("*.py")):
            for imported in _runtime_imports(path):
                target = _package_of(imported)
                above = target is not None and ORDER.index(target) > ORDER.index(package)
                into_gateway = package in STAND_ALONE and imported.split(".")[0] == "gateway"
                if above or into_gateway:
                    wrong.append(f"{path.relative_to(ROOT)} imports {imported}")
    assert wrong == []


def test_the_order_is_read_from_real_imports() -> None:
    # The check above cannot pass by reading nothing: a module known to import below it is seen to.
    assert "gateway.core.ids" in _runtime_imports(ROOT / "gateway/files/routes.py")
    assert "gateway.files.requested" in _runtime_imports(ROOT / "gateway/responses/request.py")


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
