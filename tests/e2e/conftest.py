"""Real-browser fixtures: the app as `react-editor app` serves it (app_server.py, behind the
gate, with an access token) on 127.0.0.1 over a fresh database, a scripted model server, and Debian's Chromium driven by Playwright. Screenshots of failed
tests go to test-artifacts/."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.scripted_server import ScriptedLLM

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class App:
    """A running app, started as `react-editor app` starts it (the same argv, a fresh token).
    `url` is the bare address; `link(path)` the address with the token (`?token=`), which
    sets the cookie every later request of that browser context carries."""

    def __init__(self, db: Path, env: dict[str, str] | None = None):
        from agent.gate import new_token
        from react_editor.launch import streamlit_argv

        self.db = db
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = new_token()
        e = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
        e.update({"REACT_EDITOR_DB": str(db), "PYTHONPATH": str(ROOT), "REACT_EDITOR_TOKEN": self.token,
                  **(env or {})})
        self.log = db.with_suffix(".streamlit.log")
        self._log = open(self.log, "wb")
        self.proc = subprocess.Popen(
            streamlit_argv("127.0.0.1", self.port) + ["--server.fileWatcherType", "none"],
            cwd=str(ROOT), env=e, stdout=self._log, stderr=subprocess.STDOUT,
        )
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

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (Debian's chromium; installed by .ci/run)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def start_app(tmp_path, browser):
    """`start_app(env=None)` -> App over tmp_path/e2e.db (prepare the db before starting); the
    browser's open contexts are let in (the test's `page`); a new context must open `app.link()`."""
    apps: list[App] = []

    def start(env: dict[str, str] | None = None) -> App:
        app = App(tmp_path / "e2e.db", env)
        apps.append(app)
        for ctx in browser.contexts:
            app.admit(ctx)
        return app

    yield start
    for a in apps:
        a.stop()


@pytest.fixture
def page(browser, request):
    """A fresh page; on failure a full-page screenshot goes to test-artifacts/<test>.png.
    Records any JS dialog (alert/confirm) the page opens in `page.dialogs`."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
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
