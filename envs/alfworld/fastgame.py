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

import copy
import hashlib
import importlib
import json
import os
import pickle
import stat
import sys
import threading
from collections import Counter, OrderedDict, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envs.base import EnvError
from envs.alfworld import twlite, twlogic
from envs.alfworld.wording import apply_wording

CACHE_VERSION = "1"
_LOCK = threading.RLock()


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
        return _sha(self.domain, self.grammar, self.problem)


def _sha(*parts: str) -> str:
    h = hashlib.sha1()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


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
            raise GameFileError(f"corrupt ALFWorld game file {path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    missing = [k for k in ("pddl_domain", "grammar", "pddl_problem") if not isinstance(data.get(k), str)]
    if missing:
        raise GameFileError(f"corrupt ALFWorld game file {path or '<data>'}: missing {', '.join(missing)}")
    walk = data.get("walkthrough")
    return GameData(path, data["pddl_domain"], data["grammar"], data["pddl_problem"],
                    tuple(walk) if walk else None, data.get("solvable"))


# ---------------------------------------------------------------- translation (PDDL -> SAS)

@contextmanager
def preserved_argv():
    """Trap: `fast_downward.pddl2sas` overwrites `sys.argv` (for its option parser)."""
    saved = list(sys.argv)
    try:
        yield
    finally:
        sys.argv[:] = saved


def cache_dir() -> Path | None:
    """Where translations and parsed game logic are kept across processes ($REACT_EDITOR_CACHE, else
    ~/.cache/react-editor); REACT_EDITOR_CACHE=off disables the disk cache."""
    root = os.environ.get("REACT_EDITOR_CACHE")
    if root == "off":
        return None
    base = Path(root) if root else Path.home() / ".cache" / "react-editor"
    return base / "alfworld-sas"


_TRANSLATIONS: dict[str, tuple[Any, str]] = {}


def by_name(module: str, qualname: str):
    """A class of an imported module (what `_Pickler` stores instead of the class)."""
    obj = sys.modules.get(module) or importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


class _Pickler(pickle.Pickler):
    """pickle, except that a class whose top-level package is not imported (textworld's, see
    twlite) is stored by name: pickle's own check that it can find a class imports its
    top-level package, i.e. all of textworld and its knowledge base."""

    def reducer_override(self, obj):
        if isinstance(obj, type) and obj.__module__.partition(".")[0] not in sys.modules:
            return by_name, (obj.__module__, obj.__qualname__)
        return NotImplemented


class _Unpickler(pickle.Unpickler):
    """Classes of modules already imported are taken from them: pickle's own lookup imports
    the top-level package first (`import textworld`, all of it; see twlite)."""

    def find_class(self, module, name):
        obj = sys.modules.get(module)
        if obj is None:
            return super().find_class(module, name)
        for part in name.split("."):
            obj = getattr(obj, part)
        return obj


def _disk_memo(key: str, build):
    """`build()`'s result, pickled in the cache folder under `key` (an unreadable entry is
    said in one line on stderr and rebuilt; a cache that cannot be written is skipped)."""
    d = cache_dir()
    f = d / f"{key}.pkl" if d else None
    if f is not None and f.exists():
        try:
            with open(f, "rb") as fh:
                return _Unpickler(fh).load()
        except twlogic.UNREADABLE as exc:
            why = (str(exc).splitlines() or [""])[0] or type(exc).__name__
            print(f"ALFWorld cache entry {f} is unreadable ({type(exc).__name__}: {why}); making it again",
                  file=sys.stderr, flush=True)
    result = build()
    if f is not None:
        try:
            d.mkdir(parents=True, exist_ok=True)
            tmp = f.with_suffix(f".{os.getpid()}.tmp")
            with open(tmp, "wb") as fh:
                _Pickler(fh, protocol=pickle.HIGHEST_PROTOCOL).dump(result)
            os.replace(tmp, f)
        except Exception:
            pass
    return result


# textworld's knowledge base (parsed at `import textworld`) comes from the same cache
twlogic.install_hook(_disk_memo)


def translate(domain: str, problem: str, optimize: bool = False) -> tuple[Any, str]:
    """fast_downward.pddl2sas, memoised in memory and on disk (pickled task + SAS text)."""
    import fast_downward

    def build():
        with preserved_argv():
            return fast_downward.pddl2sas(domain, problem, verbose=False, optimize=optimize)

    key = _sha(CACHE_VERSION, domain, problem, str(optimize))
    with _LOCK:
        if key not in _TRANSLATIONS:
            _TRANSLATIONS[key] = _disk_memo(key, build)
        return _TRANSLATIONS[key]


# ---------------------------------------------------------------- grammar with parse caches

def _copy_context(context: dict) -> dict:
    """textgen.copy_context without the deep copies: derivations only read the entity
    infos and variables, and each context gets its own `variables`/`mapping` dicts (the
    only parts a derivation updates). The deep copies were most of a step's time."""
    return {"state": context["state"], "facts": context["facts"], "variables": dict(context["variables"]),
            "mapping": dict(context["mapping"]), "entity_infos": context["entity_infos"]}


def _cached_grammar_class():
    textgen = twlite.module("textworld.envs.pddl.textgen")
    from textworld.logic import Rule

    parse_cache: dict[str, list] = {}
    rule_cache: dict[str, Any] = {}

    def parse_rule(expr: str):
        r = rule_cache.get(expr)
        if r is None:
            r = rule_cache[expr] = Rule.parse_conjunctive_query(expr)
        return r

    return _grammar_class(textgen, parse_rule, _symbol_classes(textgen, parse_rule), parse_cache)


def tree_copy(sym):
    """`copy.deepcopy` of a parsed grammar symbol (textgen's symbols: strings, a context,
    and for list and conditional symbols the symbol inside), without deepcopy's generic
    machinery, which was most of a step's time. A symbol waiting in the grammar has an empty
    context; one that has a context (never, as used here) still gets a deep copy of it."""
    new = object.__new__(type(sym))
    fields = dict(sym.__dict__)
    context = fields.get("context")
    fields["context"] = copy.deepcopy(context) if context else {}
    symbol_type = sys.modules["textworld.envs.pddl.textgen"].Symbol
    for name in ("symbol", "expression"):
        inner = fields.get(name)
        if isinstance(inner, symbol_type):
            fields[name] = tree_copy(inner)
        elif inner is not None and not isinstance(inner, str):
            fields[name] = copy.deepcopy(inner)
    new.__dict__ = fields
    return new


def _symbol_classes(textgen, parse_rule):
    """textgen's conditional and eval symbols with cached rules and compiled code; returns
    `_retype`, which swaps them into a parsed symbol tree."""

    class CachedConditionalSymbol(textgen.ConditionalSymbol):
        def derive(self):
            if len(self.context) == 0:
                raise ValueError("Empty context")
            context = _copy_context(self.context)
            contexts = [context]
            if self.given:
                rule = parse_rule(self.given)
                contexts = []
                for mapping in context["state"].all_assignments(rule, context["mapping"]):
                    c = _copy_context(context)
                    c["variables"].update({ph.name: c["entity_infos"][var.name] for ph, var in mapping.items()})
                    c["mapping"].update(mapping)
                    contexts.append(c)
            return [_retype(_symbol_copy(self.expression, c)) for c in contexts]

    def _symbol_copy(sym, context):
        """textgen.Symbol.copy with the cheap context copy."""
        out = tree_copy(sym)
        out.context = _copy_context(context)
        return out

    class CachedEvalSymbol(textgen.EvalSymbol):
        _code: dict[str, Any] = {}

        def derive(self, context=None):
            context = context or self.context
            code = self._code.get(self.expression)
            if code is None:
                code = self._code[self.expression] = compile(self.expression, "<grammar>", "eval")
            scope = {"self": self, "context": context}
            scope.update(context["variables"])
            return [textgen.TerminalSymbol(eval(code, vars(textgen), scope))]

    def _retype(sym):
        """Swap textgen's symbol classes for the cached ones, recursively."""
        if type(sym) is textgen.ConditionalSymbol:
            sym.__class__ = CachedConditionalSymbol
        elif type(sym) is textgen.EvalSymbol:
            sym.__class__ = CachedEvalSymbol
        if isinstance(sym, textgen.ConditionalSymbol):
            _retype(sym.expression)
        elif isinstance(sym, textgen.ListSymbol):
            _retype(sym.symbol)
        return sym

    return _retype


def _grammar_class(textgen, parse_rule, _retype, parse_cache):
    """textgen's grammar over the cached symbols, with parsed derivations kept per start."""

    class CachedGrammar(textgen.ContextSensitiveGrammar):
        def retype_all(self):
            for rules in self._rules.values():
                for rule in rules:
                    for sym in rule.rhs:
                        _retype(sym)
                    if rule.condition:
                        parse_rule(rule.condition)

        def replace(self, start):
            rules = self._rules.get(str(start))
            if not rules:
                raise textgen.CSGUnknownSymbolError(start)
            for rule in rules:
                if not rule.condition:
                    break
                if any(True for _ in start.context["state"].all_assignments(parse_rule(rule.condition),
                                                                             start.context["mapping"])):
                    break
            else:  # no applicable rule: same failure as textgen
                rule = None
            symbols = [tree_copy(s) for s in rule.rhs] if rule is not None else copy.deepcopy([][0])
            for symbol in symbols:
                symbol.context = _copy_context(start.context)
            return symbols

        def derive(self, start: str, context={}) -> str:
            parsed = parse_cache.get(start)
            if parsed is None:
                parsed = [_retype(s) for s in textgen._parse_and_convert(start, rule_name="symbols")]
                parse_cache[start] = parsed
            derivation = [tree_copy(s) for s in parsed][::-1]
            for symbol in derivation:
                symbol.context = _copy_context(context)
            derived = []
            while derivation:
                symbol = derivation.pop()
                if isinstance(symbol, textgen.TerminalSymbol):
                    derived.append(symbol)
                elif isinstance(symbol, textgen.NonterminalSymbol):
                    derivation += self.replace(symbol)[::-1]
                elif isinstance(symbol, (textgen.ConditionalSymbol, textgen.EvalSymbol, textgen.ListSymbol)):
                    derivation += symbol.derive()[::-1]
                else:
                    raise NotImplementedError("Unknown symbol: {}".format(type(symbol)))
            return "".join(map(str, derived))

    return CachedGrammar


_GRAMMAR_CLASS = None
_LOGICS: dict[str, Any] = {}


def game_logic(domain: str, grammar: str):
    """textworld's GameLogic for (domain, grammar), parsed once (kept on disk too)."""
    global _GRAMMAR_CLASS
    pddl_logic = twlite.module("textworld.envs.pddl.logic")

    key = _sha(domain, grammar)
    with _LOCK:
        if key not in _LOGICS:
            if _GRAMMAR_CLASS is None:
                _GRAMMAR_CLASS = _cached_grammar_class()
            lg = _disk_memo(_sha(CACHE_VERSION, "logic", domain, grammar),
                            lambda: pddl_logic.GameLogic(domain=domain, grammar=grammar))
            cg = _GRAMMAR_CLASS()
            cg.update(lg.grammar)
            cg.retype_all()
            lg.grammar = cg
            _LOGICS[key] = lg
        return _LOGICS[key]


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

    with _LOCK:
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
            raise GameFileError(f"corrupt ALFWorld game file {data.path or '<data>'}: grammar does not parse ({type(exc).__name__})") from None
        self.lib = _take_lib()
        try:
            state = _make_state(self.lib, self.domain, data.problem, self.logic)
        except Exception as exc:
            raise GameFileError(f"corrupt ALFWorld game file {data.path or '<data>'}: PDDL problem does not load ({type(exc).__name__}: {str(exc)[:80]})") from None
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
        return {"state": self.state, "facts": facts, "variables": variables, "mapping": mapping,
                "entity_infos": self.entity_infos}

    def _gather(self):
        """PddlEnv._gather_infos' admissible commands."""
        actions = list(self.state.all_applicable_actions())
        mapping = {k: info.name for k, info in self.entity_infos.items()}
        facts = list(self.state.facts)
        commands = []
        for action in actions:
            ctx = self._context({ph.name: self.entity_infos[var.name] for ph, var in action.mapping.items()},
                                action.mapping, facts)
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
        ctx = self._context({ph.name: self.entity_infos[var.name] for ph, var in action.mapping.items()},
                            action.mapping, list(self.state.facts))
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
        st._facts, st._vars_by_name, st._vars_by_type, st._var_counts = defaultdict(set), {}, defaultdict(set), Counter()
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
            with _LOCK:
                _FREE_LIBS.append(self.lib)
            self.lib = None
