"""Issue 11 item 11: the app binds to loopback wherever it is started from. `react-editor app`
launches Streamlit on 127.0.0.1 (XSRF on, usage stats off) from any folder, and app.py itself
refuses to serve on a non-loopback address unless asked to."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import streamlit as st
from streamlit import config
from streamlit.testing.v1 import AppTest

from tests.launch_helpers import free_port, listening

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


def test_react_editor_app_listens_on_loopback_from_any_folder(tmp_path):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REACT_EDITOR_DB": str(tmp_path / "a.db")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "react_editor", "app", "--port", str(port), "--no-browser"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    if r.read() == b"ok":
                        break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("the app did not come up")
        assert listening(port) == ["0100007F"]  # 127.0.0.1 only, not 0.0.0.0 or ::
    finally:
        os.killpg(proc.pid, 15)
        out = proc.communicate(timeout=30)[0].decode(errors="replace")
    assert "127.0.0.1" in out


def test_launcher_options():
    from react_editor.launch import streamlit_argv

    argv = streamlit_argv("127.0.0.1", 8600)
    opts = dict(zip(argv[5::2], argv[6::2]))
    assert argv[:5] == [sys.executable, "-m", "streamlit", "run", str(ROOT / "app_server.py")]  # behind the gate
    assert opts == {
        "--server.address": "127.0.0.1",
        "--server.port": "8600",
        "--server.headless": "true",
        "--server.enableXsrfProtection": "true",
        "--browser.gatherUsageStats": "false",
        "--logger.hideWelcomeMessage": "true",
        "--runner.postScriptGC": "false",
    }


@pytest.fixture
def bound(monkeypatch, tmp_path):
    """Run app.py as if the server were bound to `address`."""
    old = config.get_option("server.address")
    monkeypatch.setenv("REACT_EDITOR_DB", str(tmp_path / "never" / "made.db"))
    monkeypatch.delenv("REACT_EDITOR_TOKEN", raising=False)
    st.cache_resource.clear()

    def run(address):
        config.set_option("server.address", address)
        return AppTest.from_file(APP, default_timeout=30).run()

    yield run
    config.set_option("server.address", old)
    st.cache_resource.clear()


@pytest.mark.parametrize("address", [None, "", "0.0.0.0", "::", "192.168.1.20"])
def test_the_app_refuses_a_non_loopback_address(bound, address, tmp_path):
    at = bound(address)
    assert not at.exception
    assert any("127.0.0.1" in e.value and "react-editor app" in e.value for e in at.error), [e.value for e in at.error]
    assert [t.value for t in at.title] == []  # no page ran: nothing is served
    assert not (tmp_path / "never").exists()  # not even the database was opened


def test_beyond_loopback_a_person_presents_the_token_before_any_page(bound, monkeypatch, tmp_path):
    at = bound("0.0.0.0")
    assert at.error and [t.value for t in at.title] == []
    monkeypatch.setenv("REACT_EDITOR_TOKEN", "tok-" + "x" * 28)
    at = bound("0.0.0.0")
    assert [t.value for t in at.title] == ["Access token"]  # the prompt, no page
    at.text_input(key="access_token").set_value("wrong")
    at = at.button[0].click().run()
    assert [t.value for t in at.title] == ["Access token"] and any("not right" in e.value for e in at.error)
    assert not (tmp_path / "never").exists()  # no page ran: the database was not opened
    at.text_input(key="access_token").set_value("tok-" + "x" * 28)
    at = at.button[0].click().run()
    assert [t.value for t in at.title] == ["Episodes"]


def _launch(monkeypatch, tmp_path, capsys, *argv):
    from react_editor import launch
    from react_editor.main import main

    started = []
    monkeypatch.setattr(launch, "serve", lambda argv, env: started.append((argv, env)) or 0)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    code = main(["app", *argv])
    return code, capsys.readouterr().err, started


def test_react_editor_app_makes_a_token_and_refuses_the_network_without_one(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("REACT_EDITOR_TOKEN", raising=False)
    code, err, started = _launch(monkeypatch, tmp_path, capsys, "--address", "0.0.0.0", "--no-token", "--no-browser")
    assert code == 2 and err.count("\n") == 1 and "--no-token" in err and started == [], err
    code, err, started = _launch(monkeypatch, tmp_path, capsys, "--address", "127.0.0.1", "--no-token", "--no-browser")
    assert code == 0 and "REACT_EDITOR_TOKEN" not in started[0][1] and "token=" not in err  # loopback: as asked
    code, err, started = _launch(monkeypatch, tmp_path, capsys, "--address", "0.0.0.0", "--no-browser")
    token = started[0][1]["REACT_EDITOR_TOKEN"]
    assert code == 0 and len(token) >= 40 and f"?token={token}" in err  # a fresh token, in the printed URL
    assert _launch(monkeypatch, tmp_path, capsys, "--no-browser")[2][0][1]["REACT_EDITOR_TOKEN"] != token
    monkeypatch.setenv("REACT_EDITOR_TOKEN", "tok-" + "y" * 28)
    code, err, started = _launch(monkeypatch, tmp_path, capsys, "--address", "0.0.0.0", "--no-browser")
    assert code == 0 and started and started[0][1]["REACT_EDITOR_TOKEN"] == "tok-" + "y" * 28


def test_streamlit_run_in_the_project_binds_loopback():
    import tomllib

    conf = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert conf["server"]["address"] == "127.0.0.1"


@pytest.mark.parametrize(
    "flags, says",
    [
        (
            ("--address", "evil.example"),
            "--address 'evil.example': the app cannot listen there (Name or service not known)",
        ),
        (
            ("--address", "192.0.2.1"),
            "--address '192.0.2.1': the app cannot listen there (Cannot assign requested address)",
        ),
        (("--address", "a" * 300), "the app cannot listen there"),
        (("--port", "70000"), "--port 70000: a port is 1 to 65535"),
    ],
)
def test_an_address_the_app_cannot_listen_on_is_one_line(tmp_path, flags, says):
    """Issue 39 item 14: the real `react-editor app` (before: Streamlit's 36-line gaierror
    traceback, exit 1, after printing a token for a URL that never served)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REACT_EDITOR_DB": str(tmp_path / "a.db")}
    proc = subprocess.run(
        [sys.executable, "-m", "react_editor", "app", "--no-browser", "--port", str(free_port()), *flags],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,
    )
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1 and says in proc.stderr, proc.stderr
    assert not (tmp_path / "a.db").exists()


def test_react_editor_app_no_stream_turns_the_editors_streaming_off(monkeypatch, tmp_path, capsys):
    """`react-editor app --no-stream`: the app's model client asks for answers in one piece."""
    import subprocess

    monkeypatch.delenv("REACT_EDITOR_STREAM", raising=False)
    code, err, started = _launch(monkeypatch, tmp_path, capsys, "--no-browser", "--no-stream")
    assert code == 0 and started[0][1]["REACT_EDITOR_STREAM"] == "0"
    assert "REACT_EDITOR_STREAM" not in _launch(monkeypatch, tmp_path, capsys, "--no-browser")[2][0][1]
    probe = "import agent.model.client as c; print(c.STREAM[0])"
    for value, streams in (("0", "False"), (None, "True")):
        env = {k: v for k, v in os.environ.items() if k != "REACT_EDITOR_STREAM"}
        env.update({"PYTHONPATH": str(ROOT)} | ({"REACT_EDITOR_STREAM": value} if value else {}))
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
        assert out.stdout.strip() == streams, out.stderr
