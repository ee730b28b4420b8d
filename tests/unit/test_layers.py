"""The package's floors, enforced: a folder imports only the floors below it, no import circle
anywhere in the repository, and no module of the package over MAX_LINES lines without a
stated reason.

FLOORS is the picture docs/code-map.md draws, bottom to top. An import counts wherever it is
written (at the top, inside a function, under TYPE_CHECKING): each one ties the modules as
surely when it runs. Two folders on the same floor import neither each other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "ticdc_sync"

# Bottom to top. Folders of one floor are independent of each other.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("ddl",),
    ("codecs", "project"),
    ("warehouse",),
    ("plan",),
    ("run",),
    ("read",),
    ("spark",),
    ("commands",),
)
# Inside spark/, the same rule; "" is the package's own modules (its entry points).
SPARK_FLOORS: tuple[tuple[str, ...], ...] = (
    ("runtime",),
    ("transports",),
    ("staging",),
    ("apply",),
    ("",),
)
MAX_LINES = 600
# What a module over MAX_LINES says in its docstring to keep its size.
REASON = "stays one module"
# The folders searched for import circles besides the package.
OTHER_ROOTS = ("benchmarks", "testkit", "scripts", "tests")
# Folders whose files run as scripts, importing each other by bare names.
SCRIPT_FOLDERS = ("benchmarks", "scripts")


def _modules(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under root/package."""
    out: dict[str, Path] = {}
    for p in sorted((root / package).rglob("*.py")):
        parts = p.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _imported(path: Path, name: str, known: Mapping[str, Path]) -> set[str]:
    """The modules of `known` that the file imports, by dotted name (relative imports and
    the flat imports of a folder of scripts resolved too)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def resolve(dotted: str) -> None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        if dotted and dotted != name:
            found.add(dotted)

    def sibling(dotted: str) -> str:
        # A folder of scripts (benchmarks/, scripts/) imports its neighbours by their bare
        # names (`import workload`): Python finds them on the path the script sets.
        local = f"{package}.{dotted}"
        return local if package in SCRIPT_FOLDERS and local in known else dotted

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                resolve(sibling(a.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join([*base, *([node.module] if node.module else [])])
            else:
                mod = sibling(node.module or "")
            for a in node.names:
                full = f"{mod}.{a.name}"
                resolve(full if full in known else mod)
    return found


def _graph(roots: Iterable[str]) -> dict[str, set[str]]:
    known: dict[str, Path] = {}
    for r in roots:
        known.update(_modules(REPO, r))
    return {name: _imported(path, name, known) for name, path in known.items()}


def _floor(module: str) -> tuple[int, int] | None:
    """(floor, floor inside spark/) of a module of the package; None for the package's own
    __init__ (its version), which any floor may read."""
    parts = module.split(".")[1:]
    if not parts:
        return None
    folder = parts[0]
    rank = next((i for i, f in enumerate(FLOORS) if folder in f), None)
    if rank is None:
        raise AssertionError(
            f"{module}: every module of {PACKAGE} lives in a floor's folder "
            f"({', '.join(f for fl in FLOORS for f in fl)}); add it to one, or add a floor to "
            "FLOORS and docs/code-map.md"
        )
    inner = 0
    if folder == "spark":
        sub = parts[1] if len(parts) > 2 or (len(parts) == 2 and _is_package(parts)) else ""
        inner = next(i for i, f in enumerate(SPARK_FLOORS) if sub in f)
    return rank, inner


def _is_package(parts: list[str]) -> bool:
    return (REPO / PACKAGE / Path(*parts) / "__init__.py").exists()


def _folder(module: str) -> str:
    parts = module.split(".")[1:]
    if parts[:1] == ["spark"] and len(parts) > 1:
        sub = parts[1] if len(parts) > 2 or _is_package(parts) else ""
        return f"spark/{sub}" if sub else "spark"
    return parts[0] if parts else ""


def upward_imports(graph: Mapping[str, set[str]]) -> list[str]:
    """Every import of the package that runs up a floor, or across to a folder of the same
    floor, as 'a -> b' lines."""
    bad = []
    for a, deps in sorted(graph.items()):
        if not a.startswith(PACKAGE + ".") or _floor(a) is None:
            continue
        for b in sorted(deps):
            if not b.startswith(PACKAGE) or _floor(b) is None or _folder(a) == _folder(b):
                continue
            fa, fb = _floor(a), _floor(b)
            assert fa is not None and fb is not None
            same_spark = fa[0] == fb[0] == FLOORS.index(("spark",))
            if (fb[1] >= fa[1]) if same_spark else (fb[0] >= fa[0]):
                bad.append(f"{a} ({_folder(a)}) -> {b} ({_folder(b)})")
    return bad


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The import circles of the graph: its strongly connected parts of two or more modules
    (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    part = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        part.append(w)
                        if w == v:
                            break
                    if len(part) > 1:
                        out.append(sorted(part))
    return out


def test_no_import_runs_up_a_floor() -> None:
    bad = upward_imports(_graph([PACKAGE]))
    assert not bad, "imports that run up a floor (docs/code-map.md):\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("planted_in", "imports"),
    [
        ("core/errors.py", "from ticdc_sync.plan import build_plan"),  # the ground floor up
        ("plan/build.py", "import ticdc_sync.run.schedule"),  # the plan up into the run loop
        ("codecs/infer.py", "from ticdc_sync.project import routing"),  # across one floor
        ("spark/runtime/session.py", "from ticdc_sync.spark.apply import rows"),  # inside spark
        ("read/as_of.py", "from ticdc_sync.spark import as_of"),  # pure up into Spark
    ],
)
def test_a_planted_upward_import_is_found(planted_in: str, imports: str) -> None:
    graph = _graph([PACKAGE])
    name = PACKAGE + "." + planted_in.removesuffix(".py").replace("/", ".")
    planted = dict(graph)
    tree = ast.parse(imports)
    node = tree.body[0]
    target = node.names[0].name if isinstance(node, ast.Import) else node.module
    assert isinstance(target, str)
    if isinstance(node, ast.ImportFrom):
        sub = f"{target}.{node.names[0].name}"
        target = sub if sub in graph else target
    planted[name] = {*graph[name], target}
    assert any(line.startswith(name + " ") for line in upward_imports(planted))


def test_no_import_circle_in_the_repository() -> None:
    found = circles(_graph([PACKAGE, *OTHER_ROOTS]))
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_a_planted_circle_is_found() -> None:
    graph = _graph([PACKAGE])
    planted = {k: set(v) for k, v in graph.items()}
    planted["ticdc_sync.core.errors"].add("ticdc_sync.core.console")
    planted["ticdc_sync.core.console"].add("ticdc_sync.core.errors")
    assert ["ticdc_sync.core.console", "ticdc_sync.core.errors"] in circles(planted)


def test_long_modules_say_why() -> None:
    long = []
    for path in _modules(REPO, PACKAGE).values():
        text = path.read_text()
        n = text.count("\n")
        doc = ast.get_docstring(ast.parse(text)) or ""
        if n > MAX_LINES and REASON not in " ".join(doc.split()):
            long.append(f"{path.relative_to(REPO)}: {n} lines")
    assert not long, (
        f"modules over {MAX_LINES} lines: split them by job, or say in the docstring why "
        f"it {REASON} ('It {REASON}: ...'):\n" + "\n".join(long)
    )
