"""Every script's `--quick` smoke mode (README: "each has a `--quick` smoke mode") runs to
the end and exits 0. Slow (minutes each): run with ``python -m pytest -m slow``."""
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
#: The papers' setups (studies/papers/) and the maintainer's tools/make_pretrained.py, by name.
PATHS = {p.name: p for folder in (REPO / "studies" / "papers", REPO / "tools")
         for p in folder.glob("*.py") if "--quick" in p.read_text(encoding="utf-8")}
SCRIPTS = sorted(PATHS)


#: Scripts run from the repository root: make_pretrained's presets name the stop list as
#: "../shared/data/stopwords/mallet_en.txt", relative to the working directory.
CWD_REPO = {"make_pretrained.py"}


def test_the_scripts_with_a_quick_mode_are_found():
    assert len(SCRIPTS) >= 7, SCRIPTS


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_script_quick_mode_runs(script, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    # Every output goes under tmp_path (make_pretrained.py would otherwise write pretrained/).
    extra = ["--out", str(tmp_path / "out")]
    proc = subprocess.run([sys.executable, str(PATHS[script]), "--quick", *extra],
                          cwd=REPO if script in CWD_REPO else tmp_path, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
