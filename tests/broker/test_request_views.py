"""The request views of broker/apis are proven against every served version.

A handler reads its request through a view (a read-only Protocol); the module proves the
view true in a `TYPE_CHECKING` block that mypy checks: a function taking each served
version's kio request class and returning them as the views. mypy fails where a version
lacks a field of its view or has it with another type. These tests check what mypy
cannot: that the proof names exactly the versions served (SERVED grows, the proof must
follow), and that every view of a module is reached by its proof (as the request, a base
of it or a nested entity of it), so that no view goes unproven.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest
from kio.schema.index import api_key_map

from brook.protocol.api_table import SERVED, ApiKey

PROOF = "_served_requests_are_views"
SHARED = "views"


def _source(module: str) -> ast.Module:
    spec = importlib.util.find_spec(f"brook.broker.apis.{module}")
    assert spec is not None and spec.origin is not None
    return ast.parse(Path(spec.origin).read_text())


def _views(tree: ast.Module) -> dict[str, set[str]]:
    """Each view class of a module, with the names its bases and annotations mention."""
    views = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name.endswith("View"):
            views[node.name] = {
                name.id for part in [*node.bases, *node.body] for name in _names(part)
            }
    return views


def _names(node: ast.AST) -> list[ast.Name]:
    return [name for name in ast.walk(node) if isinstance(name, ast.Name)]


def _type_checking_block(tree: ast.Module) -> list[ast.stmt]:
    """The statements of a module's `if TYPE_CHECKING:` blocks."""
    return [
        statement
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
        for statement in node.body
    ]


def _proof(tree: ast.Module) -> tuple[set[int], set[str]] | None:
    """The kio versions a module's proof imports and the names its result is typed with."""
    block = _type_checking_block(tree)
    proofs = [node for node in block if isinstance(node, ast.FunctionDef) and node.name == PROOF]
    if not proofs:
        return None
    versions = {
        int(alias.name[1:])
        for node in block
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kio.schema.")
        for alias in node.names
        if re.fullmatch(r"v\d+", alias.name)
    }
    assert proofs[0].returns is not None
    return versions, {name.id for name in _names(proofs[0].returns)}


def _modules_with_views() -> list[ApiKey]:
    return [key for key in SERVED if _views(_source(key.name.lower()))]


def _reached(start: set[str], views: dict[str, set[str]]) -> set[str]:
    reached: set[str] = set()
    todo = [name for name in start if name in views]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(other for other in views[name] if other in views)
    return reached


@pytest.mark.parametrize("api_key", _modules_with_views(), ids=lambda key: key.name.lower())
def test_a_module_with_views_proves_them_for_every_served_version(api_key: ApiKey) -> None:
    module = api_key.name.lower()
    tree = _source(module)
    proof = _proof(tree)
    assert proof is not None, f"{module}.py has views but no {PROOF} under TYPE_CHECKING"
    versions, result = proof
    served = SERVED[api_key]
    assert versions == set(range(served.min_version, served.max_version + 1))
    imports = [
        node
        for node in _type_checking_block(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kio.schema.")
    ]
    assert {node.module for node in imports} == {f"kio.schema.{api_key_map[api_key]}"}

    shared = _views(_source(SHARED))
    views = {**shared, **_views(tree)}
    unproven = set(_views(tree)) - _reached(result, views)
    assert not unproven, f"{module}.py: views its proof does not reach: {sorted(unproven)}"


def test_every_shared_view_is_proven_by_some_module() -> None:
    shared = _views(_source(SHARED))
    reached: set[str] = set()
    for api_key in _modules_with_views():
        tree = _source(api_key.name.lower())
        proof = _proof(tree)
        assert proof is not None
        reached |= _reached(proof[1], {**shared, **_views(tree)})
    assert set(shared) <= reached
