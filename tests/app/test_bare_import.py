"""A worker process of a `--processes` batch started from the app re-imports the app's main
script bare (multiprocessing runs `__main__`'s file as `__mp_main__`; under Streamlit the
running page is `__main__`): the script must run to its end without a Streamlit runtime."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_app_script_runs_bare_as_a_worker_would_import_it(tmp_path):
    code = f"import runpy; runpy.run_path({str(ROOT / 'app.py')!r}, run_name='__mp_main__'); print('ok')"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REACT_EDITOR_DB": str(tmp_path / "bare.db")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]
