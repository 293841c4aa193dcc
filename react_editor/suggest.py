"""`suggest`: a critic proposes edits to a failed version, each is proven (or not) by a
what-if, and a person accepts one (issue 29). `suggest --experiment` does every failure
of an experiment as one job. Rerunning a command continues it."""

from __future__ import annotations

import argparse
import sys

from react_editor.command_run import CliError, add_common, check_url, regular_file, run_job
from react_editor.episode_args import episode_ref, open_engine, version_of
from react_editor.output import emit, progress, rollout_progress, version_ref
from trajectory.records import API_STYLES


def register(sub: argparse._SubParsersAction) -> None:
    p = add_common(sub.add_parser("suggest", help="a critic's edits to a failed version, each proven by a what-if"))
    p.add_argument("episode", type=episode_ref, nargs="?", metavar="EP[:N]", help="the episode (or --experiment)")
    p.add_argument("--version", type=int, default=None)
    p.add_argument("--candidates", type=int, default=3, metavar="K", help="edits the critic may propose (default 3)")
    p.add_argument("--verify", type=int, default=10, metavar="N", help="rollouts per what-if arm (default 10)")
    p.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="the rollouts' temperature (default: the version's; 1 when it ran at 0)",
    )
    p.add_argument("--concurrency", type=int, default=4, metavar="C", help="rollouts at once (default 4)")
    p.add_argument("--critic-model", default=None, help="default: the version's own model")
    p.add_argument("--critic-base-url", default=None, help="default: the version's own endpoint")
    p.add_argument("--critic-api-style", choices=API_STYLES, default=None)
    p.add_argument("--critic-prompt", default=None, metavar="FILE", help="a critic prompt template of your own")
    p.add_argument("--show-prompt", action="store_true", help="print the exact critic prompt and ask nothing")
    p.add_argument(
        "--accept",
        type=int,
        default=None,
        metavar="NUMBER",
        help="apply candidate NUMBER of the version's latest suggestions, then resume",
    )
    p.add_argument("--dismiss", type=int, default=None, metavar="NUMBER", help="dismiss candidate NUMBER")
    p.add_argument("--experiment", default=None, metavar="NAME", help="every failure of an experiment, as one job")
    p.add_argument("--where", choices=("failed",), default=None, help="with --experiment: its failed episodes")
    p.add_argument("--limit", type=int, default=None, metavar="M", help="with --experiment: its first M failures")
    p.add_argument(
        "--accept-all-proven",
        action="store_true",
        help="with --experiment: accept each failure's best proven fix and resume it",
    )
    p.add_argument(
        "--confirm",
        type=int,
        default=None,
        metavar="N",
        help="with --accept-all-proven: fresh rollouts per arm each winner is proven on again before "
        "it is accepted (default: as many as --verify)",
    )
    p.add_argument(
        "--exemplar-set",
        default=None,
        metavar="NAME",
        help="with --accept-all-proven: add the new versions to this exemplar set",
    )
    p.set_defaults(func=cmd_suggest)


def _critic(args: argparse.Namespace):
    from agent.critic_dialogue import load_template
    from agent.suggest import Critic

    if args.critic_base_url:
        check_url(args.critic_base_url, "--critic-base-url")
    if args.critic_prompt:
        regular_file(args.critic_prompt, "critic prompt", may_be_missing=True)  # a FIFO would block the command
    template = load_template(args.critic_prompt) if args.critic_prompt else None
    return Critic(args.critic_model, args.critic_base_url, args.critic_api_style, template)


def _how(args: argparse.Namespace, h=None):
    from agent.suggest import Verify

    on_progress = rollout_progress(h)
    if args.concurrency < 1:
        raise CliError(f"the concurrency must be at least 1 (got {args.concurrency})")
    how = Verify(n=args.verify, temperature=args.temperature, concurrency=args.concurrency, on_progress=on_progress)
    if h is not None:  # the job's Stop: read in the database before each request, and cancels those in flight
        how.stop, how.should_stop = h.stop, h.sync_stop
    return how


