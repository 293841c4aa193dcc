"""A function of a page takes what it reads as parameters: none reads a variable the page
script sets at module level (`ep`, `vid`, `store`, ...), so each component can be read and
called on its own. Constants (UPPER_CASE), type aliases (CapWords), imports, functions,
classes and a module's private state (`_name`) are fine."""

import ast
from pathlib import Path

PAGES = Path(__file__).resolve().parents[2] / "app_pages"


def _assigned(tree: ast.Module) -> set[str]:
    """The names a module binds by assignment (or for/with/walrus) outside its functions and classes."""
    names: set[str] = set()
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        stack.extend(ast.iter_child_nodes(node))
    return {n for n in names if n[0].islower()}  # not CONSTANTS, CapWords aliases or _private state


def _bound_in(fn: ast.AST) -> set[str]:
    args = [a.arg for a in ast.walk(fn) if isinstance(a, ast.arg)]
    stores = [n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))]
    return {*args, *stores}


def page_globals_read(source: str) -> list[str]:
    """ "function: name" for each module-level variable a function of `source` reads."""
    tree = ast.parse(source)
    module_vars = _assigned(tree)
    found = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            local = _bound_in(fn)
            reads = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            found += [f"{fn.name}:{fn.lineno}: {name}" for name in sorted(reads & module_vars - local)]
    return found


def test_the_check_sees_a_function_reading_a_page_variable():
    page = "vid = 3\nLIMIT = 5\n\ndef ok(vid):\n    return vid + LIMIT\n\ndef bad():\n    return vid\n"
    assert page_globals_read(page) == ["bad:7: vid"]


def test_no_function_of_a_page_reads_a_page_variable():
    found = {p.name: page_globals_read(p.read_text(encoding="utf-8")) for p in sorted(PAGES.glob("*.py"))}
    assert {name: f for name, f in found.items() if f} == {}
