"""`react-editor alfworld ...`: generate built-in games, check a game, list tasks, play."""

from __future__ import annotations

import argparse

from envs.cli_helpers import cli


def _generate(args) -> int:
    from envs.alfworld.generate import TASK_TYPES, generate_games
    from envs.alfworld.tasks import GAMES_DIR, write_builtin_index

    out = cli.folder(args.out, "output folder") if args.out else GAMES_DIR
    types = tuple(args.types.split(",")) if args.types else TASK_TYPES
    bad = [t for t in types if t not in TASK_TYPES]
    if bad:
        raise cli.CliError(f"unknown task type {bad[0]!r}; known: {', '.join(TASK_TYPES)}")
    if args.per_type < 1:
        raise cli.CliError("--per-type must be at least 1")
    builtin = not args.out  # the project's own sample: games/builtin/<sample|exemplars>/
    if args.index and not builtin:
        raise cli.CliError("--index is for the built-in set (no --out)")
    split = args.split or ("sample" if builtin else "valid_unseen")
    paths = generate_games(
        out,
        seed=args.seed,
        per_type=args.per_type,
        split=split,
        task_types=types,
        progress=cli.progress,
        layout="builtin" if builtin else "json_2.1.1",
    )
    if args.index:
        write_builtin_index(out)
    cli.emit(args, {"games": [str(p) for p in paths], "out": str(out)}, f"wrote {len(paths)} games under {out}")
    return 0


def _check(args) -> int:
    from envs.alfworld.fastgame import FastGame, load_game_data
    from envs.alfworld.text import opening_text, process_ob
    from envs.alfworld.wording import to_wording

    cli.regular_file(args.game, "game file")
    data = load_game_data(args.game)
    game = FastGame(data, args.wording)
    text = opening_text(game.reset())
    walk = [to_wording(c, args.wording) for c in (data.walkthrough or [])]
    won, transcript = False, []
    for cmd in walk:
        out = game.step(cmd)
        transcript.append({"action": cmd, "observation": process_ob(out.feedback)})
        won = out.won
    result = {"game": args.game, "text": text, "walkthrough_steps": len(walk), "won": won, "transcript": transcript}
    cli.emit(
        args,
        result,
        lambda: (
            f"{text}\n"
            + "".join(f"> {t['action']}\n{t['observation']}\n" for t in transcript)
            + f"walkthrough: {len(walk)} steps, won={won}"
        ),
    )
    return 0 if won else 1


def _tasks(args) -> int:
    from envs import alfworld

    tasks = alfworld.list_tasks(source=args.source, split=args.split)
    cli.emit(
        args, [t.model_dump() for t in tasks], lambda: "\n".join(f"{t.id}\t{t.type}" for t in tasks) or "(no tasks)"
    )
    return 0


def _play(args) -> int:
    """Play a task with actions from the command line (or stdin), printing observations."""
    import sys

    from envs import alfworld

    task = alfworld.get_task(args.task, source=args.source)
    env = alfworld.make_env(task, {"wording": args.wording})
    try:
        out = [env.reset(task)]
        actions = args.action or [line.strip() for line in sys.stdin if line.strip()]
        steps = []
        for a in actions:
            r = env.step(a)
            steps.append({"action": a, "observation": r.observation, "done": r.done, "won": r.info.get("won")})
            out.append(f"> {a}\n{r.observation}")
            if r.done:
                break
        cli.emit(args, {"task": task.id, "text": task.text, "steps": steps}, "\n".join(out))
    finally:
        env.close()
    return 0


def register(sub, helpers) -> None:
    """The family's command group; `helpers` are the command line's (CliError, add_common, emit, progress)."""
    cli.use(helpers)
    p = sub.add_parser("alfworld", help="ALFWorld games: generate, check, list, play")
    s = p.add_subparsers(dest="alfworld_command", required=True, metavar="ACTION")

    g = cli.add_common(s.add_parser("generate", help="generate solvable games from alfworld's layouts"))
    g.add_argument(
        "--out",
        help="output root (json_2.1.1/<split>/... is created); default: the built-in sample (games/builtin/<split>/)",
    )
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--per-type", type=int, default=4)
    g.add_argument("--split", default=None, help="sample / exemplars (built-in) or a split name (default valid_unseen)")
    g.add_argument("--types", help="comma-separated task types (default: all six)")
    g.add_argument("--index", action="store_true", help="also write index.json (for the built-in set)")
    g.set_defaults(func=_generate)

    c = cli.add_common(s.add_parser("check", help="replay a game's walkthrough; exit 0 when it wins"))
    c.add_argument("game", help="path to a game.tw-pddl")
    c.add_argument("--wording", default="paper", choices=["paper", "alfworld-0.4"])
    c.set_defaults(func=_check)

    t = cli.add_common(s.add_parser("tasks", help="list tasks"))
    t.add_argument("--source", default="builtin", choices=["builtin", "official"])
    t.add_argument("--split", default=None)
    t.set_defaults(func=_tasks)

    pl = cli.add_common(s.add_parser("play", help="play a task with the given actions"))
    pl.add_argument("task")
    pl.add_argument("action", nargs="*", help="actions (default: one per line on stdin)")
    pl.add_argument("--source", default="builtin", choices=["builtin", "official"])
    pl.add_argument("--wording", default="paper", choices=["paper", "alfworld-0.4"])
    pl.set_defaults(func=_play)


_ = argparse  # argparse subparsers are passed in by cli.main
