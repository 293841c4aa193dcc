"""Shared pytest fixtures. Keep this file to fixtures only; helpers live in their modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import envs.registry  # noqa: F401  (publishes the kinds sessions/ reads: trajectory.kinds)
from tests.scripted_server import ScriptedLLM

# -- the test session's own speed --------------------------------------------------------
# Four fixtures below replace internals of Streamlit (1.67) and httpx (0.27-0.29): each says why
# no public option does it. tests/test_conftest_patches.py checks that each still hits (the
# attribute exists with the signature the replacement mirrors, the replacement is installed,
# and a real AppTest run or client calls it), so an upgrade that moves one fails there instead
# of silently changing what the other tests exercise. Each replacement carries the function or
# class it replaces as `_conftest_replaces`.


@pytest.fixture(scope="session", autouse=True)
def _streamlit_components_scanned_once() -> Iterator[None]:
    """Each AppTest run scans the metadata of every installed distribution for Streamlit
    components (seconds with hundreds of packages, most of an AppTest's time); the
    installed set does not change during a session, so the first scan serves them all.
    Why a patch: Streamlit has no option to skip or cache the scan
    (`BidiComponentManager.discover_and_register_components` calls it for every AppTest)."""
    import functools

    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:  # another Streamlit: it scans as it likes
        yield
        return
    scan = manifest_scanner.scan_component_manifests
    once = functools.cache(scan)

    def scan_component_manifests(max_workers: int | None = None) -> list:
        return list(once())

    scan_component_manifests._conftest_replaces = scan  # type: ignore[attr-defined]
    manifest_scanner.scan_component_manifests = scan_component_manifests
    yield
    manifest_scanner.scan_component_manifests = scan


@pytest.fixture(scope="session", autouse=True)
def _app_scripts_compiled_once() -> Iterator[None]:
    """Each AppTest run compiles app.py and its page afresh (a new ScriptCache per run);
    one cache for the session serves them all, recompiling a script whose file changed.
    Why a patch: AppTest takes no script cache (it makes one in `AppTest._run` and in
    `LocalScriptRunner.__init__`), and a file's change is noted here, as Streamlit's own
    server does through its file watcher, which AppTest does not run."""
    import os

    try:
        from streamlit.runtime.scriptrunner.script_cache import ScriptCache
        from streamlit.testing.v1 import app_test, local_script_runner
    except ImportError:  # another Streamlit: it compiles as it likes
        yield
        return

    class UnchangedScripts(ScriptCache):
        def get_bytecode(self, script_path: str):
            st = os.stat(script_path)
            key = (os.path.abspath(script_path), st.st_mtime_ns, st.st_size)
            with self._lock:
                if self._stamps.get(key[0]) != key:
                    self._cache.pop(key[0], None)
                    self._stamps[key[0]] = key
            return super().get_bytecode(script_path)

    shared = UnchangedScripts()
    shared._stamps = {}
    saved = app_test.ScriptCache, local_script_runner.ScriptCache

    def shared_cache() -> ScriptCache:
        return shared

    shared_cache._conftest_replaces = ScriptCache  # type: ignore[attr-defined]
    app_test.ScriptCache = local_script_runner.ScriptCache = shared_cache
    yield
    app_test.ScriptCache, local_script_runner.ScriptCache = saved


# Tests that load both cores for many seconds: a real browser with the app's server, the built-in
# model's llama.cpp server, the benchmark scripts' processes. On 2 cores two of them at once starve
# each other past their waits (a browser click landing mid-redraw, a model server taking a minute
# to load), so they form one xdist group (`--dist loadgroup`): they run one after another, each
# beside the ordinary tests.
_ONE_AT_A_TIME = (
    "tests/e2e/",
    "tests/cli/test_local_model.py",
    "tests/app/test_local_model_app.py",
    "tests/benchmarks/",
)
# ... but for the benchmark scripts that run in one process (no child process, no server process,
# no thread pool): they load one core, as any test, so they run beside the group instead of lengthening
# it (tests/benchmarks/test_smoke.py checks that they start nothing).
ONE_PROCESS_SCRIPTS = (
    "engine.py",
    "paired_ci_agreement.py",
    "search.py",
    "stats_simulation.py",
    "textworld_plugin.py",
    "ui.py",
    "wikipedia.py",
)


def pytest_collection_modifyitems(config, items) -> None:
    import pytest

    beside = tuple(f"[{script}]" for script in ONE_PROCESS_SCRIPTS)
    for item in items:
        if item.nodeid.startswith(_ONE_AT_A_TIME) and not item.nodeid.endswith(beside):
            item.add_marker(pytest.mark.xdist_group("one_at_a_time"))


def pytest_configure(config) -> None:
    """The session's temporary files on a RAM file system when there is one with room
    (tests/fast_tmp.py): fsyncs cost nothing there. An explicit --basetemp or TMPDIR wins;
    pytest-xdist workers get their folders under the controller's."""
    import os
    import tempfile

    from tests import fast_tmp

    root = None if config.option.basetemp else fast_tmp.ram_temp_root()
    if root:
        tempfile.tempdir = root
        os.environ["TMPDIR"] = root  # the workers and any child process agree
    # A machine that sets PYTHONDONTWRITEBYTECODE (some CI images do) makes every child
    # process a test starts (`react-editor`, a runner to kill -9) compile the project from
    # source again; compiled once, the others read it (__pycache__ is ignored by git).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    # No test starts the built-in model unless it asks to (tests/cli/test_local_model.py): with
    # no OPENAI_* variable set, a run's default model is the OpenAI default, as before it.
    os.environ["REACT_EDITOR_LOCAL_MODEL"] = "off"


@pytest.fixture(scope="session", autouse=True)
def _app_runs_awaited_not_polled() -> Iterator[None]:
    """AppTest waits for a script run by waking every millisecond to look; each wake takes
    the GIL from the script thread. Waiting on the run's end event costs the script nothing
    (the same timeout, the same error when it passes). Why a patch: the poll is a module
    function `LocalScriptRunner.run` calls, with no option for its interval."""
    import threading

    try:
        from streamlit.runtime.scriptrunner import ScriptRunnerEvent
        from streamlit.testing.v1 import local_script_runner
    except ImportError:  # another Streamlit: it waits as it likes
        yield
        return

    def require_widgets_deltas(runner, timeout: float = 3) -> None:
        ended = threading.Event()

        def on_event(sender, event, **kwargs) -> None:
            if event == ScriptRunnerEvent.SHUTDOWN:
                ended.set()

        runner.on_event.connect(on_event, weak=False)
        try:
            if runner.script_stopped() or ended.wait(timeout):
                return
        finally:
            runner.on_event.disconnect(on_event)
        runner.request_stop()
        runner.join()
        raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")

    polled = local_script_runner.require_widgets_deltas
    require_widgets_deltas._conftest_replaces = polled  # type: ignore[attr-defined]
    local_script_runner.require_widgets_deltas = require_widgets_deltas
    yield
    local_script_runner.require_widgets_deltas = polled


@pytest.fixture(scope="session", autouse=True)
def _tls_trust_loaded_once() -> Iterator[None]:
    """Each new model client (one per scripted server, so one per test) builds a TLS context
    and parses the system's CA bundle (~50 ms). Tests only speak plain HTTP to 127.0.0.1, so
    the default context is built once and handed to every client of the session. Why a
    patch: the clients are the project's own (agent/model/wire.py builds each with httpx's
    default `verify=True`); sharing one context through httpx's public `verify=` would be a
    change of the model layer, not of the tests."""
    import importlib

    patched = []
    for name in ("httpx._transports.default", "httpx2._transports.default"):
        try:
            module = importlib.import_module(name)
            build = module.create_ssl_context
        except (ImportError, AttributeError):  # that httpx is not installed, or builds as it likes
            continue
        shared: list = []

        def create_ssl_context(verify=True, cert=None, trust_env=True, _build=build, _shared=shared):
            if verify is not True or cert is not None or not trust_env:
                return _build(verify=verify, cert=cert, trust_env=trust_env)
            if not _shared:
                _shared.append(_build())
            return _shared[0]

        create_ssl_context._conftest_replaces = build  # type: ignore[attr-defined]
        module.create_ssl_context = create_ssl_context
        patched.append((module, build))
    yield
    for module, build in patched:
        module.create_ssl_context = build


@pytest.fixture(scope="session", autouse=True)
def _databases_migrated_once(tmp_path_factory) -> Iterator[None]:
    """A new database a test opens in this process starts as a copy of one migrated at the
    session's start instead of running every migration again (tests/store_template.py).
    The migrations themselves run here and in tests/sessions/test_schema*.py. (The project's
    own `Store.__init__` is wrapped, no third-party internal: tests/test_session_speedups.py.)"""
    from tests import store_template

    undo = store_template.install(tmp_path_factory.mktemp("template"))
    yield
    undo()


# -- scripted model server (tests/scripted_server.py) --------------------------------------


@pytest.fixture(scope="session")
def scripted_llm_session() -> Iterator[ScriptedLLM]:
    """One scripted server for the whole session; call `.reset()` before scripting it."""
    with ScriptedLLM() as llm:
        yield llm


@pytest.fixture
def scripted_llm() -> Iterator[ScriptedLLM]:
    """A fresh scripted OpenAI-compatible server on 127.0.0.1 for one test.
    Script it with `.push(...)`, point clients at `.base_url`, assert on `.requests`."""
    with ScriptedLLM() as llm:
        yield llm


# -- engine with the in-test environments (tests/toy_envs.py) --------------------------------


@pytest.fixture
def toy(monkeypatch, tmp_path, scripted_llm):
    """An Engine over a fresh database whose alfworld/hotpotqa families are the toy envs,
    with tiny built-in exemplars, talking to the scripted model server."""
    from agent import exemplars
    from agent.engine import Engine
    from envs import registry
    from sessions.store import Store
    from tests import toy_envs

    fams = toy_envs.families()
    made = fams.pop("made")
    monkeypatch.setattr(registry, "_FAMILIES", dict(fams))
    table = {"alfworld": toy_envs.ROOM_EXEMPLARS, "hotpotqa": toy_envs.WIKI_EXEMPLARS}
    monkeypatch.setattr(exemplars, "builtin_prompt_dict", lambda env: table[env])
    store = Store(tmp_path / "t.db")
    engine = Engine(store, api_key="sk-test-key-not-real")

    class Toy:
        pass

    t = Toy()
    t.engine, t.store, t.llm, t.made, t.envs = engine, store, scripted_llm, made, toy_envs
    t.db = tmp_path / "t.db"
    yield t
    store.close()


# -- the Streamlit app through AppTest (helpers: tests/app_helpers.py) -----------------------


@pytest.fixture
def app(toy, monkeypatch):
    """(toy, make) - `make(page, **query)` returns an AppTest that has run `page`."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from tests.app_helpers import APP

    monkeypatch.setenv("REACT_EDITOR_DB", str(toy.db))
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "REACT_EDITOR_MODEL"):
        monkeypatch.delenv(var, raising=False)
    st.cache_resource.clear()

    def make(page: str | None = None, **query) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=30)
        if page:
            at.switch_page(f"app_pages/{page}.py")
        for k, v in query.items():
            at.query_params[k] = str(v)
        at.run()
        assert not at.exception, at.exception
        return at

    yield toy, make
    st.cache_resource.clear()


@pytest.fixture
def page(tmp_path, monkeypatch, scripted_llm):
    """The Experiments page over a fresh database: (make, db path, scripted model server).
    (tests/e2e/ has its own `page`, a browser page.)"""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from tests.app_helpers import APP

    db = tmp_path / "app.db"
    monkeypatch.setenv("REACT_EDITOR_DB", str(db))
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_llm.base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    st.cache_resource.clear()

    def make() -> AppTest:
        at = AppTest.from_file(APP, default_timeout=30)
        at.switch_page("app_pages/experiments.py")
        at.run()
        assert not at.exception, at.exception
        return at

    yield make, db, scripted_llm
    st.cache_resource.clear()


# -- a local static file server for the dataset downloads ----------------------------------


@pytest.fixture
def file_server(tmp_path):
    """(root dir, base URL) of an HTTP server on 127.0.0.1 serving `root`."""
    import threading
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    root = tmp_path / "www"
    root.mkdir()
    handler = partial(SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()
