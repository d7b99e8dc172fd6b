"""`tfktopic/runs/` names no model: what a model needs comes from its registry entry.

Issue 52: the model decides its data. The run machinery (training, evaluation, data, checks)
must not switch on a model's name or on a tuple of model types; a new model joins through
`tfktopic.models.registry` alone. Docstrings may show calls with a name (a user's input);
code may not carry one.
"""

import ast
import pathlib

import pytest

from tfktopic.models import registry

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUNS = sorted((ROOT / "tfktopic" / "runs").glob("*.py"))


def _docstring_nodes(tree):
    nodes = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                nodes.add(id(body[0].value))
    return nodes


def model_names_in_code(source, names):
    """(line, name) of every string constant outside docstrings that is a model name."""
    tree = ast.parse(source)
    docstrings = _docstring_nodes(tree)
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings and node.value in names]


def test_the_checker_finds_a_name_in_code_and_not_in_a_docstring():
    source = '"""train_run("tcnlm", ...)"""\nif model == "tcnlm":\n    pass\n'
    assert model_names_in_code(source, {"tcnlm"}) == [(2, "tcnlm")]


@pytest.mark.parametrize("path", RUNS, ids=lambda path: path.name)
def test_runs_code_names_no_registered_model(path):
    found = model_names_in_code(path.read_text(), set(registry.names()))
    assert not found, f"{path.relative_to(ROOT)} names models in code: {found}"


@pytest.mark.parametrize("path", RUNS, ids=lambda path: path.name)
def test_runs_code_has_no_model_type_tuple(path):
    tree = ast.parse(path.read_text())
    tuples = [node.id for node in ast.walk(tree)
              if isinstance(node, ast.Name) and node.id.endswith("_MODELS")]
    assert not tuples, f"{path.relative_to(ROOT)} uses model-type tuples: {sorted(set(tuples))}"
