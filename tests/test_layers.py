"""The package's layers: nothing imports upwards, and no private name crosses a package.

Read from the source with ``ast`` (nothing is imported), so a lazy import inside a
function counts as much as one at the top of a module.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Source folders and the package each installs as (interpose/ ships as emublas.interpose).
SOURCES = {"emublas": ROOT / "emublas", "emublas.interpose": ROOT / "interpose"}

# Lowest first: a module may import its own layer and those before it, never a later one.
# A module belongs to the first layer that names it or a package above it; the front
# (the public routines, config, the tools and the shim) is everything left.
LAYERS = [
    (
        "foundation",
        {
            "emublas._version",
            "emublas.errors",
            "emublas._env",
            "emublas._hardware",
            "emublas._arrays",
            "emublas._float32",
            "emublas._triangles",
            "emublas._reference",
            "emublas._callers",
        },
    ),
    ("shared kernels", {"emublas._kernels"}),
    ("backends", {"emublas.backends"}),
    ("front", {"emublas"}),
]
LAYER_NAMES = [name for name, _ in LAYERS]


def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
    """Every module of the package: dotted name -> (file, is it a package's ``__init__``)."""
    found = {}
    for package, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            found[".".join([package, *parts])] = (path, is_package)
    return found


MODULES = _modules()


def _layer(module: str) -> int:
    for name, prefixes in LAYERS:
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return LAYER_NAMES.index(name)
    raise AssertionError(f"{module} is in no layer")


def _package(module: str) -> str:
    return module if MODULES[module][1] else module.rpartition(".")[0]


def _imports(module: str):
    """Yield ``(line, target module, imported name or None)`` for each import of emublas code."""
    path, is_package = MODULES[module]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "emublas":
                    yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "emublas":
                continue
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in MODULES:  # `from pkg import module`
                    yield node.lineno, submodule, None
                else:
                    yield node.lineno, source, alias.name


def _where(module: str, line: int) -> str:
    return f"{MODULES[module][0].relative_to(ROOT)}:{line}"


def test_every_module_has_a_layer():
    assert len(MODULES) > 50, f"only {len(MODULES)} modules found under {list(SOURCES.values())}"
    for module in MODULES:
        _layer(module)


def test_no_module_imports_a_higher_layer():
    offenders = []
    for module in sorted(MODULES):
        for line, target, name in _imports(module):
            if target in MODULES and _layer(target) > _layer(module):
                what = f"{target}.{name}" if name else target
                offenders.append(
                    f"{_where(module, line)}: {LAYER_NAMES[_layer(module)]} module {module} imports "
                    f"{what} of the {LAYER_NAMES[_layer(target)]} layer"
                )
    assert not offenders, "imports up the layers (" + " < ".join(LAYER_NAMES) + "):\n" + "\n".join(offenders)


def test_no_private_name_is_imported_across_packages():
    """A ``_name`` defined in a module is its package's; a ``_module`` is its parent package's (and below)."""
    offenders = []
    for module in sorted(MODULES):
        package = _package(module)
        for line, target, name in _imports(module):
            parts = target.split(".")
            for i, part in enumerate(parts[1:], start=1):  # a private module or package on the path
                owner = ".".join(parts[:i])
                if part.startswith("_") and not part.startswith("__") and not (package + ".").startswith(owner + "."):
                    offenders.append(f"{_where(module, line)}: {module} imports private module {target}")
            if name and name.startswith("_") and not name.startswith("__") and target in MODULES:
                if _package(target) != package:
                    offenders.append(f"{_where(module, line)}: {module} imports {target}.{name}")
    assert not offenders, "private names imported across packages:\n" + "\n".join(offenders)


def test_the_checks_see_an_upward_and_a_private_import():
    """The scanners themselves: the front imports the backends, one backend module a private one."""
    front = {(t, n) for _, t, n in _imports("emublas.config")}
    assert any(t.startswith("emublas.backends") for t, _ in front), front
    assert _layer("emublas.config") > _layer("emublas.backends.base") > _layer("emublas._kernels.cpu")
    native = {(t, n) for _, t, n in _imports("emublas.backends.native.backend")}
    assert ("emublas._arrays", "is_cupy") in native, native
