"""textworld's game logic and grammar with parse caches (`game_logic`): the template of every
admissible command, every grammar condition and derivation string parsed once (TatSu is slow),
derivation contexts copied shallowly and parsed symbols by `tree_copy`, not `copy.deepcopy`."""

from __future__ import annotations

import copy
import sys
from typing import Any

from envs.alfworld import twlite
from envs.alfworld.translation import CACHE_VERSION, LOCK, disk_memo, sha


def _copy_context(context: dict) -> dict:
    """textgen.copy_context without the deep copies: derivations only read the entity
    infos and variables, and each context gets its own `variables`/`mapping` dicts (the
    only parts a derivation updates). The deep copies were most of a step's time."""
    return {
        "state": context["state"],
        "facts": context["facts"],
        "variables": dict(context["variables"]),
        "mapping": dict(context["mapping"]),
        "entity_infos": context["entity_infos"],
    }


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
                if any(
                    True
                    for _ in start.context["state"].all_assignments(
                        parse_rule(rule.condition), start.context["mapping"]
                    )
                ):
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

    key = sha(domain, grammar)
    with LOCK:
        if key not in _LOGICS:
            if _GRAMMAR_CLASS is None:
                _GRAMMAR_CLASS = _cached_grammar_class()
            lg = disk_memo(
                sha(CACHE_VERSION, "logic", domain, grammar),
                lambda: pddl_logic.GameLogic(domain=domain, grammar=grammar),
            )
            cg = _GRAMMAR_CLASS()
            cg.update(lg.grammar)
            cg.retype_all()
            lg.grammar = cg
            _LOGICS[key] = lg
        return _LOGICS[key]
