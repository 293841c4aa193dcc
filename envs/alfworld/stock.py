"""The stock alfworld/textworld stack, as the ReAct notebook drives it.

Used as the reference that `FastGame` must match byte for byte, and as the baseline the
benchmark measures. Also holds the workaround for `AlfredTWEnv.init_env`'s expert trap.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from envs.alfworld.fastgame import GameData
from envs.alfworld.translation import preserved_argv
from envs.alfworld.wording import apply_wording


def expert_wrapper(expert_type: str):
    """An AlfredExpert wrapper that really uses `expert_type`.

    Trap: `AlfredTWEnv.init_env` builds `AlfredExpert(expert_type)`; the first positional
    parameter is `env`, so the planner setting is swallowed and the handcoded expert is
    always used. We pass it by keyword."""
    from alfworld.agents.environment.alfred_tw_env import AlfredExpert

    return AlfredExpert(expert_type=expert_type)


def stock_game_dict(data: GameData, wording: str) -> dict:
    domain, grammar = apply_wording(data.domain, data.grammar, wording)
    return {
        "pddl_domain": domain,
        "grammar": grammar,
        "pddl_problem": data.problem,
        "solvable": data.solvable,
        "walkthrough": list(data.walkthrough or []),
    }


class StockGame:
    """PddlEnv + AlfredDemangler(shuffle=False) + AlfredInfos, what `AlfredTWEnv.init_env`
    registers with textworld.gym (here synchronously, batch size 1, no step limit)."""

    def __init__(self, data: GameData, wording: str = "paper", via_gym: bool = False):
        import textworld
        import textworld.gym
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos

        self._tmp = tempfile.TemporaryDirectory(prefix="stock-alfworld-")
        path = Path(self._tmp.name) / "game.tw-pddl"
        path.write_text(json.dumps(stock_game_dict(data, wording)))
        self.path = str(path)
        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
        self.via_gym = via_gym
        if via_gym:
            env_id = textworld.gym.register_games(
                [self.path],
                infos,
                batch_size=1,
                asynchronous=False,
                max_episode_steps=10_000,
                wrappers=[AlfredDemangler(shuffle=False), AlfredInfos],
            )
            self.env = textworld.gym.make(env_id)
        else:
            from textworld.envs.pddl import PddlEnv

            self.env = AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False))
            with preserved_argv():
                self.env.load(self.path)
        self.admissible: list[str] = []

    def reset(self) -> str:
        with preserved_argv():
            if self.via_gym:
                obs, infos = self.env.reset()
                self.admissible = infos["admissible_commands"][0]
                return obs[0]
            state = self.env.reset()
        self.admissible = state["admissible_commands"]
        return state["feedback"]

    def step(self, command: str) -> tuple[str, bool]:
        if self.via_gym:
            obs, _, _, infos = self.env.step([command])
            self.admissible = infos["admissible_commands"][0]
            return obs[0], bool(infos["won"][0])
        state, _, _ = self.env.step(command)
        self.admissible = state["admissible_commands"]
        return state["feedback"], bool(state["won"])

    def close(self) -> None:
        try:
            self.env.close()
        finally:
            self._tmp.cleanup()
