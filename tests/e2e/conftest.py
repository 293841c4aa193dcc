"""Real-browser fixtures: the app as `react-editor app` serves it (app.py behind app_server.py's
gate, with an access token) on 127.0.0.1 over a fresh database per test, a scripted model
server, and Debian's Chromium driven by Playwright. One Chromium and one Streamlit server per
test process (served_app.py, pointed at each test's database); a fresh browser context per
test. Screenshots of failed tests go to test-artifacts/."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.scripted_server import ScriptedLLM

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class App:
    """A running app, started as `react-editor app` starts it (the same argv, a fresh token).
    `url` is the bare address; `link(path)` the address with the token (`?token=`), which
    sets the cookie every later request of that browser context carries."""

    def __init__(self, db: Path, env: dict[str, str] | None = None, script: Path | None = None, wait: bool = True):
        """`script`: served instead of app_server.py, with the same flags (served_app.py);
        `wait=False`: return once the process is started (`ready()` waits for it to answer)."""
        from agent.gate import new_token
        from react_editor.launch import APP, streamlit_argv

        self.db = db
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = new_token()
        e = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
        e.update({"REACT_EDITOR_DB": str(db), "PYTHONPATH": str(ROOT), "REACT_EDITOR_TOKEN": self.token, **(env or {})})
        self.log = db.with_suffix(".streamlit.log")
        self._log = open(self.log, "wb")
        self.proc = subprocess.Popen(
            [str(script or APP) if a == str(APP) else a for a in streamlit_argv("127.0.0.1", self.port)]
            + ["--server.fileWatcherType", "none"],
            cwd=str(ROOT),
            env=e,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        if wait:
            self.ready()

    def ready(self) -> None:
        """Wait until the server answers its health check (60 s at most)."""
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(self.url + "/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"streamlit did not start:\n{self.log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)

    def link(self, path: str = "/") -> str:
        """`path` (with or without a query) on this app, carrying the access token."""
        return f"{self.url}{path}{'&' if '?' in path else '?'}token={self.token}"

    def admit(self, context) -> None:
        """Let a browser context in, as opening `link()` once does (the token's cookie)."""
        context.add_cookies([{"name": f"react_editor_token_{self.port}", "value": self.token, "url": self.url}])

    def point_at(self, db: Path, env: dict[str, str] | None = None) -> None:
        """served_app.py only: serve `db` with `env` (over the start environment) from now on,
        as a server started afresh for them would (see served_app.point_at)."""
        if self.proc.poll() is not None:
            raise RuntimeError(f"streamlit stopped:\n{self.log.read_text(errors='replace')[-3000:]}")
        req = urllib.request.Request(
            self.link("/api/e2e/env"),
            method="POST",
            data=json.dumps({"REACT_EDITOR_DB": str(db), **(env or {})}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 200

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()


_EARLY: list[App] = []  # the server started when the tests were collected (pytest_collection_finish)


def _start_server(where: Path) -> App:
    return App(where / "warm-up.db", script=Path(__file__).with_name("served_app.py"), wait=False)


def pytest_collection_finish(session) -> None:
    """When this run holds browser tests, this process starts its Streamlit server now: its
    imports run while the tests before them do, not in the first browser test's time."""
    here = Path(__file__).parent
    if any(Path(item.path).is_relative_to(here) for item in session.items):
        _EARLY.append(_start_server(Path(session.config._tmp_path_factory.mktemp("served"))))


@pytest.fixture(scope="session")
def server_process(tmp_path_factory) -> Iterator[App]:
    """This test process's Streamlit server (served_app.py), started when the tests were
    collected (or now, before Chromium, so that its imports overlap the browser's start);
    `served` waits for it and draws its first page."""
    app = _EARLY.pop() if _EARLY else _start_server(tmp_path_factory.mktemp("served"))
    try:
        yield app
    finally:
        app.stop()


def pytest_sessionfinish(session) -> None:
    while _EARLY:  # started, and no test asked for it
        _EARLY.pop().stop()


@pytest.fixture(scope="session")
def browser(server_process):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (Debian's chromium; installed by .ci/run)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed")
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)  # as the pages' own default (a loaded machine draws slowly)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest.fixture(scope="session")
def served(browser, server_process) -> App:
    """This test process's Streamlit server; each test points it at its own database
    (`start_app`). Its first page (the app's imports) is drawn here, once."""
    app = server_process
    app.ready()
    ctx = browser.new_context()
    app.admit(ctx)
    ctx.new_page().goto(app.url + "/episodes")
    ctx.pages[0].get_by_text("Start a new episode").first.wait_for(timeout=120_000)
    ctx.close()
    return app


@pytest.fixture
def start_app(tmp_path, browser, served):
    """`start_app(env=None)` -> the App, now over tmp_path/e2e.db with `env` (prepare the db
    before starting); the browser's open contexts are let in (the test's `page`); a new context
    must open `app.link()`."""

    def start(env: dict[str, str] | None = None) -> App:
        served.point_at(tmp_path / "e2e.db", env)
        for ctx in browser.contexts:
            served.admit(ctx)
        return served

    yield start


@pytest.fixture
def page(browser, request):
    """A fresh page; on failure a full-page screenshot goes to test-artifacts/<test>.png.
    Records any JS dialog (alert/confirm) the page opens in `page.dialogs`, and the script
    runs it asks for in `page.run_watch` (browser_helpers.settle)."""
    from tests.e2e.browser_helpers import RunWatch

    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.run_watch = RunWatch(pg)  # type: ignore[attr-defined]
    pg.set_default_timeout(20_000)
    pg.dialogs = []  # type: ignore[attr-defined]

    def on_dialog(d):
        pg.dialogs.append(d.message)  # type: ignore[attr-defined]
        d.dismiss()

    pg.on("dialog", on_dialog)
    yield pg
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        try:
            pg.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
        except Exception:  # the page may be gone; the log still helps
            pass
    ctx.close()


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)