def cmd_suggest(args: argparse.Namespace) -> int:
    if args.temperature is not None and not 0 <= args.temperature <= 2:  # before the critic is asked (and paid)
        raise CliError(f"the temperature must be between 0 and 2 (got {args.temperature:g})")
    if args.experiment is not None:
        return _experiment(args)
    if args.episode is None:
        raise CliError("give an episode EP[:N], or --experiment NAME --where failed")
    for flag in ("where", "limit", "exemplar_set", "confirm"):
        if getattr(args, flag) is not None:
            raise CliError(f"--{flag.replace('_', '-')} is for --experiment")
    if args.accept_all_proven:
        raise CliError("--accept-all-proven is for --experiment")
    engine = open_engine(args)
    vid = version_of(engine, args.episode, args.version)
    if args.accept is not None:
        return _accept(args, engine, vid)
    if args.dismiss is not None:
        return _dismiss(args, engine, vid)
    if args.show_prompt:
        return _show_prompt(args, engine, vid)
    if engine.store.versions.get(vid).outcome.success:
        raise CliError(
            f"version {version_ref(engine.store, vid)} succeeded: suggestions are for failed or unfinished versions"
        )
    return _suggest(args, engine, vid)


def _show_prompt(args: argparse.Namespace, engine, vid: int) -> int:
    """The exact text sent (the stored one when this request was asked), byte for byte."""
    from agent.suggest import plan
    from sessions import suggestions

    p = plan(engine, vid, _critic(args), args.candidates, args.verify)
    s = suggestions.find(engine.store, vid, p.key)
    text = s.prompt_text if s is not None and s.prompt_text is not None else p.sent
    if args.json:
        emit(args, {"version": vid, "prompt": text, "template": p.template.label, "hash": p.template.hash})
    else:
        sys.stdout.write(text)
    return 0


def _suggest(args: argparse.Namespace, engine, vid: int) -> int:
    from agent.suggest import report, suggest_version

    critic = _critic(args)
    engine.envs.check_endpoint(vid)
    ep = engine.store.versions.get(vid).episode_id

    def work(h):
        return suggest_version(engine, vid, critic, args.candidates, _how(args, h))

    s = run_job(
        engine.store,
        "suggest",
        lambda h: report(work(h)),
        _stopped,
        episode_id=ep,
        version_id=vid,
        target=f"suggest for {version_ref(engine.store, vid)}",
    )
    s["ref"] = version_ref(engine.store, vid)  # EP:N, as people type it (`version` stays the global id)
    emit(args, s, lambda: _text(s))
    return 0


def _stopped(result) -> str:
    """What a stopped `suggest` keeps (the critic's answer and each candidate verified so far)."""
    return "the critic's answer and the candidates verified so far are kept - run the same command again to continue"


def _text(data: dict) -> str:
    first = data["first_failure_step"]
    lines = [
        f"{data['ref']}: first failure signal at "
        f"{'step ' + str(first) if first else 'no step'}; critic {data['critic'].get('model')}"
    ]
    for c in data["candidates"]:
        lines.append(f"{c['rank']}. [#{c['number']}] step {c['step']} {c['kind']}: {c['text']!r}")
        lines.append(f"     {c['verdict']}" + (" (leaks the answer)" if c["leaks_answer"] else ""))
        if c["rationale"]:
            lines.append(f"     why: {c['rationale']}")
    if not data["candidates"]:
        lines.append("the critic proposed no edit")
    from agent.suggest_verdict import method_lines

    return "\n".join(lines + method_lines(data))


def _accept(args: argparse.Namespace, engine, vid: int) -> int:
    from agent.suggest import accept
    from react_editor.run_commands import _run

    engine.envs.check_endpoint(vid)  # the new version runs with these settings: refused before it is written
    new = accept(engine, vid, args.accept)
    return _run(args, engine, new.id, None)


def _dismiss(args: argparse.Namespace, engine, vid: int) -> int:
    from agent.suggest import dismiss
    from sessions import suggestions

    s = suggestions.latest(engine.store, vid)
    if s is None:
        raise CliError(f"version {version_ref(engine.store, vid)} has no suggestions yet")
    dismiss(engine, s.id, args.dismiss)
    emit(args, {"suggestion": s.id, "dismissed": args.dismiss}, f"candidate {args.dismiss} dismissed")
    return 0


