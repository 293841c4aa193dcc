"""Writes data/exemplars.json: ALFWorld-style exemplars played on real tw-cooking games
(other seeds than the built-in tasks). Each plays the game's walkthrough after reading the
cookbook; the react ones add thoughts in the paper's style (plan, progress, what is next).

    python -m react_editor_textworld.build_exemplars
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

from react_editor_textworld import EXEMPLARS_FILE, games
from react_editor_textworld.env import TextWorldEnv
from trajectory.formats import render_alfworld
from trajectory.records import Step, Task

GAMES = {  # exemplar number -> tw-make tw-cooking flags
    0: ["--recipe", "1", "--take", "1", "--go", "1", "--open", "--seed", "101"],
    1: ["--recipe", "2", "--take", "2", "--go", "1", "--seed", "102"],
}


def _walkthrough(game: Path) -> list[str]:
    import textworld

    env = textworld.start(str(game), request_infos=textworld.EnvInfos(policy_commands=True))
    try:
        return list(env.reset().policy_commands)
    finally:
        env.close()


def _ingredients(cookbook: str) -> str:
    """The ingredient lines of the cookbook as the game prints it (one per line)."""
    m = re.search(r"Ingredients:(.*?)Directions:", cookbook, re.S)
    names = [" ".join(x.split()) for x in (m.group(1).split("\n") if m else []) if x.strip()]
    names = names or ["what the recipe lists"]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def play(game: Path, think: bool) -> str:
    env = TextWorldEnv("textworld", game)
    task = Task(env="textworld", id=game.stem, text="")
    text = env.reset(task)
    steps: list[Step] = []

    def thought(t: str) -> None:
        if think:
            steps.append(Step(index=len(steps) + 1, thought=t, observation="OK."))

    def act(cmd: str) -> str:
        obs = env.step(cmd).observation
        steps.append(Step(index=len(steps) + 1, action=cmd, observation=obs))
        return obs

    thought("To solve the task, I need to read the recipe in the cookbook, then find and prepare its ingredients.")
    act("examine cookbook")
    book = env._gs.feedback  # the raw page, one ingredient a line
    thought(f"The recipe needs {_ingredients(book)}. I need to take each of them, then prepare the meal.")
    for cmd in _walkthrough(game):
        if cmd == "prepare meal":
            thought("Now I have everything the recipe asks for. Next, I need to prepare the meal and eat it.")
        act(cmd)
    env.close()
    return render_alfworld(text, steps)


def build() -> dict[str, str]:
    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        made = {n: games.make_game(flags, Path(tmp) / f"exemplar-{n}.z8") for n, flags in GAMES.items()}
        for style in ("react", "act"):
            for n, game in made.items():
                out[f"{style}_cook_{n}"] = play(game, think=style == "react")
    return out


if __name__ == "__main__":
    EXEMPLARS_FILE.write_text(json.dumps(build(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {EXEMPLARS_FILE}")
