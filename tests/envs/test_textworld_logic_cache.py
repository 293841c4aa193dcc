"""textworld parses its knowledge base (ten .twl files, TatSu) at `import textworld`: once the
ALFWorld family is imported, that parse is kept in the cache folder and a later process reads
it back instead of parsing (envs/alfworld/twlogic.py). How much time that saves:
benchmarks/alfworld.py; here only what is read, written and equal."""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envs.alfworld import twlogic

ROOT = Path(__file__).resolve().parents[2]

# A child process: the family first (as the CLI and the app import it), then textworld.
PROBE = """
import json, sys
import envs.alfworld
import textworld
from textworld.generator.data import KB
from textworld.logic import GameLogic
fresh = GameLogic.load.__func__.uncached(GameLogic, sys.argv[1:])
kb = KB.logic
inform7 = lambda lg: {k: v if isinstance(v, str) else {n: repr(vars(x)) for n, x in v.items()}
                      for k, v in vars(lg.inform7).items()}
aliases = lambda lg: {sig: (a.pattern, a.replacement) for sig, a in lg.aliases.items()}
print(json.dumps({"marker": getattr(kb, "marker", None), "same_document": kb.serialize() == fresh.serialize(),
                  "same_rules": kb.rules == fresh.rules, "same_constraints": kb.constraints == fresh.constraints,
                  "same_predicates": kb.predicates == fresh.predicates, "same_aliases": aliases(kb) == aliases(fresh),
                  "same_types": sorted(t.name for t in kb.types) == sorted(t.name for t in fresh.types),
                  "same_reverse": kb.reverse_rules == fresh.reverse_rules,
                  "reverse_rules_linked": all(kb.rules[n].reverse_rule is kb.rules[r] for n, r in kb.reverse_rules.items()),
                  "same_inform7": inform7(kb) == inform7(fresh)}))
"""


def _twl_paths() -> list[str]:
    """The knowledge base's files in the order textworld globs them (`LOGIC_DATA_PATH`),
    found without importing textworld here (its import is what the probes time and cache)."""
    package = importlib.util.find_spec("textworld").submodule_search_locations[0]
    return glob.glob(os.path.join(package, "generator", "data", "logic", "*.twl"))


def _probe(cache: str, paths: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REACT_EDITOR_CACHE": cache}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *paths], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def cold(tmp_path_factory) -> tuple[Path, list[str], dict]:
    """One cold process (knowledge base parsed, entry written) for the module's tests: each
    works on its own copy of the cache folder."""
    cache, paths = tmp_path_factory.mktemp("logic") / "cache", _twl_paths()
    return cache, paths, _probe(str(cache), paths)


def _copy(cold, tmp_path) -> tuple[Path, list[str], dict]:
    cache, paths, first = cold
    shutil.copytree(cache, tmp_path / "cache")
    return tmp_path / "cache", paths, dict(first)


def test_knowledge_base_parsed_once_then_read_from_the_cache(cold, tmp_path):
    cache, paths, first = _copy(cold, tmp_path)
    assert len(paths) >= 5
    assert first.pop("marker") is None and all(first.values()), first  # equal to textworld's own parse
    (entry,) = (cache / "alfworld-sas").glob("twlogic-*.pkl")
    # the next process reads the entry (a marked copy proves it is what it got), parses nothing
    logic = pickle.loads(pickle.loads(entry.read_bytes()))
    logic.marker = "from the cache"
    entry.write_bytes(pickle.dumps(twlogic.dumps(logic)))
    second = _probe(str(cache), paths)
    assert second.pop("marker") == "from the cache" and all(second.values()), second


def test_a_broken_entry_is_parsed_again_and_off_writes_nothing(cold, tmp_path):
    cache, paths, _ = _copy(cold, tmp_path)
    (entry,) = (cache / "alfworld-sas").glob("twlogic-*.pkl")
    entry.write_bytes(b"not a pickle")
    again = _probe(str(cache), paths)
    assert again.pop("marker") is None and all(again.values()), again
    assert pickle.loads(pickle.loads(entry.read_bytes())).serialize()  # rewritten whole
    off = _probe("off", paths)
    assert off.pop("marker") is None and all(off.values()), off
    assert not (ROOT / "off").exists()  # "off" is no folder name
