"""`react-editor app`: the Streamlit app on 127.0.0.1 wherever it is started from (the
project's .streamlit/config.toml only applies in the project folder), with XSRF protection
on and usage statistics off, behind the gate of `agent.gate` (app_server.py): a
random token made at each start (or REACT_EDITOR_TOKEN) that the printed URL carries, and
only loopback Host names. Another address only when `--address` asks for it; `--no-token`
only on loopback. OIDC sign-in ([auth] in secrets) needs an allow-list ([access])."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from agent.gate import (
    ALLOW_LIST,
    ENDPOINTS_ENV,
    LOOPBACK,
    TOKEN_ENV,
    TOKEN_PARAM,
    WILDCARDS,
    allow_list,
    is_loopback,
    new_token,
)
from react_editor.command_run import CliError

APP = Path(__file__).resolve().parent.parent / "app_server.py"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("app", help="launch the app in the browser (on 127.0.0.1 unless --address says otherwise)")
    p.add_argument(
        "--address",
        default=None,
        help=f"address to listen on (default {LOOPBACK}; 0.0.0.0 exposes your episodes to the network)",
    )
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--db", default=None, help="SQLite file (default: $REACT_EDITOR_DB or ./react_editor.db)")
    p.add_argument(
        "--no-token",
        action="store_true",
        help="no access token (loopback only): anyone who reaches 127.0.0.1 on this machine gets the app",
    )
    p.add_argument("--no-browser", action="store_true", help="print the URL, do not open it")
    p.add_argument(
        "--no-stream",
        action="store_true",
        help="the Editor's steps ask for each answer in one piece "
        "instead of streamed token by token (for a server whose streaming misbehaves)",
    )
    p.add_argument(
        "--base-url",
        default=None,
        help="the launch endpoint (sets OPENAI_BASE_URL for the app): it gets OPENAI_API_KEY",
    )
    p.add_argument(
        "--allow-endpoint",
        action="append",
        default=[],
        metavar="URL",
        help="a base URL typed in the page that may get OPENAI_API_KEY (repeatable; default: only "
        "OPENAI_BASE_URL and confirmed endpoints)",
    )
    from react_editor.model import local_model_flag

    local_model_flag(p)
    p.set_defaults(func=cmd_app)


def streamlit_argv(address: str, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.address",
        address,
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--server.enableXsrfProtection",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--logger.hideWelcomeMessage",
        "true",  # its URL would lack the token: ours is printed
        "--runner.postScriptGC",
        "false",
    ]  # no full collection after each run and tick (Python's GC still runs)


def _secrets() -> dict:
    """Streamlit's secrets as the app will read them (the project folder's, then the home
    folder's .streamlit/secrets.toml; the first one wins per table)."""
    import tomllib  # (here: every other command starts without it)

    found: dict = {}
    for path in (Path.cwd() / ".streamlit" / "secrets.toml", Path.home() / ".streamlit" / "secrets.toml"):
        try:
            for k, v in tomllib.loads(path.read_text(encoding="utf-8")).items():
                found.setdefault(k, v)
        except (OSError, ValueError):
            continue
    return found


def _check_gate(args: argparse.Namespace, secrets: dict) -> None:
    """One line when the app would let in people it should not."""
    if "auth" in secrets and not any(allow_list(secrets.get(ALLOW_LIST))):
        raise CliError(
            "OIDC sign-in ([auth] in .streamlit/secrets.toml) lets in anyone with an account: add "
            f"[{ALLOW_LIST}] allowed_emails = [...] and/or allowed_domains = [...] first"
        )
    if args.no_token and args.address is not None and not is_loopback(args.address):
        raise CliError(
            f"--no-token is for loopback only: serving on {args.address} without the token would expose "
            "your episodes to the network"
        )
    from agent.run_settings import ConfigError, check_base_url

    for flag, url in [*(("--allow-endpoint", u) for u in args.allow_endpoint), ("--base-url", args.base_url)]:
        try:
            check_base_url(url, flag)
        except ConfigError as exc:
            raise CliError(str(exc)) from None


STREAM_ENV = "REACT_EDITOR_STREAM"  # "0": no call streams (agent.model.client.STREAM)


def _check_address(address: str) -> None:
    """One line when the server could not listen on `address` (a name that does not resolve,
    an address of another machine): asked of the system by binding a socket to it on a free
    port, before a token is printed or Streamlit started (its traceback would be the answer)."""
    import socket

    try:
        family, kind, proto, _, where = socket.getaddrinfo(
            address or None, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as s:
            s.bind(where)
    except (OSError, UnicodeError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise CliError(
            f"--address {address[:100]!r}: the app cannot listen there ({why}); give an address of "
            f"this machine (default {LOOPBACK}, 0.0.0.0 for every interface)"
        ) from None


def cmd_app(args: argparse.Namespace) -> int:
    from react_editor.model import use_local_model

    _check_gate(args, _secrets())
    if not 1 <= args.port <= 65535:
        raise CliError(f"--port {args.port}: a port is 1 to 65535")
    _check_address(args.address or LOOPBACK)
    from react_editor.args import database_file
    from sessions.store import default_db_path

    database_file(args.db or default_db_path())  # a missing folder is refused, as by every command
    use_local_model(args)  # (the app's process gets it: REACT_EDITOR_LOCAL_MODEL)
    env = dict(os.environ)
    if args.db:
        env["REACT_EDITOR_DB"] = str(Path(args.db).resolve())
    env.pop(TOKEN_ENV, None)
    token = None if args.no_token else (os.environ.get(TOKEN_ENV) or new_token())
    if token:
        env[TOKEN_ENV] = token
    env[ENDPOINTS_ENV] = "\n".join(args.allow_endpoint)
    env.pop(STREAM_ENV, None)
    if args.no_stream:
        env[STREAM_ENV] = "0"
    if args.base_url:
        env["OPENAI_BASE_URL"] = args.base_url
    address = args.address or LOOPBACK
    host = LOOPBACK if address in WILDCARDS else address
    base = f"http://{'[' + host + ']' if ':' in host else host}:{args.port}"
    url = f"{base}/?{TOKEN_PARAM}={token}" if token else f"{base}/"
    sys.stderr.write(f"ReAct Editor on {url} (Ctrl-C to stop)\n")
    if not args.no_browser:
        threading.Thread(target=_open_when_up, args=(base, url), daemon=True).start()
    return serve(streamlit_argv(address, args.port), env)


def _open_when_up(base: str, url: str, wait_s: float = 60.0) -> None:
    """Open `url` in the browser once the server answers (as Jupyter does)."""
    import urllib.request
    import webbrowser

    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2):
                webbrowser.open(url)
                return
        except OSError:
            time.sleep(0.5)


def serve(argv: list[str], env: dict[str, str], grace_s: float = 10.0) -> int:
    """Run the Streamlit server as our child and stop it with us: SIGTERM, SIGINT or
    SIGHUP sent to this process is passed on and waited for (killed after `grace_s`), so
    no server is left listening on the port. Its jobs end "stopped" (resumable)."""
    child = subprocess.Popen(argv, env=env)
    got: list[int] = []

    def forward(signum, _frame) -> None:
        got.append(signum)
        if child.poll() is None:
            child.send_signal(signal.SIGTERM if signum == signal.SIGHUP else signum)

    old = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    deadline = None
    try:
        while True:
            try:
                code = child.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if got and deadline is None:
                    deadline = time.monotonic() + grace_s
                if deadline is not None and time.monotonic() > deadline:  # it did not stop in time
                    child.kill()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if got:
        return 128 + got[0]
    return code
