"""textworld's PDDL engine with alfworld's wrapper semantics, minus the repeated work.

The stock stack (`PddlEnv` + `AlfredDemangler` + `AlfredInfos`) redoes deterministic work
all the time: every load *and* every reset runs the Python PDDL->SAS translation twice
(~0.7 s each), and every step re-parses (with TatSu) the template of every admissible
command and every grammar condition. Here the same textworld/fast-downward objects do the
same computation, but translations, parsed grammars, parsed derivation strings and parsed
conditions are cached (translations and parsed game logic also on disk), derivation contexts
are copied shallowly and parsed symbols by `tree_copy` (not `copy.deepcopy`), only the
textworld modules a game needs are imported (twlite), the planner's optimized translation
is made only when a plan is asked for, and a state is restored by reference: fast-downward's
state id plus the facts and commands kept for it (replaying operator ids only when the task
was reloaded). A test plays
games with and without these caches and compares the transcripts byte for byte.
"""

from __future__ import annotations

import json
import os
import stat
from collections import Counter, OrderedDict, defaultdict
from dataclasses import dataclass
from pathlib import Path

from envs.alfworld import twlite
from envs.alfworld.grammar_cache import game_logic
from envs.alfworld.translation import LOCK, sha, translate
from envs.alfworld.wording import apply_wording
from envs.base import EnvError


class GameFileError(EnvError):
    """A game.tw-pddl that is missing or cannot be read."""


@dataclass(frozen=True)
class GameData:
    path: str | None
    domain: str
    grammar: str
    problem: str
    walkthrough: tuple[str, ...] | None
    solvable: bool | None

    @property
    def key(self) -> str:
        return sha(self.domain, self.grammar, self.problem)


