"""Issue 26 items 8-10: the gate. `react-editor app` makes an access token at each start and
serves app.py behind `agent.gate.Gate`: a request without the token, or whose Host
is not a loopback name (DNS rebinding), never reaches Streamlit; OIDC sign-in needs an
allow-list."""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from agent.gate import email_allowed, host_allowed

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
WS = {
    "Upgrade": "websocket",
    "Connection": "Upgrade",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version": "13",
}
REBIND = "rebind.attacker.example"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port: int, path: str, host: str, headers: dict | None = None) -> tuple[int, str, bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path, headers={"Host": host, **(headers or {})})
        r = c.getresponse()
        return r.status, "; ".join(v for k, v in r.getheaders() if k.lower() == "set-cookie"), r.read()
    finally:
        c.close()


@pytest.fixture
def launched(tmp_path):
    """`launched(*flags)` -> (port, the URL it printed) of a real `react-editor app`."""
    procs = []

    def start(*flags: str) -> tuple[int, str]:
        port = _free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "REACT_EDITOR_DB": str(tmp_path / "g.db")}
        env.pop("REACT_EDITOR_TOKEN", None)
        log = open(tmp_path / f"{port}.log", "wb")
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "react_editor", "app", "--port", str(port), "--no-browser", *flags],
                cwd=tmp_path,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if _get(port, "/_stcore/health", f"127.0.0.1:{port}")[0] == 200:
                    break
            except OSError:
                time.sleep(0.3)
        else:
            pytest.fail("the app did not come up")
        return port, re.search(r"http://\S+", (tmp_path / f"{port}.log").read_text()).group(0)

    yield start
    for p in procs:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=30)


def test_a_rebinding_host_gets_nothing_and_the_page_needs_the_token(launched):
    port, url = launched()
    token = url.split("?token=")[1]
    assert url == f"http://127.0.0.1:{port}/?token={token}"
    for host in (f"{REBIND}:{port}", REBIND, f"127.0.0.1.{REBIND}:{port}", f"localhost:{port}@{REBIND}"):
        for path, headers in (
            ("/", {}),
            (f"/?token={token}", {}),
            ("/_stcore/health", {}),
            ("/_stcore/stream", WS),
            ("/_stcore/stream", {**WS, "Cookie": f"react_editor_token_{port}={token}"}),
        ):
            assert _get(port, path, host, headers)[0] == 403, (host, path)
    ok = f"127.0.0.1:{port}"
    assert _get(port, "/_stcore/health", ok)[:3:2] == (200, b"ok")
    assert _get(port, "/", ok)[0] == 403 and _get(port, "/_stcore/stream", ok, WS)[0] == 403  # no token, nothing
    assert _get(port, "/?token=wrong", ok)[0] == 403
    status, cookie, body = _get(port, f"/?token={token}", ok)
    assert status == 200 and b"<html" in body.lower() and f"react_editor_token_{port}={token}" in cookie
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    jar = {"Cookie": f"react_editor_token_{port}={token}"}
    assert _get(port, "/_stcore/stream", ok, {**WS, **jar})[0] == 101  # the websocket, with the cookie
    assert _get(port, "/_stcore/stream", f"localhost:{port}", {**WS, **jar})[0] == 101
    assert _get(port, "/_stcore/stream", ok, {**WS, **jar, "Origin": f"http://{REBIND}:{port}"})[0] == 403
    # issue 39 item 16: /healthz is Streamlit's index page, not a health check: it needs the token
    status, _, body = _get(port, "/healthz", ok)
    assert (status, body) == (
        403,
        b"Forbidden: open the address `react-editor app` printed: it carries the access token\n",
    )
    # a malformed cookie of another app's on 127.0.0.1 (or a second one of our name) does not lock the user out
    for cookie in (
        f'a="; react_editor_token_{port}={token}',
        f'react_editor_token_{port}={token}; a="',
        f"react_editor_token_{port}=planted; react_editor_token_{port}={token}",
    ):
        assert _get(port, "/", ok, {"Cookie": cookie})[0] == 200, cookie
        assert _get(port, "/_stcore/stream", ok, {**WS, "Cookie": cookie})[0] == 101, cookie
    assert _get(port, "/", ok, {"Cookie": f'a="; react_editor_token_{port}=wrong'})[0] == 403


