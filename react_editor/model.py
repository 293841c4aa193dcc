"""`react-editor model serve|status`: the built-in model's server in the foreground (several terminals
and the app share one loaded model), and what is served where on this machine."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from react_editor.command_run import CliError, add_common
from react_editor.output import emit, progress
from trajectory.records import AgentConfig


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model", help="the built-in model: serve it in the foreground, or say what is served")
    msub = p.add_subparsers(dest="model_command", required=True, metavar="SUBCOMMAND")
    s = add_common(msub.add_parser("serve", help="serve the built-in model (or --local-model PATH) until Ctrl-C"))
    s.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    local_model_flag(s)
    s.set_defaults(func=cmd_serve)
    s = add_common(msub.add_parser("status", help="which model files are served where on this machine"))
    local_model_flag(s)
    s.set_defaults(func=cmd_status)


def local_model_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--local-model",
        default=None,
        metavar="PATH.gguf",
        help="the GGUF file `--model local` serves (default: $REACT_EDITOR_LOCAL_MODEL, else the built-in "
        "SmolLM2-135M-Instruct)",
    )


def use_local_model(args: argparse.Namespace) -> None:
    """`--local-model PATH`: the GGUF `local` serves, for this process and its children."""
    from agent.local_model import ENV

    path = getattr(args, "local_model", None)
    if path:
        from react_editor.args import regular_file

        os.environ[ENV] = str(Path(regular_file(path, "--local-model")).resolve())


def local_changes(changes: dict[str, Any]) -> dict[str, Any]:
    """Model flags' changes with `local` as a config records it (`local:NAME`) and, unless one was
    given, the built-in model's timeout (`local_timeout`)."""
    from agent.local_model import TIMEOUT_S, named, resolved_name

    if "model" in changes:
        changes["model"] = resolved_name(changes["model"])
        if named(changes["model"]) and not changes.get("base_url") and "timeout_s" not in changes:
            changes["timeout_s"] = TIMEOUT_S
    return changes


def local_timeout(config: AgentConfig, given: float | None) -> AgentConfig:
    """The built-in model's request timeout unless one was given: its first prompt is evaluated on
    this machine's CPU (seconds, more on a busy machine), not by a server that may hang."""
    from agent.local_model import TIMEOUT_S, named

    if given is None and named(config.model) and not config.base_url and config.timeout_s < TIMEOUT_S:
        return config.model_copy(update={"timeout_s": TIMEOUT_S})
    return config


def _port_free(port: int) -> bool:
    from agent.gate import LOOPBACK

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def cmd_serve(args: argparse.Namespace) -> int:
    from agent import local_model, local_server

    use_local_model(args)
    if args.port is not None and not 1 <= args.port <= 65535:
        raise CliError(f"--port must be between 1 and 65535 (got {args.port})")
    if args.port is not None and not _port_free(args.port):
        raise CliError(f"port {args.port} on 127.0.0.1 is in use: give another --port, or none (a free one)")
    try:
        path = local_model.model_path()
        sha = local_model.file_sha256(path)
        with local_server.start_lock(sha):
            running = local_server.find_running(sha)
            if running is not None:
                emit(
                    args,
                    {**running.record(), "key": None, "already": True},
                    f"{path.name} is already served at {running.url} (pid {running.pid}); "
                    "`react-editor` commands on this machine use it",
                )
                return 0
            served = local_server.start(path, sha, args.port)
    except local_server.LocalModelError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    name = f"{local_model.NAME}:{path.stem}"
    emit(
        args,
        {**served.record(), "model": name},
        "\n".join(
            [
                f"Serving {name} at {served.url} (pid {served.pid}; {path}, sha256 {sha[:12]}...). Ctrl-C stops it.",
                "On this machine, react-editor commands with --model local (the default with no endpoint configured) and "
                "the app use it, e.g.: react-editor run --env ENV --task TASK --model local",
                f"Any OpenAI client: OPENAI_BASE_URL={served.url} OPENAI_API_KEY={served.key}",
            ]
        ),
    )
    sys.stdout.flush()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        code = served.proc.wait()
        progress(f"the server stopped (exit code {code}): {local_server.log_tail(served)}")
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        local_server.stop(served)


def cmd_status(args: argparse.Namespace) -> int:
    from agent import local_model, local_server

    use_local_model(args)
    served = local_server.status()
    try:
        path = str(local_model.model_path())
    except local_server.LocalModelError as exc:
        path = f"none ({exc})"
    missing = local_server.missing_server()
    lines = [f"--model local serves: {path}"]
    if missing:
        lines.append(f"cannot serve here: {missing}")
    lines += [f"served: {s['path']} at {s['url']} (pid {s['pid']}, started by pid {s['owner']})" for s in served]
    if not served:
        lines.append("served: nothing yet (started on first use, or by `react-editor model serve`)")
    emit(args, {"local_model": path, "server_missing": missing, "served": served}, "\n".join(lines))
    return 0