def _experiment(args: argparse.Namespace) -> int:
    from agent.suggest_experiment import experiment_report, experiment_rows, failure_rows, suggest_experiment

    if args.episode is not None or args.version is not None:
        raise CliError("with --experiment, give no episode or --version")
    if args.accept is not None or args.dismiss is not None or args.show_prompt:
        raise CliError("--accept, --dismiss and --show-prompt are for one episode (EP[:N])")
    if args.where != "failed":
        raise CliError("with --experiment, give --where failed (suggestions are for failures)")
    if args.limit is not None and args.limit < 1:
        raise CliError(f"--limit must be at least 1 (got {args.limit})")
    if args.exemplar_set and not args.accept_all_proven:
        raise CliError("--exemplar-set is for --accept-all-proven")
    if args.confirm is not None and not args.accept_all_proven:
        raise CliError("--confirm is for --accept-all-proven")
    if args.confirm is not None and not 1 <= args.confirm <= 1000:
        raise CliError(f"--confirm must be between 1 and 1000 (got {args.confirm})")
    engine = open_engine(args)
    critic = _critic(args)
    exp_id, rows = experiment_rows(engine, args.experiment, critic, args.candidates, args.verify, args.limit)
    if not rows:
        raise CliError(f"experiment {args.experiment!r} has no failed episodes")

    def work(h):
        h.progress(done=0, total=len(rows))

        def on_failure(s) -> None:
            h.progress(done=h.done_n + 1, total=len(rows))
            if sys.stderr.isatty():
                progress(f"episode {s.episode_id}: {s.state}")

        done = suggest_experiment(engine, rows, critic, _how(args, h), h.id, on_failure)
        return experiment_report(engine, exp_id, failure_rows(engine, done))

    data = run_job(
        engine.store,
        "suggest",
        work,
        _stopped,
        experiment_id=exp_id,
        target=f"suggest for the failures of {args.experiment}",
    )
    if len(data["failures"]) < len(rows) or any(r["state"] != "done" for r in data["failures"]):
        progress("warning: some failures are unfinished or held by another job - run the same command again")
    if args.accept_all_proven:
        data["accepted"] = _accept_all(args, engine, data["failures"])
        if args.exemplar_set:
            _leak_warning(args, engine, exp_id, data)
    emit(args, data, lambda: _table(data))
    return 0


def _accept_all(args: argparse.Namespace, engine, failures: list) -> list[int]:
    from agent.suggest_experiment import accept_all_proven
    from react_editor.run_commands import _run_job

    return accept_all_proven(
        engine,
        failures,
        exemplar_set=args.exemplar_set,
        confirm_n=args.confirm,
        how=_how(args),
        resume=lambda vid: _run_job(engine, vid, None, lambda rep: None),
    )


def _leak_warning(args: argparse.Namespace, engine, exp_id: int, data: dict) -> None:
    """The experiment's tasks the set now holds a trajectory of (the leakage rule), on stderr
    and in the JSON as `leaked`."""
    from agent.suggest_experiment import leak_line, leaked_for_set

    leaked = leaked_for_set(engine, exp_id, args.exemplar_set)
    data["leaked"] = [t.id for t in leaked]
    if leaked:
        sys.stderr.write(f"warning: {leak_line(args.exemplar_set, args.experiment, leaked)}\n")


def _table(data: dict) -> str:
    from trajectory.numbers import p_text

    lines = ["episode\tversion\tfirst signal\tbest candidate\teffect\traw p (one-sided)\tadjusted p\tverdict\tcost"]
    for r in data["failures"]:
        b = r["best"]
        best = f"#{b['number']} step {b['step']} {b['kind']}: {b['text']!r}" if b else "-"
        eff = "-" if r["effect"] is None else f"{r['effect'] * 100:+.0f}"
        raw = p_text(b["p_better"])[4:] if b and b.get("p_better") is not None else "-"
        adj = f"{p_text(b['p_adjusted'])[4:]} ({b['adjustment']})" if b and b.get("p_adjusted") is not None else "-"
        first = f"{r['first_signal']} @{r['first_failure_step']}" if r["first_signal"] else "-"
        c = r["cost"]
        lines.append(
            f"{r['episode']}\tv{r['version']}\t{first}\t{best}\t{eff}\t{raw}\t{adj}\t{r['verdict']}\t"
            f"{c['calls']} calls, {c['tokens']} tokens, ${c['usd']:.4f}"
        )
    lines.append(
        "proven = lower bound > 0 and the adjusted one-sided p < 0.025 (Benjamini-Hochberg over every "
        "tested candidate of these failures); harmful ones are never accepted"
    )
    per = data["cost_per_proven_fix"]
    lines.append(
        f"{data['proven']} proven fix(es) of {len(data['failures'])} failure(s); per proven fix: "
        + (
            "n/a"
            if per["calls"] is None
            else f"{per['calls']:.1f} calls, {per['tokens']:.0f} tokens, ${per['usd']:.4f}"
        )
    )
    for r in data["failures"]:
        conf = r.get("confirmation")
        if conf:
            made = f"accepted as v{r['accepted_version']}" if r.get("accepted_version") else "not accepted"
            lines.append(
                f"v{r['version']} #{r['best']['number']}: confirmation {conf['verdict']} - {made}; "
                f"effect from {conf['rollouts']}"
            )
    if data.get("accepted"):
        lines.append(f"accepted as versions {', '.join(map(str, data['accepted']))}")
    return "\n".join(lines)
