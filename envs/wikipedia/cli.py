"""`react-editor wiki ...`: poke the Wikipedia environment by hand (debugging) and
maintain the built-in sample wiki.

    react-editor wiki search "Colorado orogeny" [--wiki builtin|live|zim:PATH]
    react-editor wiki step "Search[Colorado orogeny]" "Lookup[eastern sector]"
    react-editor wiki build-zim [--out FILE]
    react-editor wiki prompts [--write | --check]
"""

from __future__ import annotations

import argparse

from envs.cli_helpers import cli


def _options(args) -> dict:
    opts = {"wiki": args.wiki}
    if args.wiki_url:
        cli.check_url(args.wiki_url, "the MediaWiki API URL")  # credentials refused, one line
        opts["wiki_url"] = args.wiki_url
    return opts


def _add_wiki_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wiki", default="builtin", help="builtin (default), live, or zim:/path/file.zim")
    p.add_argument("--wiki-url", default=None, help="MediaWiki api.php URL for --wiki live")
    p.add_argument("--kind", default="hotpotqa", choices=("hotpotqa", "fever"))


def _run_actions(args, actions: list[str]) -> int:
    from envs.wikipedia import make_env
    from envs.wikipedia.tasks import custom_task

    env = make_env(args.kind, None, _options(args), None)
    try:
        env.reset(custom_task(args.kind, question="(debug session)"))
        rows = []
        for a in actions:
            r = env.step(a)
            rows.append({"action": a, "observation": r.observation, "done": r.done, "info": r.info})
        cli.emit(args, rows, lambda: "\n".join(f"> {x['action']}\n{x['observation'].rstrip()}" for x in rows))
        return 1 if any("error" in x["info"] for x in rows) else 0
    finally:
        env.close()


def cmd_search(args) -> int:
    return _run_actions(args, [f"search[{args.entity}]"] + [f"lookup[{k}]" for k in args.lookup or []])


def cmd_step(args) -> int:
    if not args.actions:
        raise cli.CliError("give at least one action, e.g. 'Search[Colorado orogeny]'")
    return _run_actions(args, args.actions)


def cmd_build_zim(args) -> int:
    from pathlib import Path

    from envs.wikipedia.builtin import builtin_zim, load_articles
    from envs.wikipedia.zim import build_zim

    if args.out:
        cli.regular_file(args.out, "output file", may_be_missing=True)
        path = build_zim(load_articles(), Path(args.out))
    else:
        path = builtin_zim()
    cli.emit(args, {"path": str(path)}, str(path))
    return 0


def cmd_prompts(args) -> int:
    from envs.wikipedia.exemplars import PROMPTS_FILES, build_builtin_prompts, dump, write_builtin_prompts

    if args.write:
        paths = write_builtin_prompts()
        cli.emit(args, {"paths": [str(p) for p in paths]}, "\n".join(f"wrote {p}" for p in paths))
        return 0
    built = build_builtin_prompts()
    if args.check:
        stale = [
            str(path)
            for kind, path in PROMPTS_FILES.items()
            if not path.is_file() or path.read_text(encoding="utf-8") != dump(built[kind])
        ]
        if stale:
            raise cli.CliError(f"stale: {', '.join(stale)}; run `react-editor wiki prompts --write`")
        cli.emit(args, {"ok": True}, "built-in prompts are up to date")
        return 0
    cli.emit(
        args, built, lambda: "\n\n".join(f"== {kind} {k} ==\n{v}" for kind, d in built.items() for k, v in d.items())
    )
    return 0


def register(sub, helpers) -> None:
    """The family's command group; `helpers` are the command line's (CliError, add_common, emit, progress)."""
    cli.use(helpers)
    wiki = sub.add_parser("wiki", help="the Wikipedia API environment (debugging, built-in wiki)")
    wsub = wiki.add_subparsers(dest="wiki_command", required=True, metavar="WIKI_COMMAND")

    p = cli.add_common(wsub.add_parser("search", help="search[ENTITY] (then lookups) and print observations"))
    p.add_argument("entity")
    p.add_argument("--lookup", action="append", help="a lookup keyword to run after the search (repeatable)")
    _add_wiki_flags(p)
    p.set_defaults(func=cmd_search)

    p = cli.add_common(wsub.add_parser("step", help="run actions in one fresh episode, print observations"))
    p.add_argument("actions", nargs="*", help="e.g. 'Search[Colorado orogeny]' 'Lookup[eastern sector]'")
    _add_wiki_flags(p)
    p.set_defaults(func=cmd_step)

    p = cli.add_common(wsub.add_parser("build-zim", help="build the built-in sample ZIM (cached) or write it to --out"))
    p.add_argument("--out", default=None)
    p.set_defaults(func=cmd_build_zim)

    p = cli.add_common(wsub.add_parser("prompts", help="build the built-in few-shot prompts from the exemplar plans"))
    g = p.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help="write envs/wikipedia/data/prompts.json and fever_prompts.json")
    g.add_argument("--check", action="store_true", help="fail if the prompt files differ from a fresh build")
    p.set_defaults(func=cmd_prompts)
