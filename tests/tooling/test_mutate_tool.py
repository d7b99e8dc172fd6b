"""The mutation-testing tool (`tools/mutate.py`): its mutants still apply, its generated
sites are the mathematics, and a long generated run continues where it was killed.

The mutants themselves run in `tools/mutate.py` (hours); these checks run no mutant.
"""
import ast
import hashlib
import importlib.util
import json

import pytest

from conftest import REPO_ROOT

_spec = importlib.util.spec_from_file_location("mutate", REPO_ROOT / "tools" / "mutate.py")
mutate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mutate)


def test_every_named_mutation_still_applies_to_exactly_one_file():
    """A refactoring that moves or rewrites the mutated line makes the mutant test nothing:
    caught here, without running it."""
    sources = {path: path.read_text() for path in (REPO_ROOT / "tfktopic").rglob("*.py")}
    for mutation in mutate.MUTATIONS:
        files = [path for path, text in sources.items()
                 if all(text.count(old) == 1 for old, _ in mutation["edits"])]
        assert len(files) == 1, (mutation["id"], files)
        for test in mutation["tests"]:
            assert (REPO_ROOT / test.split("::")[0]).exists(), (mutation["id"], test)


def test_every_core_module_and_its_tests_exist():
    for module, tests in mutate.CORE.items():
        assert (REPO_ROOT / module).exists(), module
        assert tests and all((REPO_ROOT / t).exists() for t in tests), (module, tests)


def test_generated_sites_are_the_functions_arithmetic_not_messages_or_configs():
    source = '''
SCALE = 2.0 * 3.0
def f(x):
    if x < 0:
        raise ValueError(f"x must be >= {0 + 1}, got {x * 1}")
    return ops.tanh(x) * 0.5 + x[1]
class Layer:
    def get_config(self):
        return {"units": self.units + 1}
'''
    tree = ast.parse(source)
    changes = sorted(mutate._mutate_site(tree, kind, path)[1]
                     for kind, path in mutate._candidate_sites(tree))
    # Line 6: tanh, the * and the +, the constants 0.5 and 1; line 4: the comparison's 0.
    assert changes == sorted([
        "line 4:11: constant 0 -> 1", "line 6:11: tanh -> sigmoid", "line 6:11: Mult -> Div",
        "line 6:11: Add -> Sub", "line 6:25: constant 0.5 -> 1.5",
        "line 6:33: constant 1 -> 2"]), changes
    # The description alone (no copy) is the mutant's; each mutant differs from the source.
    for kind, path in mutate._candidate_sites(tree):
        mutated, change = mutate._mutate_site(tree, kind, path)
        assert mutate.describe_site(tree, kind, path) == change
        assert ast.unparse(mutated) != ast.unparse(tree)


def test_every_explained_survivor_is_a_site_of_its_module_today():
    """An explanation keyed on a line that has since moved would excuse another mutant:
    each key must still be one of its module's generated mutants."""
    changes = {}
    for (module, change), reason in mutate.EXPLAINED.items():
        assert module in mutate.CORE and reason, module
        if module not in changes:
            tree = ast.parse((REPO_ROOT / module).read_text())
            changes[module] = {mutate.describe_site(tree, kind, path)
                               for kind, path in mutate._candidate_sites(tree)}
        assert change in changes[module], (module, change)


def _changed_copy(scratch_copy, module):
    def copy(directory):
        directory = scratch_copy(directory)
        path = directory / module
        path.write_text(path.read_text() + "\n# changed\n")
        return directory
    return copy


def test_a_generated_run_resumes_from_its_report(tmp_path, monkeypatch):
    """Killed after some mutants, the same command with --resume runs only the others; a
    changed module is mutated again (its old results are for another source)."""
    calls = []
    module = "tfktopic/evaluation/perplexity.py"

    def fake_tests(directory, tests, timeout):
        calls.append(tests)
        # The unmutated copy passes; a mutant (written by ast.unparse, so in its canonical
        # form, unlike the source with its comments) fails.
        text = (directory / module).read_text()
        mutant = text == ast.unparse(ast.parse(text))
        return ("killed", 0.0, "1 failed") if mutant else ("survived", 0.0, "passed")

    monkeypatch.setattr(mutate, "_run_tests", fake_tests)
    monkeypatch.setattr(mutate, "_assert_package_used", lambda directory: None)
    report = tmp_path / "mutants.json"
    first = mutate.run_auto([module], 60, 3, report)
    assert len(calls) == 4        # the unmutated baseline, then 3 mutants
    assert [r["site"] for r in first] == ["baseline", 0, 1, 2]
    assert json.loads(report.read_text()) == first
    calls.clear()
    second = mutate.run_auto([module], 60, 5, report, resume=True)
    assert len(calls) == 2 and second[:4] == first
    assert [r["site"] for r in second] == ["baseline", 0, 1, 2, 3, 4]
    assert json.loads(report.read_text()) == second
    # After new tests: the survivors of the module run again, the killed ones do not.
    # An explained survivor (site 4) is not run again.
    survivors = [dict(r, status="survived") if r["site"] in (1, 3, 4) else r for r in second]
    report.write_text(json.dumps(survivors))
    monkeypatch.setitem(mutate.EXPLAINED, (module, survivors[-1]["change"]), "a reason")
    calls.clear()
    retried = mutate.run_auto([module], 60, 5, report, resume=True, retry_survivors=True)
    verdicts = {r["site"]: r["status"] for r in retried}
    assert len(calls) == 2 and verdicts[3] == "killed" and verdicts[4] == "survived"
    # The module changed since: its old results are dropped and it runs again.
    monkeypatch.setattr(mutate, "_scratch_copy", _changed_copy(mutate._scratch_copy, module))
    calls.clear()
    third = mutate.run_auto([module], 60, 2, report, resume=True)
    assert len(calls) == 3 and [r["site"] for r in third] == ["baseline", 0, 1]
    with pytest.raises(SystemExit):
        mutate.main(["--auto", module, "--resume"])   # --resume needs --report
    # Two shards share the module's sites: the even ones, then the odd ones.
    calls.clear()
    even = mutate.run_auto([module], 60, 5, tmp_path / "even.json", shard=(0, 2))
    odd = mutate.run_auto([module], 60, 5, tmp_path / "odd.json", shard=(1, 2))
    assert [r["site"] for r in even] == ["baseline", 0, 2, 4]
    assert [r["site"] for r in odd] == ["baseline", 1, 3]
    for bad in ("2/2", "1", "a/b", "-1/2"):
        with pytest.raises(SystemExit):
            mutate.main(["--auto", module, "--shard", bad])