def test_no_token_on_loopback_still_checks_the_host(launched):
    port, url = launched("--no-token")
    assert url == f"http://127.0.0.1:{port}/"
    assert _get(port, "/", f"127.0.0.1:{port}")[0] == 200
    assert _get(port, "/_stcore/stream", f"[::1]:{port}", WS)[0] == 101
    assert _get(port, "/", f"{REBIND}:{port}")[0] == 403
    assert _get(port, "/_stcore/stream", f"{REBIND}:{port}", WS)[0] == 403
    # issue 39 item 16: `Origin: null` (a sandboxed iframe on any site, a file: page) is no page of the app's
    for path, headers in (("/", {}), ("/_stcore/stream", WS)):
        assert _get(port, path, f"127.0.0.1:{port}", {**headers, "Origin": "null"})[0] == 403, path
    assert _get(port, "/_stcore/stream", f"127.0.0.1:{port}", {**WS, "Origin": f"http://127.0.0.1:{port}"})[0] == 101


@pytest.mark.parametrize(
    "host,address,ok",
    [
        ("127.0.0.1:8501", "127.0.0.1", True),
        ("localhost:8501", "127.0.0.1", True),
        ("[::1]:8501", "127.0.0.1", True),
        ("127.5.6.7", "127.0.0.1", True),
        ("LOCALHOST.", "127.0.0.1", True),
        ("rebind.attacker.example:8501", "127.0.0.1", False),
        ("127.0.0.1.nip.io", "127.0.0.1", False),
        ("", "127.0.0.1", False),
        ("127.0.0.1:x", "127.0.0.1", False),
        ("[::1", "127.0.0.1", False),
        ("10.0.0.5:8501", "127.0.0.1", False),
        ("10.0.0.5:8501", "10.0.0.5", True),
        ("gpu-box:8501", "gpu-box", True),
        ("10.0.0.5:8501", "0.0.0.0", True),
        ("rebind.attacker.example", "0.0.0.0", False),
    ],
)
def test_host_names_a_request_may_carry(host, address, ok):
    assert host_allowed(host, address) is ok


@pytest.mark.parametrize(
    "email,verified,ok",
    [
        ("ann@lab.example", True, True),
        ("ANN@Lab.Example", None, True),
        ("bob@corp.example", True, True),
        ("eve@gmail.com", True, False),
        ("ann@lab.example", False, False),
        ("ann@lab.example", "false", False),
        ("lab.example", True, False),
        ("@corp.example", True, False),
        ("x@sub.corp.example", True, False),
        (None, True, False),
    ],
)
def test_the_allow_list(email, verified, ok):
    assert email_allowed(email, {"ann@lab.example"}, {"corp.example"}, verified) is ok


