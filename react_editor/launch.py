"""`react-editor app`: the Streamlit app on 127.0.0.1 wherever it is started from (the
project's .streamlit/config.toml only applies in the project folder), with XSRF protection
on and usage statistics off. Another address only when `--address` asks for it."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app.py"
LOOPBACK = "127.0.0.1"
ALLOW_REMOTE_ENV = "REACT_EDITOR_ALLOW_REMOTE"  # app.py serves a non-loopback address only with it


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


def cmd_app(args: argparse.Namespace) -> int:
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
