"""`studies.common.code_snapshot`: the frozen copy of HEAD that long runs execute.

Two schedulers are started together at the beginning of a session; both ask for the
snapshot of the same commit. Before the fix, each extracted into the same ``.partial``
directory and removed the other's half-written copy, and one scheduler died with
``OSError: Directory not empty``.
"""

import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]

_CHILD = """
import sys
sys.path.insert(0, {repo!r})
from studies.common import code_snapshot
path, commit = code_snapshot({directory!r}, {repo!r})
print(path)
"""


def test_concurrent_snapshots_of_one_commit_both_succeed(tmp_path):
    directory = tmp_path / "code"
    child = _CHILD.format(repo=str(REPO), directory=str(directory))
    processes = [subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outputs = [p.communicate(timeout=120) for p in processes]
    for process, (out, err) in zip(processes, outputs):
        assert process.returncode == 0, err
    paths = {out.strip() for out, _ in outputs}
    assert len(paths) == 1
    target = pathlib.Path(paths.pop())
    assert (target / "tfktopic" / "__init__.py").exists()
    assert (target / "benchmarks" / "common.py").exists()
    assert (target / "studies" / "common.py").exists()
    # No half-written copy is left behind.
    assert [p.name for p in directory.iterdir()] == [target.name]


def test_snapshot_is_reused_for_the_same_commit(tmp_path):
    from studies.common import code_snapshot

    first, commit = code_snapshot(tmp_path, REPO)
    marker = first / "marker"
    marker.write_text("kept")
    second, again = code_snapshot(tmp_path, REPO)
    assert (second, again) == (first, commit)
    assert marker.read_text() == "kept"
