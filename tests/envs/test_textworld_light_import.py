"""An ALFWorld game imports only the textworld modules it needs (envs/alfworld/twlite.py), not
the textworld package (generator, knowledge base, networkx, prompt_toolkit); textworld itself
still imports whole afterwards and plays the same game. How much time that saves:
benchmarks/alfworld.py."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

from envs.alfworld import list_tasks
from envs.alfworld.fastgame import load_game_data
from envs.alfworld.grammar_cache import tree_copy
from envs.alfworld.twlite import EntityInfo

ROOT = Path(__file__).resolve().parents[2]

# A new process: a game with our engine first, then the stock textworld stack on the same game
# (with "stock"; a warm process plays ours only: its stand-ins are compared with the cold one's).
PROBE = """
import json, sys
from envs.alfworld.fastgame import FastGame, load_game_data
data = load_game_data(sys.argv[1])
fast = FastGame(data, "paper")
ours, cmds = [fast.reset()], []
for i in range(6):
    cmds.append(fast.admissible_commands()[i % 3])
    ours.append(fast.step(cmds[-1]).feedback + "|" + "\\n".join(fast.admissible_commands()))
light = sorted(m for m in ("textworld", "textworld.envs", "textworld.generator", "networkx", "prompt_toolkit")
               if m in sys.modules)
before = sorted(m for m in sys.modules if m == "textworld" or m.startswith("textworld."))
import textworld, textworld.gym
report = {"light": light, "ours": ours, "before": before}
if sys.argv[2] == "stock":
    from envs.alfworld.stock import StockGame
    stock = StockGame(data, "paper")
    theirs = [stock.reset()]
    for cmd in cmds:
        o, _ = stock.step(cmd)
        theirs.append(o + "|" + "\\n".join(stock.admissible))
    report["same"] = ours == theirs
report["adopted"] = all(getattr(textworld, n) is sys.modules["textworld." + n] for n in ("logic", "utils", "envs")) \\
    and textworld.envs.pddl.logic is sys.modules["textworld.envs.pddl.logic"]
report["whole"] = hasattr(textworld, "GameMaker")
print(json.dumps(report))
"""


def _probe(cache: Path, game: str, stock: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REACT_EDITOR_CACHE": str(cache)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, game, "stock" if stock else "ours"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_game_loads_without_the_textworld_package_which_still_imports_whole_after(tmp_path):
    """The cold process plays the stock stack too; the warm one (read from the cache) need not
    do it again: it has the same textworld modules before the import as the cold one (what the
    stock stack then plays on) and the same transcript, so the stock one is the cold one's."""
    game = list_tasks()[0].data["game"]
    cold = _probe(tmp_path / "cache", game, stock=True)  # translation and game logic written to the cache
    ours, before = cold.pop("ours"), cold.pop("before")
    assert cold == {"light": [], "same": True, "adopted": True, "whole": True}, cold
    assert before and len(ours) == 7
    assert len(list((tmp_path / "cache" / "alfworld-sas").glob("*.pkl"))) >= 2
    warm = _probe(tmp_path / "cache", game, stock=False)  # ... and read back, still without the package
    assert warm == {"light": [], "ours": ours, "before": before, "adopted": True, "whole": True}, warm


def _dump(sym, seen: set) -> tuple:
    """A symbol tree as plain data, recording the ids of every symbol and context in it."""
    seen.add(id(sym))
    seen.add(id(sym.context))
    fields = {k: _dump(v, seen) if hasattr(v, "context") else v for k, v in vars(sym).items()}
    return type(sym).__name__, sorted(fields.items(), key=lambda kv: kv[0])


def test_tree_copy_is_a_deepcopy_of_every_production_of_a_game_grammar():
    from envs.alfworld.grammar_cache import game_logic
    from envs.alfworld.wording import apply_wording

    data = load_game_data(list_tasks()[0].data["game"])
    grammar = game_logic(*apply_wording(data.domain, data.grammar, "paper")).grammar
    symbols = [s for rules in grammar._rules.values() for rule in rules for s in rule.rhs]
    kinds = {type(s).__name__ for s in symbols}
    assert {"TerminalSymbol", "NonterminalSymbol"} <= kinds and len(kinds) >= 4, kinds  # lists, conditionals too
    for sym in symbols:
        original, copied, deep = set(), set(), set()
        assert _dump(tree_copy(sym), copied) == _dump(copy.deepcopy(sym), deep) == _dump(sym, original)
        assert not original & copied  # nothing shared with the grammar: a derivation may change its copy