def test_react_editor_app_refuses_oidc_without_an_allow_list(monkeypatch, tmp_path, capsys):
    from react_editor import launch
    from react_editor.main import main

    started = []
    monkeypatch.setattr(launch, "serve", lambda argv, env: started.append(env) or 0)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".streamlit").mkdir()
    secrets = tmp_path / ".streamlit" / "secrets.toml"
    secrets.write_text('[auth]\nredirect_uri = "http://h/oauth2callback"\n')
    assert main(["app", "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "allowed_emails" in err and started == []
    secrets.write_text(
        '[auth]\nredirect_uri = "http://h/oauth2callback"\n[access]\nallowed_domains = ["lab.example"]\n'
    )
    assert main(["app", "--no-browser"]) == 0 and started


@pytest.fixture
def app_test(monkeypatch, tmp_path):
    monkeypatch.setenv("REACT_EDITOR_DB", str(tmp_path / "never" / "made.db"))
    monkeypatch.delenv("REACT_EDITOR_TOKEN", raising=False)
    st.cache_resource.clear()
    yield lambda: AppTest.from_file(APP, default_timeout=30)
    st.cache_resource.clear()


def _titles(at) -> list[str]:
    return [t.value for t in at.title]


def test_oidc_lets_in_only_the_allow_list(app_test, tmp_path):
    auth = {
        "redirect_uri": "http://127.0.0.1:8501/oauth2callback",
        "cookie_secret": "x" * 32,
        "client_id": "id",
        "client_secret": "secret",
        "server_metadata_url": "http://127.0.0.1:1/.well-known",
    }
    at = app_test()
    at.secrets = {"auth": auth}
    at.user = {"is_logged_in": True, "email": "eve@gmail.com", "email_verified": True}
    at.run()
    assert _titles(at) == ["Sign-in is not set up"] and not (tmp_path / "never").exists()  # no list: nobody
    at = app_test()
    at.secrets = {"auth": auth, "access": {"allowed_emails": ["ann@lab.example"], "allowed_domains": ["corp.example"]}}
    at.user = {"is_logged_in": True, "email": "eve@gmail.com", "email_verified": True}
    at.run()
    assert _titles(at) == ["Not on the list"] and not (tmp_path / "never").exists()
    at.user = {"is_logged_in": True, "email": "ann@lab.example", "email_verified": True}
    at.run()
    assert _titles(at) == ["Episodes"]


def test_the_token_in_the_url_opens_the_page(app_test, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_TOKEN", "tok-" + "z" * 28)
    at = app_test()
    at.query_params = {"token": "tok-" + "z" * 27}
    assert _titles(at.run()) == ["Access token"]
    at = app_test()
    at.query_params = {"token": "tok-" + "z" * 28}
    assert _titles(at.run()) == ["Episodes"]


def test_one_loopback_check_and_one_token_name():
    """Issue 26 item 20: the launcher, the server gate and the page gate share one helper."""
    from agent import gate
    from app_pages import access
    from react_editor import launch

    assert access.is_loopback is launch.is_loopback is gate.is_loopback
    assert access.TOKEN_ENV is launch.TOKEN_ENV is gate.TOKEN_ENV
    assert not hasattr(launch, "ALLOW_REMOTE_ENV")


def _through_gate(path: str, headers: dict[str, str], token: str = "T0K") -> int:
    """The status `agent.gate.Gate` answers an HTTP request with (200: it reached the app)."""
    import asyncio

    from agent.gate import Gate

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"the app"})

    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "path": path,
        "query_string": b"",
        "server": ("127.0.0.1", 8501),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    asyncio.run(Gate(app, address="127.0.0.1", token=token)(scope, None, send))
    return sent[0]["status"]


@pytest.mark.parametrize(
    "cookie, ok",
    [
        ("react_editor_token_8501=T0K", True),
        ('a="; react_editor_token_8501=T0K', True),  # before: the malformed pair made the whole header unreadable
        ('react_editor_token_8501=T0K; a="', True),
        ("react_editor_token_8501=planted; react_editor_token_8501=T0K", True),  # a pair another app set: both tried
        ('react_editor_token_8501="T0K"', True),
        ("x=1;react_editor_token_8501=T0K;y", True),
        ('a="; react_editor_token_8501=T0KX', False),
        ("react_editor_token_8502=T0K", False),
        ("xreact_editor_token_8501=T0K", False),
        ("react_editor_token_8501", False),
        ("", False),
    ],
)
def test_the_token_cookie_is_read_on_its_own(cookie, ok):
    """Issue 39 item 16: any other app on 127.0.0.1 can set a malformed cookie; it must not
    hide the token's own pair."""
    assert _through_gate("/", {"Host": "127.0.0.1:8501", "Cookie": cookie}) == (200 if ok else 403)


def test_origin_null_and_healthz_are_refused_at_the_gate():
    host = {"Host": "127.0.0.1:8501"}
    assert _through_gate("/", {**host, "Origin": "null"}, token="") == 403
    assert _through_gate("/", {**host, "Origin": "http://127.0.0.1:8501"}, token="") == 200
    assert _through_gate("/healthz", host) == 403
    assert _through_gate("/_stcore/health", host) == 200
