"""A third environment with no change above envs/: the TextWorld plugin
(plugins/react-editor-textworld), installed into a temporary prefix as pip lays it out
(its package and a dist-info holding its `react_editor.envs` entry point), driven through
the real `react-editor` command line against the scripted model server: `tasks` in a process
started with the plugin on its path, then run, edit, resume, an experiment of 3 tasks and
whatif with n=3 in this process with the plugin loaded the same way (one textworld import,
not one per command).

The built-in games are made with `tw-make tw-cooking` on first use and cached (the plugin's
cache, $REACT_EDITOR_TEXTWORLD_GAMES or ~/.cache); nothing is downloaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugin_helpers import install_plugin, plugin_loaded
from tests.scripted_server import prompt_text

ROOT = Path(__file__).resolve().parents[2]
CUE = "\nHere is the task.\n"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return install_plugin(tmp_path_factory.mktemp("site"))


@pytest.fixture(scope="module")
def walkthroughs(site):
    """{task text: the game's winning commands} for the built-in games (made if missing)."""
    sys.path.insert(0, str(site))
    try:
        import textworld
        from react_editor_textworld import games

        out = {}
        for task in games.list_tasks():
            env = textworld.start(str(games.game_path(task)), request_infos=textworld.EnvInfos(policy_commands=True))
            out[task.text] = list(env.reset().policy_commands)
            env.close()
        return out
    finally:
        sys.path.remove(str(site))
        for name in [m for m in sys.modules if m.startswith("react_editor_textworld")]:
            del sys.modules[name]


def player(walkthroughs: dict[str, list[str]], detour: str | None = None):
    """A scripted agent: a thought first, then the game's walkthrough; `detour` is tried once
    before it (a wrong command a person will edit)."""

    def respond(body):
        task, _, turns = prompt_text(body).rpartition(CUE)[2].partition("\n>")
        walk = walkthroughs[task]
        lines = ("\n>" + turns).split("\n")
        commands = [ln[2:] for ln in lines if ln.startswith("> ") and not ln.startswith("> think:")]
        if not commands and not any(ln.startswith("> think:") for ln in lines):
            return " think: I need to read the cookbook, then take and prepare what the recipe needs."
        if detour and detour not in commands:
            return " " + detour
        return " " + walk[min(sum(c in walk for c in commands), len(walk) - 1)]

    return respond


def cli(site: Path, db: Path, *argv) -> dict | list:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
        "REACT_EDITOR_DB": str(db),
        "OPENAI_API_KEY": "sk-test-key-not-real",
    }
    out = subprocess.run(
        [sys.executable, "-m", "react_editor.main", *map(str, argv), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=db.parent,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_textworld_plugin_through_the_cli(site, walkthroughs, scripted_llm, tmp_path, monkeypatch, capsys):
    db = tmp_path / "tw.db"
    model = ["--model", "m", "--base-url", scripted_llm.base_url]
    tasks = cli(site, db, "tasks", "--env", "textworld")
    assert [t["id"] for t in tasks][:3] == ["cooking-1", "cooking-open", "cooking-cut"]
    assert all(t["env"] == "textworld" and "\nYour task is to: " in t["text"] for t in tasks)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-not-real")
    monkeypatch.setenv("REACT_EDITOR_DB", str(db))
    monkeypatch.chdir(tmp_path)
    with plugin_loaded(site):
        _run_edit_resume_experiment_whatif(model, walkthroughs, scripted_llm, capsys)


def _run_edit_resume_experiment_whatif(model, walkthroughs, scripted_llm, capsys) -> None:
    from react_editor.main import main

    def here(*argv):  # `react-editor ... --json` in this process
        code = main([*map(str, argv), "--json"])
        out = capsys.readouterr()
        assert code == 0, out.err
        return json.loads(out.out.strip().splitlines()[-1])

    # run: a wrong command first (the game cannot do it), then the walkthrough: won
    scripted_llm.set_responder(player(walkthroughs, detour="take the moon"))
    run = here("run", "--env", "textworld", "--task", "cooking-1", *model)
    assert run["done"] and run["success"] is True
    shown = here("show", str(run["episode"]))
    assert shown[0]["thought"] and shown[0]["observation"] == "OK."
    assert shown[1]["action"] == "take the moon" and "invalid_action" in shown[1]["signals"]
    assert shown[-1]["done"] and shown[-1]["action"] == "eat meal"

    # edit the wrong command: the environment is restored to step 1 (verified replay) and runs the new one
    scripted_llm.set_responder(player(walkthroughs))
    edited = here("edit", str(run["episode"]), "--step", "2", "--action", "examine cookbook")
    after = here("show", str(run["episode"]), "--version", str(edited["version"]))
    assert [s["action"] for s in after] == [None, "examine cookbook"]
    assert after[1]["observation"].startswith("You open the copy of") and after[1]["source"] == "human"

    # resume the edited version: the model goes on from the restored state and wins
    resumed = here("resume", str(run["episode"]), "--version", str(edited["version"]), *model)
    assert resumed["done"] and resumed["success"] is True and resumed["steps"] > 2

    # an experiment of 3 tasks (react): every task won, the score metric reported
    exp = here("experiment", "run", "--env", "textworld", "--limit", "3", "--method", "react", *model)
    assert (exp["episodes"], exp["done"], exp["success"]) == (3, 3, 3)
    assert exp["score"] == 1.0 and exp["by_type"]["cooking"]["n"] == 3

    # what if the first thought were a hint: 3 control and 3 treatment rollouts
    whatif = here(
        "whatif",
        str(run["episode"]),
        "--step",
        "1",
        "--thought",
        "Read the cookbook first.",
        "--n",
        "3",
        "--temperature",
        "0.7",
        *model,
    )
    assert whatif["control"]["n"] == 3 and whatif["treatment"]["n"] == 3
    assert whatif["treatment"]["success"] == 3