def test_entity_info_is_textworlds():
    from textworld.generator.game import EntityInfo as Theirs

    assert EntityInfo.__slots__ == Theirs.__slots__
    ours, theirs = EntityInfo("apple_bar_1", "o"), Theirs("apple_bar_1", "o")
    for info in (ours, theirs):
        info.name, info.definite, info.indefinite = "apple 1", "the", "a"
    assert [getattr(ours, s) for s in EntityInfo.__slots__] == [getattr(theirs, s) for s in Theirs.__slots__]
    assert (str(ours), repr(ours), hash(ours)) == (str(theirs), repr(theirs), hash(theirs))
    other = EntityInfo("apple_bar_1", "o")
    assert other != ours
    other.name, other.definite, other.indefinite = "apple 1", "the", "a"
    assert other == ours


# A new process: another thread imports textworld while the stand-ins are in sys.modules.
RACE = """
import json, sys, threading, time
import envs.alfworld.twlite as twlite
from envs.alfworld.fastgame import FastGame, load_game_data
data = load_game_data(sys.argv[1])
got, ready, stand_in = {}, threading.Event(), twlite._stand_in

def slow(name):  # hold the window open until the other thread has imported
    mod = stand_in(name)
    if name == "textworld":
        ready.set()
        time.sleep(1)
    return mod

def other():
    ready.wait()
    import textworld
    got["stand_in"] = "EnvInfos" not in vars(textworld)  # it got the stand-in ...
    got["EnvInfos"] = textworld.EnvInfos.__name__  # ... which finds the real package's attributes

twlite._stand_in = slow
thread = threading.Thread(target=other)
thread.start()
got["intro"] = FastGame(data, "paper").reset()[:9]
thread.join()
print(json.dumps(got))
"""


def test_a_thread_importing_textworld_meanwhile_gets_the_real_package(alfworld_session_cache):
    """The game's translation comes from the session's cache when another test made it: the
    stand-ins are put up either way (only the translation is read instead of made)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REACT_EDITOR_CACHE": str(alfworld_session_cache)}
    out = subprocess.run(
        [sys.executable, "-c", RACE, list_tasks()[0].data["game"]],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "stand_in": True,
        "EnvInfos": "EnvInfos",
        "intro": "-= Welcom",
    }


# A new process: four threads parse with textworld's TatSu parsers at once (a game's grammar in a
# worker while another thread imports textworld, whose knowledge base is parsed at import).
PARSERS_AT_ONCE = """
import json, sys, threading
sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can: a race shows at once
from envs.alfworld import twlite
twlite.load_engine()
logic = twlite.module("textworld.logic")
textgen = twlite.module("textworld.envs.pddl.textgen")
errors, start = [], threading.Barrier(4)

def parse_propositions(name):
    start.wait()
    try:
        for i in range(400):
            p = logic.Proposition.parse(f"{name}{i}(x{i}: t, y: u)")
            assert (p.name, [a.name for a in p.arguments]) == (f"{name}{i}", [f"x{i}", "y"]), p
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}"[:200])

def parse_symbols(name):
    start.wait()
    try:
        for i in range(400):
            out = textgen._parse_and_convert(f"the #{name}{i}# is here", rule_name="symbols")
            assert len(out) == 3, out
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}"[:200])

threads = [threading.Thread(target=f, args=(n,)) for f in (parse_propositions, parse_symbols) for n in ("a", "b")]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(errors[:3]))
"""


def test_textworld_parsers_used_by_several_threads_at_once_each_parse_right():
    """Issue 45 item 7: the flake of the test above with a cold cache (a game's logic parsed in one
    thread while another's `import textworld` parsed the knowledge base): a TatSu parser keeps its
    parse on the parser object, so two at once failed ("pop from empty list") or misparsed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REACT_EDITOR_CACHE": "off"}
    out = subprocess.run(
        [sys.executable, "-c", PARSERS_AT_ONCE], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
