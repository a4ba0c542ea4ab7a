"""The request views of broker/apis are proven against every served version.

A handler reads its request through a view (a read-only Protocol); the module proves the
view true in a `TYPE_CHECKING` block that mypy checks: a function taking each served
version's request class (kio's, or Brook's own for ControlledShutdown) and returning them
as the views. mypy fails where a version lacks a field of its view or has it with another
type. These tests check what mypy cannot: that a handler typed with a view has a proof,
that the proof names exactly the versions served (SERVED grows, the proof must follow),
and that every view of a module is reached by its proof (as the request, a base of it or
a nested entity of it), so that no view goes unproven.
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
# The API whose message types are Brook's, one class per version (<Name>V<N>).
OWN_SCHEMAS = {ApiKey.CONTROLLED_SHUTDOWN: "brook.protocol.controlled_shutdown_schema"}


def _source(module: str) -> ast.Module:
    spec = importlib.util.find_spec(f"brook.broker.apis.{module}")
    assert spec is not None and spec.origin is not None
    return ast.parse(Path(spec.origin).read_text())


def _names(node: ast.AST) -> set[str]:
    return {name.id for name in ast.walk(node) if isinstance(name, ast.Name)}


def _views(tree: ast.Module) -> dict[str, set[str]]:
    """Each view class of a module, with the names its bases and annotations mention."""
    return {
        node.name: set().union(*(_names(part) for part in [*node.bases, *node.body]))
        for node in tree.body
        if isinstance(node, ast.ClassDef) and node.name.endswith("View")
    }


def _aliases(tree: ast.Module) -> dict[str, set[str]]:
    """Each view alias of a module (`XView: TypeAlias = AView | BView`), with its names."""
    aliases = {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            target, value = node.target.id, node.value
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        else:
            continue
        if target.endswith("View") and value is not None:
            aliases[target] = _names(value)
    return aliases


def _type_checking_block(tree: ast.Module) -> list[ast.stmt]:
    """The statements of a module's `if TYPE_CHECKING:` blocks."""
    return [
        statement
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
        for statement in node.body
    ]


def _proof(tree: ast.Module) -> ast.FunctionDef | None:
    for node in _type_checking_block(tree):
        if isinstance(node, ast.FunctionDef) and node.name == PROOF:
            return node
    return None


def _proven_versions(tree: ast.Module, api_key: ApiKey) -> set[int]:
    """The versions whose request classes the proof imports (kio's vN modules, or the
    <Name>V<N> classes of Brook's own schema)."""
    schema = OWN_SCHEMAS.get(api_key, f"kio.schema.{api_key_map.get(api_key)}")
    imports = [
        node
        for node in _type_checking_block(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith(("kio.schema.", "brook.protocol."))
    ]
    assert {node.module for node in imports} == {schema}
    pattern = r"V(\d+)" if api_key in OWN_SCHEMAS else r"v(\d+)"
    return {
        int(found[1])
        for node in imports
        for alias in node.names
        if (found := re.search(pattern + "$", alias.name))
    }


def _request_annotation(tree: ast.Module) -> str:
    """How the module's handler (the function registered with @handles) types its request."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
            isinstance(d, ast.Call) and ast.unparse(d.func) == "handles"
            for d in node.decorator_list
        ):
            annotation = node.args.args[1].annotation
            assert annotation is not None
            return ast.unparse(annotation)
    raise AssertionError("no handler")


def _reached(start: set[str], graph: dict[str, set[str]]) -> set[str]:
    reached: set[str] = set()
    todo = [name for name in start if name in graph]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(other for other in graph[name] if other in graph)
    return reached


def _graph(tree: ast.Module) -> dict[str, set[str]]:
    shared = _source(SHARED)
    return {**_views(shared), **_aliases(shared), **_views(tree), **_aliases(tree)}


@pytest.mark.parametrize("api_key", list(SERVED), ids=lambda key: key.name.lower())
def test_a_handler_typed_with_views_proves_them_for_every_served_version(
    api_key: ApiKey,
) -> None:
    module = api_key.name.lower()
    tree = _source(module)
    proof = _proof(tree)
    if proof is None:
        assert not _views(tree), f"{module}.py has views but no {PROOF} under TYPE_CHECKING"
        assert _request_annotation(tree) in ("Any", "object"), f"{module}.py: no {PROOF}"
        return
    served = SERVED[api_key]
    assert _proven_versions(tree, api_key) == set(range(served.min_version, served.max_version + 1))
    assert proof.returns is not None
    proven = _reached(_names(proof.returns), _graph(tree))
    unproven = set(_views(tree)) - proven
    assert not unproven, f"{module}.py: views its proof does not reach: {sorted(unproven)}"
    graph = _graph(tree)
    classes = set(_views(_source(SHARED))) | set(_views(tree))
    read = _reached(_names(ast.parse(_request_annotation(tree), mode="eval")), graph) & classes
    assert read, f"{module}.py: the handler's request is typed with no view"
    assert read <= proven, f"{module}.py: the handler's request is not proven"


def test_every_shared_view_is_proven_by_some_module() -> None:
    reached: set[str] = set()
    for api_key in SERVED:
        tree = _source(api_key.name.lower())
        proof = _proof(tree)
        if proof is not None and proof.returns is not None:
            reached |= _reached(_names(proof.returns), _graph(tree))
    assert set(_views(_source(SHARED))) <= reached