def load_game_data(src: str | os.PathLike | dict) -> GameData:
    """Read and check a game.tw-pddl (path or already-parsed dict)."""
    path = None
    if isinstance(src, dict):
        data = src
    else:
        path = str(src)
        try:
            if not stat.S_ISREG(Path(path).stat().st_mode):  # a FIFO would block, a device never end
                raise GameFileError(f"ALFWorld game file {path} is not a regular file")
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise GameFileError(f"ALFWorld game file not found: {path}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise GameFileError(f"cannot read ALFWorld game file {path}: {exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise GameFileError(
                f"corrupt ALFWorld game file {path}: not JSON ({exc.msg} at line {exc.lineno})"
            ) from None
    missing = [k for k in ("pddl_domain", "grammar", "pddl_problem") if not isinstance(data.get(k), str)]
    if missing:
        raise GameFileError(f"corrupt ALFWorld game file {path or '<data>'}: missing {', '.join(missing)}")
    walk = data.get("walkthrough")
    return GameData(
        path,
        data["pddl_domain"],
        data["grammar"],
        data["pddl_problem"],
        tuple(walk) if walk else None,
        data.get("solvable"),
    )


# ---------------------------------------------------------------- state


def _make_state(lib, domain: str, problem: str, logic):
    """A textworld PddlState built like PddlState.__init__, from the cached translation."""
    import fast_downward

    pddl_logic = twlite.module("textworld.envs.pddl.logic")
    from textworld.logic import Proposition, Type, Variable

    state = pddl_logic.PddlState.__new__(pddl_logic.PddlState)
    state._facts = defaultdict(set)
    state._vars_by_name = {}
    state._vars_by_type = defaultdict(set)
    state._var_counts = Counter()
    state._logic = logic
    state.downward_lib = lib
    state.pddl_problem = problem
    state.task, state.sas = translate(logic.domain, problem)
    state.sas_replan = None
    state._actions = {a.name: a for a in state.task.actions}
    for type_ in state.task.types:
        try:
            logic.types.add(Type(type_.name, type_.supertype_names))
        except ValueError:
            pass
    lib.load_sas(state.sas.encode("utf-8"))
    state.name2type = {o.name: o.type_name for o in state.task.objects}

    def _atom2proposition(atom):
        if isinstance(atom, fast_downward.translate.pddl.conditions.Atom):
            if atom.predicate == "=":
                return None
            return Proposition(atom.predicate, [Variable(arg, state.name2type[arg]) for arg in atom.args])
        elif isinstance(atom, fast_downward.translate.pddl.f_expression.Assign):
            if atom.fluent.symbol == "total-cost":
                return None
            name = "{}".format(atom.expression.value)
            if str.isdigit(name):
                return None
            return Proposition(name, [Variable(arg, state.name2type[arg]) for arg in atom.fluent.args])

    facts = [_atom2proposition(atom) for atom in state.task.init]
    state.add_facts(list(filter(None, facts)))
    size = lib.get_state_size()
    atoms = (pddl_logic.Atom * size)()
    lib.get_state(atoms)
    facts = [atom.get_fact(state.name2type) for atom in atoms]
    state.add_facts([f for f in facts if not f.is_negation])
    return state


def _apply_op(state, op_id: int, nb_effects: int):
    """PddlState.apply for a recorded operator (same C call, same fact updates)."""
    pddl_logic = twlite.module("textworld.envs.pddl.logic")

    effects = (pddl_logic.Atom * nb_effects)()
    state.downward_lib.apply_operator(op_id, effects)
    for effect in effects:
        prop = effect.get_fact(state.name2type)
        state.remove_fact(prop.negate())
        state.add_fact(prop)


_FREE_LIBS: list = []


def _take_lib():
    """A fast-downward library copy (each holds one game's state). Copies are recycled,
    never `close_lib`-ed: loading a new copy after a dlclose crashes the process."""
    import ctypes

    import fast_downward

    with LOCK:
        if _FREE_LIBS:
            return _FREE_LIBS.pop()
    lib = fast_downward.load_lib()
    lib.get_state_id.argtypes, lib.get_state_id.restype = [], ctypes.c_int  # not declared by fast_downward
    lib.set_state_id.argtypes, lib.set_state_id.restype = [ctypes.c_int], None
    return lib


@dataclass
class StepOutcome:
    feedback: str
    won: bool
    valid: bool


@dataclass
class _Frame:
    """One state: fast-downward's id for it in the loaded task, textworld's facts, and the
    admissible commands derived for it (the grammar work of a step, never redone)."""

    sid: int
    facts: tuple
    commands: list
    won: bool


@dataclass
class _Snapshot:
    game: "FastGame"
    epoch: int
    ops: tuple
    moves: int
    won: bool
    gen: int = 0  # the game's task load the state id `sid` belongs to
    sid: int | None = None


FRAMES_PER_GAME = 1024  # recently used states kept per game (~8 KB each); older ones replay ops


class FastGame:
    """One ALFWorld game on textworld's PDDL engine, wording chosen at load time.

    Observations are what PddlEnv + AlfredDemangler(shuffle=False) + AlfredInfos produce."""

    def __init__(self, data: GameData, wording: str = "paper"):
        twlite.load_engine()  # only the parts of textworld a game needs
        from alfworld.agents.utils.misc import Demangler

        from envs.alfworld.twlite import EntityInfo

        self.data = data
        self.wording = wording
        self.domain, self.grammar = apply_wording(data.domain, data.grammar, wording)
        try:
            self.logic = game_logic(self.domain, self.grammar)
        except Exception as exc:
            raise GameFileError(
                f"corrupt ALFWorld game file {data.path or '<data>'}: grammar does not parse ({type(exc).__name__})"
            ) from None
        self.lib = _take_lib()
        try:
            state = _make_state(self.lib, self.domain, data.problem, self.logic)
        except Exception as exc:
            raise GameFileError(
                f"corrupt ALFWorld game file {data.path or '<data>'}: PDDL problem does not load ({type(exc).__name__}: {str(exc)[:80]})"
            ) from None
        infos = {v.name: EntityInfo(v.name, v.type) for fact in state.facts for v in fact.arguments}
        for info in infos.values():
            info.name = info.id
            info.definite = "the"
            info.indefinite = "a"
        demangler = Demangler(game_infos=infos, shuffle=False)
        for info in infos.values():
            info.name = demangler.demangle_alfred_name(info.id)
        self.entity_infos = infos
        self.state = state
        self._gen = 1  # bumped whenever the task is loaded into the library again
        self._frames: "OrderedDict[int, _Frame]" = OrderedDict()  # by state id, for this `_gen`
        self._initial: _Frame | None = None
        self._intro: str | None = None
        self.epoch = 0
        self.ops: list[tuple[int, int]] = []
        self.moves = 0
        self.won = False
        self._valid: list | None = None
        self._commands: list[str] | None = None
        self._replan_loaded = False

    # -- textworld semantics

    def _context(self, variables, mapping, facts):
        return {
            "state": self.state,
            "facts": facts,
            "variables": variables,
            "mapping": mapping,
            "entity_infos": self.entity_infos,
        }

    def _gather(self):
        """PddlEnv._gather_infos' admissible commands."""
        actions = list(self.state.all_applicable_actions())
        mapping = {k: info.name for k, info in self.entity_infos.items()}
        facts = list(self.state.facts)
        commands = []
        for action in actions:
            ctx = self._context(
                {ph.name: self.entity_infos[var.name] for ph, var in action.mapping.items()}, action.mapping, facts
            )
            action.command_template = self.logic.grammar.derive(action.command_template, ctx)
            commands.append(action.format_command(mapping))
        self._valid, self._commands = actions, commands
        self.won = bool(self.state.check_goal())

    def reset(self) -> str:
        """Back to the initial state; returns the intro ("-= Welcome ... =-\\n\\n...")."""
        self._to_initial()
        self.epoch += 1
        self.ops = []
        self.moves = 0
        if self._intro is None:  # derived from the initial state only
            self._intro = self.logic.grammar.derive("#intro#", self._context({}, {}, list(self.state.facts)))
        return self._intro

    def step(self, command: str) -> StepOutcome:
        command = command.strip()
        try:
            idx = self._commands.index(command)
        except ValueError:
            # PddlEnv.step re-gathers here too; the state did not change, so neither do they.
            return StepOutcome("Nothing happens.", self.won, False)
        action = self._valid[idx]
        op = self.state._operators[action.id]
        self.state.apply(action)
        self.ops.append((op.id, op.nb_effect_atoms))
        ctx = self._context(
            {ph.name: self.entity_infos[var.name] for ph, var in action.mapping.items()},
            action.mapping,
            list(self.state.facts),
        )
        feedback = self.logic.grammar.derive(action.feedback_rule, ctx)
        self.moves += 1
        self._gather()
        return StepOutcome(feedback, self.won, True)

    def admissible_commands(self) -> list[str]:
        return sorted(set(self._commands or []))

    def id_to_name(self) -> dict[str, str]:
        return {k: v.name for k, v in self.entity_infos.items()}

    def facts(self):
        return list(self.state.facts)

    # -- state capture

    def snapshot(self) -> _Snapshot:
        return _Snapshot(self, self.epoch, tuple(self.ops), self.moves, self.won, self._gen, self._frame().sid)

    def restore(self, snap: _Snapshot) -> None:
        """Put the game in the snapshot's state: by fast-downward's state id and the facts
        and commands kept for it (about a millisecond), or - when that state is no longer
        kept - from the initial state by re-applying the recorded operators (no text
        generation). Either equals a fresh replay."""
        if snap.game is not self:
            raise EnvError("state token belongs to another game")
        frame = self._frames.get(snap.sid) if snap.gen == self._gen else None
        if frame is not None:
            self._frames.move_to_end(snap.sid)
            self._load_frame(frame)
            self.ops = list(snap.ops)
            self.moves = snap.moves
        else:
            self.replay(snap.ops, snap.moves)

    def replay(self, ops, moves: int) -> None:
        """The initial state with these recorded operators applied (also in another process,
        where the ops of a snapshot are all that is sent)."""
        self._to_initial()
        for op_id, nb in ops:
            _apply_op(self.state, op_id, nb)
        self._gather()
        self.ops = list(ops)
        self.moves = moves

    def _to_initial(self) -> None:
        """The initial state: its kept frame, or (first use, or after the planner's task was
        loaded) the state rebuilt from the cached translation."""
        if self._initial is not None:
            self._load_frame(self._initial)
            return
        if self.epoch or self.ops:
            self.state = _make_state(self.lib, self.domain, self.data.problem, self.logic)
            self._gen += 1
            self._frames.clear()
            self._replan_loaded = False
        self._gather()
        self._initial = self._frame()

    def _frame(self) -> _Frame:
        """The current state's frame, kept among the recently used ones."""
        sid = self.lib.get_state_id()
        f = self._frames.get(sid)
        if f is None:
            f = self._frames[sid] = _Frame(sid, tuple(self.state.facts), self._commands, self.won)
            if len(self._frames) > FRAMES_PER_GAME:
                self._frames.popitem(last=False)
        else:
            self._frames.move_to_end(sid)
        return f

    def _load_frame(self, f: _Frame) -> None:
        self.lib.set_state_id(f.sid)
        st = self.state  # textworld's State bookkeeping, rebuilt from the facts by its own code
        st._facts, st._vars_by_name, st._vars_by_type, st._var_counts = (
            defaultdict(set),
            {},
            defaultdict(set),
            Counter(),
        )
        st.add_facts(f.facts)
        # the actions again (one C call; same order as when the commands were derived)
        self._valid, self._commands, self.won = list(st.all_applicable_actions()), f.commands, f.won

    # -- planner

    def load_replan(self) -> None:
        """The planner's optimized translation, made only when a plan is wanted."""
        if not self._replan_loaded:
            self._gen += 1  # loading it may reset the library's state registry: frames go stale
            self._frames.clear()
            self._initial = None
            _, sas_replan = translate(self.domain, self.data.problem, optimize=True)
            self.state.sas_replan = sas_replan
            self.lib.load_sas_replan(sas_replan.encode("utf-8"))
            self._replan_loaded = True

    def plan(self) -> list[str]:
        self.load_replan()
        return self.state.replan(self.entity_infos)

    def close(self) -> None:
        if self.lib is not None:
            with LOCK:
                _FREE_LIBS.append(self.lib)
            self.lib = None
