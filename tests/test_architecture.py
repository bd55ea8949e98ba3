"""The package's imports point one way, as the Architecture page draws them.

``docs/architecture.rst`` lists each part of the package (a subpackage, or
``datasets``) with the parts it imports, from the top of the stack down. The
tests read that block and compare it with every import statement of every
module, so the page is the code's map, and a part that imports one listed
above it (an upward import) fails here.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "sk_softmix"
# the package's facade (its __init__, __main__ and the old paths) may import
# any part; _version imports nothing and may be imported by any part
FACADE = {"__init__", "__main__", "_moved"}
LEAVES = {"_version"}


def documented_layers() -> list[tuple[str, set[str]]]:
    """``(part, parts it imports)`` from the Architecture page, top first."""
    text = (ROOT / "docs" / "architecture.rst").read_text()
    block = text.split("The test parses the lines of this block", 1)[1]
    block = block.split(".. code-block:: text", 1)[1].split("\n\n", 2)[1]
    layers = []
    for line in block.splitlines():
        match = re.fullmatch(r"\s+(\w+)\s+->\s*(.*)", line)
        assert match, f"not a 'part -> parts' line: {line!r}"
        imported = {name.strip() for name in match.group(2).split(",") if name.strip()}
        layers.append((match.group(1), imported))
    return layers


def _part(module: str) -> str:
    """The part of ``sk_softmix.<part>[...]``, or the facade / leaf name."""
    return module.split(".")[1] if "." in module else "__init__"


def _modules(package_dir: Path):
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_package else parts)
        package = module if is_package else module.rsplit(".", 1)[0]
        yield path, module, package


def _imported_modules(path: Path, package: str, package_dir: Path) -> set[str]:
    """Every sk_softmix module ``path`` imports, at any depth of the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("sk_softmix")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source == "sk_softmix":  # from sk_softmix import <submodule or name>
                found |= {
                    f"sk_softmix.{alias.name}"
                    for alias in node.names
                    if (package_dir / alias.name).is_dir()
                    or (package_dir / f"{alias.name}.py").exists()
                }
                found.add("sk_softmix")
            elif source.startswith("sk_softmix."):
                found.add(source)
    return found


def actual_graph(package_dir: Path = PACKAGE) -> dict[str, set[str]]:
    """Part -> the other parts its modules import (facade and leaves left out)."""
    graph = {}
    for path, module, package in _modules(package_dir):
        part = _part(module) if module != "sk_softmix" else "__init__"
        if part in FACADE | LEAVES:
            continue
        graph.setdefault(part, set())
        for imported in _imported_modules(path, package, package_dir):
            other = _part(imported) if imported != "sk_softmix" else "__init__"
            if other != part and other not in LEAVES:
                graph[part].add(other)
    return graph


def test_the_page_lists_every_part_once():
    parts = [part for part, _ in documented_layers()]
    on_disk = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    on_disk |= {p.stem for p in PACKAGE.glob("*.py")} - FACADE - LEAVES
    assert len(parts) == len(set(parts))
    assert set(parts) == on_disk


def test_the_page_matches_the_imports():
    documented = dict(documented_layers())
    assert actual_graph() == documented


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of ``graph`` from a part the page lists above the importer."""
    order = [part for part, _ in documented_layers()]
    return [
        f"{part} imports {other}"
        for part, imported in graph.items()
        for other in sorted(imported)
        if other not in order or order.index(other) <= order.index(part)
    ]


def test_no_part_imports_upwards():
    layers = documented_layers()
    assert upward_imports(dict(layers)) == []  # the page itself is layered
    assert upward_imports(actual_graph()) == []


def test_no_part_imports_the_package_facade():
    # the facade imports every estimator: a part that imported it would import
    # the whole package, and the study would no longer be off import's path
    assert all("__init__" not in imported for imported in actual_graph().values())


def test_a_planted_upward_import_is_caught(tmp_path):
    """The checks fail on a copy of the package whose engine imports an estimator."""
    copy = tmp_path / "sk_softmix"
    for path, _, _ in _modules(PACKAGE):
        target = copy / path.relative_to(PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text())
    (copy / "attention" / "_planted.py").write_text("from ..denoising import BayesDenoiser\n")
    graph = actual_graph(copy)
    assert graph != dict(documented_layers())
    assert upward_imports(graph) == ["attention imports denoising"]


def documented_modules() -> set[str]:
    """``folder/module.py`` (or ``module.py`` at the top) for every entry of
    the Architecture page's tree."""
    text = (ROOT / "docs" / "architecture.rst").read_text()
    tree = text.split(".. code-block:: text", 1)[1].split("\n\n", 2)[1]
    found, folder = set(), None
    for line in tree.splitlines():
        match = re.match(r"\s+([│ ]*)[├└]── (\S+)", line)
        if match is None:
            continue
        depth = len(match.group(1)) // 4
        name = match.group(2)
        if name.endswith("/"):
            folder = name.rstrip("/")
        elif depth == 0:
            found.add(name)
        else:
            found.add(f"{folder}/{name}")
    return found


def test_the_tree_lists_every_module():
    on_disk = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py" and "__pycache__" not in path.parts
    }
    documented = documented_modules()
    assert on_disk - documented == set(), "modules missing from docs/architecture.rst"
    assert documented - on_disk == set(), "docs/architecture.rst lists modules that are gone"


def test_no_private_name_crosses_a_subpackage():
    # a private name is its subpackage's own: another part imports only the
    # public names of a (private) module
    crossing = []
    for path, module, _ in _modules(PACKAGE):
        part = _part(module)
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.level >= 2 and node.module):
                continue
            source = node.module.split(".")[0]
            private = [
                alias.name
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__")
            ]
            if source != part and private:
                crossing.append(f"{module}: {node.module} {private}")
    assert crossing == []