def test_a_generated_run_refuses_a_module_whose_tests_fail_unmutated(tmp_path, monkeypatch):
    monkeypatch.setattr(mutate, "_run_tests", lambda d, t, timeout: ("killed", 0.0, "1 failed"))
    monkeypatch.setattr(mutate, "_assert_package_used", lambda directory: None)
    with pytest.raises(SystemExit, match="fail on the unmutated"):
        mutate.run_auto(["tfktopic/evaluation/perplexity.py"], 60, 2, tmp_path / "r.json")


def test_a_module_that_moved_is_reported_once_however_often_the_run_resumes(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setattr(mutate, "_assert_package_used", lambda directory: None)
    monkeypatch.setitem(mutate.CORE, "tfktopic/no_such_module.py", ["tests/library/test_bleu.py"])
    report = tmp_path / "r.json"
    for _ in range(2):
        mutate.run_auto(["tfktopic/no_such_module.py"], 60, 0, report, resume=True)
    assert [r["status"] for r in json.loads(report.read_text())] == ["not applied"]


def test_reports_of_runs_on_different_cores_merge_and_a_later_verdict_wins(tmp_path, capsys):
    first = [{"module": "a.py", "change": "none (baseline)", "status": "baseline passes",
              "site": "baseline", "source_sha256": "1"},
             {"module": "a.py", "change": "x", "status": "survived", "site": 0,
              "source_sha256": "1"},
             {"module": "a.py", "change": "y", "status": "killed", "site": 1,
              "source_sha256": "1"}]
    second = [{"module": "b.py", "change": "z", "status": "killed", "site": 0,
               "source_sha256": "2"}]
    module = "tfktopic/evaluation/perplexity.py"     # a real module: its text is known
    digest = hashlib.sha256((REPO_ROOT / module).read_text().encode()).hexdigest()
    second += [{"module": module, "change": "c", "status": "killed", "site": 0,
                "source_sha256": digest},
               {"module": module, "change": "c", "status": "survived", "site": 0,
                "source_sha256": "an older text"}]                 # stale: dropped
    retry = [dict(first[1], status="killed")]
    paths = []
    for name, results in (("a", first), ("b", second), ("retry", retry)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(results))
    out = tmp_path / "all.json"
    assert mutate.main(["--merge", *map(str, paths), "--report", str(out)]) == 0
    merged = json.loads(out.read_text())
    assert len(merged) == 5
    statuses = {(r["module"], r["site"]): r["status"] for r in merged}
    assert statuses[("a.py", 0)] == "killed" and statuses[(module, 0)] == "killed"
    assert "4 mutants: 4 killed, 0 survived" in capsys.readouterr().out
    # Copies of one report retried apart: each one's newer verdict wins, in any order.
    stale = dict(first[2], status="survived", ran_at=1.0)
    even = [stale, dict(first[1], status="killed", ran_at=2.0)]
    odd = [dict(first[1], status="survived", ran_at=1.0), dict(first[2], status="killed",
                                                               ran_at=3.0)]
    for order in ((even, odd), (odd, even)):
        for path, results in zip(paths, order):
            path.write_text(json.dumps(results))
        mutate.main(["--merge", *map(str, paths[:2]), "--report", str(out)])
        assert {r["site"]: r["status"] for r in json.loads(out.read_text())} == \
            {0: "killed", 1: "killed"}
    with pytest.raises(SystemExit):
        mutate.main(["--merge", str(paths[0])])                    # no --report
    with pytest.raises(SystemExit):
        mutate.main(["--merge", str(tmp_path / "none.json"), "--report", str(out)])
