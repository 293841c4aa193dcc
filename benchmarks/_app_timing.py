"""What the benchmarks that time app pages share: one compiled-script cache for every
AppTest run (as a server has) and the CPU time of each script run's thread. Imported before
_root (this folder is still on sys.path then), like _bulk."""

from __future__ import annotations

import time


def share_script_cache() -> None:
    """AppTest compiles the page scripts afresh on every run (a new ScriptCache per run); a
    server compiles them once and keeps the bytecode. One shared cache measures what a
    server does on a rerun."""
    import streamlit.testing.v1.app_test as app_test
    import streamlit.testing.v1.local_script_runner as local
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache

    shared = ScriptCache()
    app_test.ScriptCache = local.ScriptCache = lambda: shared


class ScriptCPU:
    """The CPU time of each script run's thread (ms): what the page itself costs, which
    the other processes of a busy machine barely move (wall time does)."""

    def __init__(self) -> None:
        from streamlit.runtime.scriptrunner import script_runner

        self.runs: list[float] = []
        run = script_runner.ScriptRunner._run_script

        def timed_run(runner, *args, **kwargs):
            t = time.thread_time()
            try:
                return run(runner, *args, **kwargs)
            finally:
                self.runs.append((time.thread_time() - t) * 1000)

        script_runner.ScriptRunner._run_script = timed_run
