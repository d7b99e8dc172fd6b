"""Pieces shared by the studies, the performance benchmarks and the tools: where the
repository and the corpora are, records without machine paths, a frozen code snapshot for
long runs, and the "mean +- sd" format of the tables.

The performance benchmarks re-export these from `benchmarks.common`; the studies import them
from here, so nothing under ``studies/`` imports ``benchmarks/``.
"""

import os
import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = pathlib.Path(os.environ.get("TFKTOPIC_SHARED_DATA",
                                          REPO_ROOT.parent / "shared" / "data"))


def portable(value):
    """`value` (JSON-ready) with this machine's paths made relative to the project
    (``../shared/data/...`` for the corpora), so committed records hold no machine path."""
    if isinstance(value, dict):
        return {k: portable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [portable(v) for v in value]
    if isinstance(value, str):
        return value.replace(str(REPO_ROOT) + os.sep, "").replace(str(REPO_ROOT.parent) + os.sep,
                                                                  "../")
    return value


class MissingData(RuntimeError):
    """A benchmark's corpus is absent; the runner reports and skips it."""


def spread(summary, count):
    """"mean +- sd" over `count` seeds (`tfktopic.evaluation.comparison.seed_summary`), or the
    one seed's value: one seed has no spread to show."""
    if count > 1:
        return f"{summary['mean']:.2f} +- {summary['sd']:.2f}"
    return f"{summary['mean']:.2f} (one seed)"


def code_snapshot(directory, repo=REPO_ROOT):
    """A frozen copy of the committed code for a long run: HEAD's ``tfktopic/``,
    ``studies/`` and ``benchmarks/`` (those the commit has) extracted (``git archive``) to
    ``directory/<commit>``, once per commit.

    A training process that imports the working tree can crash hours later when a commit
    changes a module under it: autograph re-reads a function's source when it traces one
    (new input shapes, the final scoring), and the lines no longer match the code it runs.
    Run long jobs with the snapshot as working directory and ``PYTHONPATH`` instead.

    Args:
        directory: where snapshots live (e.g. ``runs/study/code``).
        repo: the git repository.

    Returns:
        (path, commit): the snapshot directory and HEAD's commit; ``(repo, None)`` when
        ``repo`` is not a git checkout (the live code is used then).
    """
    import io
    import subprocess
    import tarfile

    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return pathlib.Path(repo), None
    target = pathlib.Path(directory) / commit[:12]
    if not (target / "tfktopic" / "__init__.py").exists():
        present = subprocess.run(["git", "ls-tree", "--name-only", commit], cwd=repo,
                                 capture_output=True, text=True, check=True).stdout.split()
        folders = [name for name in ("tfktopic", "studies", "benchmarks") if name in present]
        archive = subprocess.run(["git", "archive", "--format=tar", commit, *folders], cwd=repo,
                                 capture_output=True, check=True)
        # Each process extracts into its own directory and renames it into place, so two
        # schedulers started together cannot remove each other's half-written copy; the
        # one that loses the rename keeps the winner's (identical) snapshot.
        import os
        import shutil

        partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(partial, filter="data")
        try:
            partial.rename(target)
        except OSError:
            if not (target / "tfktopic" / "__init__.py").exists():
                raise
            shutil.rmtree(partial, ignore_errors=True)
    return target, commit


def shared_file(relative):
    """Path of a corpus under ../shared/data (or $TFKTOPIC_SHARED_DATA)."""
    path = SHARED_DATA / relative
    if not path.exists():
        raise MissingData(f"{relative} not found at {path} (set TFKTOPIC_SHARED_DATA)")
    return path


def paste_between(path, markers, body):
    """Replace the text between the two `markers` of the page `path` with `body`.

    Args:
        path: a Markdown page.
        markers: (opening, closing) marker lines, e.g. ``("<!-- x -->", "<!-- /x -->")``.
        body: the new text between them.

    Returns:
        bool: whether both markers were there (without them nothing is written).
    """
    path = pathlib.Path(path)
    old = path.read_text() if path.exists() else ""
    if markers[0] not in old or markers[1] not in old:
        return False
    head, rest = old.split(markers[0], 1)
    path.write_text(head + markers[0] + body + markers[1] + rest.split(markers[1], 1)[1])
    return True
