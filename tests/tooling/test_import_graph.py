"""The repository's import graph (every tracked ``.py`` file, read with `ast`, imports inside
functions included): no circle between modules, none between the top-level folders, and no
arrow from the library up into the reproduction work, the benchmarks, the tools or the tests.

A circle makes a module's meaning depend on which side is imported first; an arrow from
``tfktopic/`` up would ship the studies with the library.
"""
import ast
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
#: The library; it may import only itself (and third-party packages).
LIBRARY = "tfktopic"
#: Folders above the library: it must never import them.
ABOVE = ("studies", "benchmarks", "scripts", "tools", "tests")


def _python_files(repo):
    """Every tracked .py file (untracked scratch files do not count), relative to `repo`."""
    try:
        listed = subprocess.run(["git", "ls-files", "*.py"], cwd=repo, capture_output=True,
                                text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        listed = [str(p.relative_to(repo)) for p in repo.rglob("*.py")
                  if ".venv" not in p.parts and "site" not in p.parts]
    return sorted(pathlib.PurePosixPath(name) for name in listed)


def _module_name(path):
    parts = list(path.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(repo=REPO, files=None):
    """{module: set of the repository's modules it imports}.

    Args:
        repo: the repository root.
        files: {relative path: source}; default: the tracked .py files under `repo`.

    Returns:
        The graph, over the repository's own modules only (third-party imports dropped);
        ``from package import name`` points at ``package.name`` when that is a module.
    """
    if files is None:
        files = {path: (repo / path).read_text(encoding="utf-8") for path in _python_files(repo)}
    sources = {_module_name(pathlib.PurePosixPath(path)): (pathlib.PurePosixPath(path), source)
               for path, source in files.items()}
    known = set(sources)

    def deepest(name):
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, (path, source) in sources.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(source, filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(deepest(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".") if package else []
                    anchor = anchor[:len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    targets.add(deepest(f"{base}.{alias.name}" if base else alias.name))
        targets.discard(None)
        targets.discard(module)
        graph[module] = targets
    return graph


def circles(graph):
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def folder_graph(graph):
    """The graph between top-level folders (``tfktopic``, ``studies``, ...)."""
    folders = {}
    for module, targets in graph.items():
        top = module.split(".")[0]
        folders.setdefault(top, set()).update(t.split(".")[0] for t in targets)
    for top, targets in folders.items():
        targets.discard(top)
    return folders


@pytest.fixture(scope="module")
def graph():
    return import_graph()


def test_the_checker_sees_circles_and_relative_imports():
    files = {"a/__init__.py": "", "a/x.py": "from . import y\n",
             "a/y.py": "def f():\n    from a.x import g\n",
             "b.py": "import a.x\nimport numpy\n"}
    graph = import_graph(files=files)
    assert graph["a.x"] == {"a.y"} and graph["a.y"] == {"a.x"}
    assert graph["b"] == {"a.x"}
    assert circles(graph) == [["a.x", "a.y"]]
    assert folder_graph(graph) == {"a": set(), "b": {"a"}}


def test_the_graph_covers_the_repository(graph):
    for module in ("tfktopic.runs", "studies.study.protocol", "studies.study.scheduler",
                   "studies.study.report", "benchmarks.speed", "tools.mutate", "tests.backends"):
        assert module in graph, module
    assert "studies.study.protocol" in graph["studies.study.report"]


def test_the_studys_scheduler_reads_its_protocol_and_the_protocol_runs_nothing(graph):
    """Issue 52: the study's protocol is data and pure functions of it; the scheduler (which
    starts, claims, collects and scores runs) imports it, never the reverse, the report reads
    only the protocol, and the protocol imports no module that starts processes, takes locks
    or writes files."""
    assert "studies.study.protocol" in graph["studies.study.scheduler"]
    assert "studies.study.scheduler" not in graph["studies.study.protocol"]
    assert "studies.study.scheduler" not in graph["studies.study.report"]
    tree = ast.parse((REPO / "studies" / "study" / "protocol.py").read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert imported & {"subprocess", "fcntl", "os", "shutil", "tempfile", "multiprocessing"} \
        == set()


def test_no_import_circle_through_the_studies_benchmarks_or_tools(graph):
    outside = [circle for circle in circles(graph)
               if any(module.split(".")[0] != LIBRARY for module in circle)]
    assert outside == []


def test_no_import_circle_between_modules(graph):
    assert circles(graph) == []


def test_no_import_circle_between_top_level_folders(graph):
    assert circles(folder_graph(graph)) == []


def test_the_library_imports_nothing_above_it(graph):
    upward = sorted((module, target) for module, targets in graph.items()
                    if module.split(".")[0] == LIBRARY
                    for target in targets if target.split(".")[0] in ABOVE)
    assert upward == []


def test_the_studies_do_not_import_the_benchmarks(graph):
    """The performance benchmarks may use the study's settings; not the other way round."""
    assert folder_graph(graph).get("studies", set()) <= {LIBRARY}
