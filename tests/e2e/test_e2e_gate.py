"""Issue 26 item 9 in a real browser: the URL `react-editor app` prints opens the app and
leaves a cookie for the tab's later pages; a browser without the token sees nothing; app.py
run by plain `streamlit run` (no gate in front) shows no page."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

from tests.e2e.conftest import ROOT, _free_port


def _text(page) -> str:
    return page.inner_text("body")  # (the gate's answer is a plain page: no script draws later)


def test_the_printed_url_opens_the_app_and_nothing_opens_without_it(browser, start_app):
    app = start_app()
    stranger = browser.new_context()  # opened after the start: not let in (no `page`: a context it never used)
    try:
        other = stranger.new_page()
        other.goto(app.url)
        assert "Forbidden" in _text(other) and "Episodes" not in _text(other)
        other.goto(app.url + "/editor?token=wrong")
        assert "Forbidden" in _text(other)
        other.goto(app.link("/"))
        other.get_by_text("Start a new episode").first.wait_for()
        other.goto(app.url + "/settings")  # the cookie the link left opens the tab's later pages
        other.get_by_text("OPENAI_API_KEY").first.wait_for()
    finally:
        stranger.close()


def test_plain_streamlit_run_shows_no_page(browser, page, tmp_path):
    port = _free_port()
    log = open(tmp_path / "plain.log", "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(ROOT / "app.py"),
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--server.headless",
            "true",
            "--browser.gatherUsageStats",
            "false",
            "--server.fileWatcherType",
            "none",
        ],
        cwd=str(ROOT),
        env={**os.environ, "PYTHONPATH": str(ROOT), "REACT_EDITOR_DB": str(tmp_path / "p.db")},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read()
                break
            except OSError:
                time.sleep(0.3)
        page.goto(f"http://127.0.0.1:{port}/")
        page.get_by_text("Start the app with").first.wait_for()
        assert "Start a new episode" not in page.inner_text("body")
        assert not (tmp_path / "p.db").exists()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
