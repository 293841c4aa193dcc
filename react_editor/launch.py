"""`react-editor app`: the Streamlit app on 127.0.0.1 wherever it is started from (the
project's .streamlit/config.toml only applies in the project folder), with XSRF protection
on and usage statistics off. Another address only when `--address` asks for it, and beyond
loopback only with a secret (REACT_EDITOR_TOKEN or Streamlit's OIDC login)."""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from react_editor.common import CliError

APP = Path(__file__).resolve().parent.parent / "app.py"
LOOPBACK = "127.0.0.1"
ALLOW_REMOTE_ENV = "REACT_EDITOR_ALLOW_REMOTE"  # kept for old scripts; the token is what opens the app
TOKEN_ENV = "REACT_EDITOR_TOKEN"  # beyond loopback, a person presents it before any page shows


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("app", help="launch the app in the browser (on 127.0.0.1 unless --address says otherwise)")
    p.add_argument("--address", default=None, help=f"address to listen on (default {LOOPBACK}; 0.0.0.0 exposes "
                   "your episodes to the network)")
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--db", default=None, help="SQLite file (default: $REACT_EDITOR_DB or ./react_editor.db)")
    p.set_defaults(func=cmd_app)


def streamlit_argv(address: str, port: int) -> list[str]:
    return [sys.executable, "-m", "streamlit", "run", str(APP),
            "--server.address", address, "--server.port", str(port), "--server.headless", "true",
            "--server.enableXsrfProtection", "true", "--browser.gatherUsageStats", "false"]


def _remote_allowed() -> bool:
    """Serving beyond loopback needs a secret: REACT_EDITOR_TOKEN, or Streamlit's OIDC login
    (an [auth] table in .streamlit/secrets.toml here or in the home folder)."""
    if os.environ.get(TOKEN_ENV):
        return True
    import tomllib  # (here: every other command starts without it)

    for path in (Path.cwd() / ".streamlit" / "secrets.toml", Path.home() / ".streamlit" / "secrets.toml"):
        try:
            if "auth" in tomllib.loads(path.read_text(encoding="utf-8")):
                return True
        except (OSError, ValueError):
            continue
    return False


def _loopback(address: str) -> bool:
    try:
        return address == "localhost" or ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def cmd_app(args: argparse.Namespace) -> int:
    if args.address is not None and not _loopback(args.address) and not _remote_allowed():
        raise CliError(f"serving on {args.address} would expose your episodes to the network: set {TOKEN_ENV} "
                       "(people enter it in the browser) or configure Streamlit's OIDC login first")
    env = dict(os.environ)
    if args.db:
        env["REACT_EDITOR_DB"] = str(Path(args.db).resolve())
    if args.address is not None:
        env[ALLOW_REMOTE_ENV] = "1"  # asked for explicitly
    address = args.address or LOOPBACK
    sys.stderr.write(f"ReAct Editor on http://{address}:{args.port} (Ctrl-C to stop)\n")
    return serve(streamlit_argv(address, args.port), env)


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
