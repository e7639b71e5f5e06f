"""The layout DESIGN.md fixes, read from the source (every import, lazy ones included):
`protocol/` imports nothing of the rest (its wire, transport and model not even its shared
kit), `companion/` and `node/` never import each other, `search/` imports neither, and the
companion's doors (the command line, the companion.sock server, the HTTP API with its pages,
the Python API) never import one another: each translates, and calls the core they all
share; the core imports no door, and only the core builds what a planner reads."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "companion", "node", "search")

# Each door, by the modules it is made of: a door's modules may import one another and the
# core, never another door's. The command line reaches a running companion through its
# thin clients (`entry` and `thin` for a served `hearth ask` before the command line loads,
# `client` for the rest), which speak companion.sock's messages (`socket_messages`, core).
DOORS = {
    "command line": ("cli", "entry", "thin", "streaming", "chat", "terminal", "client", "demo"),
    "companion.sock server": ("socket_server",),
    "HTTP API": ("api",),
    "Python API": ("sdk",),
}
# `hearth serve` runs the companion.sock server and the HTTP API side by side; the package
# itself hands out the Python API's `Companion`. Every other module of companion/ is core.
HOSTS = ("hearth.companion", "hearth.companion.resident")
# What a planner reads, and who may build it: the route (`RouteInput`, `route_plan`, read by
# the asker) and the plan request (`PlanRequest`, built by the prompt builder for the asker
# and the completions with an app's own tools; the tools `offer`ed, by the asker and, per
# round, by the remote path).
PLANNER_INPUT = {
    "RouteInput": ("asker", "routeplan"),
    "route_plan": ("asker", "routeplan"),
    "decide": ("routeplan",),
    "PlanRequest": ("prompt",),
    "plan_request": ("asker", "completion", "prompt"),
    "offer": ("asker", "prompt", "remote"),
}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["hearth", *parts])


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """Every module `path` imports (line, dotted name), relative imports resolved; for
    `from a import b`, both `a` and `a.b` (b may be a module)."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            yield node.lineno, name
            for alias in node.names:
                yield node.lineno, f"{name}.{alias.name}"


def _sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _crossings(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in _sources(package)
        for line, name in _imports(path)
        if any(_within(name, f"hearth.{other}") for other in forbidden)
    ]


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("protocol", ("companion", "node", "search")),
        ("companion", ("node",)),
        ("node", ("companion",)),
        ("search", ("companion", "node")),
    ],
)
def test_packages_import_only_what_the_layout_allows(
    package: str, forbidden: tuple[str, ...]
) -> None:
    assert _crossings(package, forbidden) == []


def test_wire_core_does_no_io() -> None:
    banned = {"socket", "trio", "anyio", "asyncio", "libp2p", "os", "pathlib", "time"}
    for path in _sources("protocol/wire"):
        assert not {name.split(".")[0] for _, name in _imports(path)} & banned, path.name


@pytest.mark.parametrize("part", ["wire", "transport", "model"])
def test_the_protocol_itself_never_imports_the_shared_kit(part: str) -> None:
    """The console kit and the web guard sit beside the protocol, on top of it."""
    assert _crossings(f"protocol/{part}", ("protocol.kit",)) == []


def _door_of(name: str) -> str | None:
    for door, modules in DOORS.items():
        if any(_within(name, f"hearth.companion.{module}") for module in modules):
            return door
    return None


def test_doors_never_import_one_another() -> None:
    crossings = set()
    for path in _sources("companion"):
        door = _door_of(_module(path))
        if door is None:
            continue
        for line, name in _imports(path):
            other = _door_of(name)
            if other is not None and other != door:
                crossings.add(f"{path.relative_to(ROOT)}:{line} ({door}) imports the {other}")
    assert sorted(crossings) == []


def test_every_door_module_exists() -> None:
    """A door renamed without this test knowing would leave it checking nothing."""
    for modules in DOORS.values():
        for module in modules:
            assert (ROOT / "companion" / f"{module}.py").exists() or (
                ROOT / "companion" / module / "__init__.py"
            ).exists(), module


def test_the_core_imports_no_door() -> None:
    """The doors sit on the core: a core module that imported one would make every other
    door depend on it."""
    crossings = [
        f"{path.relative_to(ROOT)}:{line} imports the {door}"
        for path in _sources("companion")
        if _door_of(module := _module(path)) is None and module not in HOSTS
        for line, name in _imports(path)
        if (door := _door_of(name)) is not None
    ]
    assert crossings == []


def _calls(path: Path) -> Iterator[tuple[int, str]]:
    """Every name `path` calls (a plain name, or an attribute's last part)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                yield node.lineno, node.func.id
            elif isinstance(node.func, ast.Attribute):
                yield node.lineno, node.func.attr


def test_only_the_core_builds_a_planners_input() -> None:
    """A route and a plan request are built in one place each: a door, or another part of
    the core, that built its own would bypass the route plan or the labels and budget the
    prompt builder applies."""
    builders = {
        f"{path.relative_to(ROOT)}:{line} calls {name}"
        for path in _sources("companion")
        for line, name in _calls(path)
        if name in PLANNER_INPUT
        and not any(_module(path) == f"hearth.companion.{m}" for m in PLANNER_INPUT[name])
    }
    assert sorted(builders) == []


@pytest.mark.parametrize("name", sorted(PLANNER_INPUT))
def test_every_planner_input_builder_is_found_where_the_scan_expects_it(name: str) -> None:
    """A builder renamed or moved without this test knowing would leave it checking nothing."""
    found = {
        _module(path).rpartition(".")[2]
        for path in _sources("companion")
        for _, called in _calls(path)
        if called == name
    }
    assert found and found <= set(PLANNER_INPUT[name]), found


def test_the_service_only_puts_the_home_together() -> None:
    """`Service` is the composition root: it opens a home, its link and executors; asking,
    completing and reporting are the core's own modules (`ask`, `completion`, `reports`),
    so a door never reaches a request's work through the service."""
    tree = ast.parse((ROOT / "companion" / "service.py").read_text())
    service = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Service")
    methods = {
        n.name
        for n in service.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and not n.name.startswith("__")
    }
    assert methods == {"open", "peer_id", "paired", "executor", "resume", "_warm", "link_to_home"}
