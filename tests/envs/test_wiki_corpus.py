"""Validate the built-in Wikipedia sample: articles, task sets and exemplar plans.

Plain Python on the JSON files, so a broken corpus is caught before any environment
code builds a ZIM from it. The sentence splitting below mirrors the original ReAct
WikiEnv (paragraphs on newlines, sentences on ". "), so exemplar steps are checked
against the observations the environment will really produce.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[2] / "envs" / "wikipedia" / "corpus"
YES_NO = {"yes", "no"}
LABELS = {"SUPPORTS", "REFUTES", "NOT ENOUGH INFO"}
ACTION_RE = re.compile(r"^(Search|Lookup|Finish)\[(.+)\]$", re.S)
# Period-terminated abbreviations and initials break the ". " sentence split.
ABBREV_RE = re.compile(
    r"\b(?:Dr|St|Mr|Mrs|Ms|Mt|Jr|Sr|No|Nos|vs|etc|approx|ca|c|Prof|Gen|Col|Capt|Lt|Co|Inc|Ltd|"
    r"Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|[A-Z])\.\s|\b(?:e\.g|i\.e|U\.S|U\.K)\.?"
)


def _jsonl(name: str) -> list[dict]:
    rows = []
    with open(CORPUS / name, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            assert line.strip(), f"{name}:{n} is blank"
            rows.append(json.loads(line))
    return rows


ARTICLES = _jsonl("articles.jsonl")
QUESTIONS = _jsonl("hotpotqa.jsonl")
CLAIMS = _jsonl("fever.jsonl")
PLANS = json.loads((CORPUS / "exemplar_plans.json").read_text(encoding="utf-8"))
BY_TITLE = {a["title"]: a for a in ARTICLES}
REDIRECTS = {r: a["title"] for a in ARTICLES for r in a.get("redirects", [])}
CONTENT = [a for a in ARTICLES if not a.get("disambiguation")]
DISAMBIG = [a for a in ARTICLES if a.get("disambiguation")]


def _resolve(name: str) -> dict | None:
    title = REDIRECTS.get(name, name)
    return BY_TITLE.get(title)


def _page_text(article: dict, lists_last: bool) -> str:
    """Paragraphs and list items one per line; lists_last mimics the original's p-then-ul order."""
    paras = [b for b in article["body"] if isinstance(b, str)]
    lists = [b for b in article["body"] if isinstance(b, list)]
    blocks = paras + lists if lists_last else article["body"]
    lines: list[str] = []
    for b in blocks:
        lines.extend([b] if isinstance(b, str) else b)
    return "\n".join(lines)


def _sentences(page: str) -> list[str]:
    out: list[str] = []
    for p in (p.strip() for p in page.split("\n")):
        if p:
            out += p.split(". ")
    return [s.strip() + "." for s in out if s.strip()]


def _search_obs(article: dict, lists_last: bool) -> str:
    return " ".join(_sentences(_page_text(article, lists_last))[:5])


def _lookup(article: dict, keyword: str, lists_last: bool) -> list[str]:
    return [s for s in _sentences(_page_text(article, lists_last)) if keyword.lower() in s.lower()]


def _full_text(article: dict) -> str:
    return _page_text(article, lists_last=False)


def _mentions(text: str, phrase: str) -> bool:
    """Whole-word, case-insensitive: "Sel" must not match inside "Thessel"."""
    return re.search(r"(?<!\w)" + re.escape(phrase) + r"(?!\w)", text, re.I) is not None


def _base(title: str) -> str:
    return re.sub(r"\s*\([^)]*\)$", "", title)


# ---------------------------------------------------------------- articles


def test_article_fields_and_block_shapes():
    for a in ARTICLES:
        assert set(a) <= {"title", "redirects", "disambiguation", "body"}, a["title"]
        assert isinstance(a["title"], str) and a["title"].strip() == a["title"] != ""
        assert isinstance(a.get("redirects", []), list)
        assert all(isinstance(r, str) and r.strip() for r in a.get("redirects", []))
        assert isinstance(a.get("disambiguation", False), bool)
        assert isinstance(a["body"], list) and a["body"], a["title"]
        for block in a["body"]:
            if isinstance(block, list):
                assert block and all(isinstance(i, str) and i.strip() for i in block), a["title"]
            else:
                assert isinstance(block, str) and block.strip(), a["title"]


def test_titles_and_redirects_are_unique_case_insensitively():
    names = [a["title"] for a in ARTICLES] + list(r for a in ARTICLES for r in a.get("redirects", []))
    folded = [n.casefold() for n in names]
    dupes = {n for n in folded if folded.count(n) > 1}
    assert not dupes, dupes


def test_counts():
    assert len(CONTENT) >= 64
    assert len(DISAMBIG) >= 3
    assert len(REDIRECTS) >= 6


def test_title_characters_exercise_url_encoding():
    titles = [a["title"] for a in ARTICLES]
    assert any(any(ord(c) > 127 for c in t) for t in titles)
    assert any("&" in t for t in titles)
    assert any("#" in t or "+" in t for t in titles)
    assert sum(any(ord(c) > 127 for c in _full_text(a)) for a in CONTENT) >= 5
    # an ASCII redirect for a non-ASCII title, so both spellings resolve
    assert any(any(ord(c) > 127 for c in t) and t.isascii() is False and r.isascii() for r, t in REDIRECTS.items())


def test_disambiguation_pages_point_at_real_articles():
    for a in DISAMBIG:
        first = a["body"][0]
        assert isinstance(first, str) and first.endswith("may refer to:"), a["title"]
        items = [i for b in a["body"] if isinstance(b, list) for i in b]
        assert len(items) >= 2, a["title"]
        for item in items:
            target = item.split(", ")[0]
            page = BY_TITLE.get(target)
            assert page is not None and not page.get("disambiguation"), (a["title"], target)
            assert a["title"].casefold() in target.casefold(), (a["title"], target)


def test_redirect_targets_are_content_pages():
    for name, title in REDIRECTS.items():
        assert title in BY_TITLE and not BY_TITLE[title].get("disambiguation"), name


@pytest.mark.parametrize("article", CONTENT, ids=lambda a: a["title"])
def test_article_shape_and_lead(article):
    paragraphs = [b for b in article["body"] if isinstance(b, str)]
    assert 2 <= len(paragraphs) <= 5, article["title"]
    sentences = _sentences(_full_text(article))
    assert 6 <= len(sentences) <= 25, (article["title"], len(sentences))
    lead = sentences[0]
    names = [_base(article["title"])] + article.get("redirects", [])
    assert any(n in lead for n in names), (article["title"], lead)
    assert re.search(r"\b(is|was|are|were)\b", lead), lead
    for s in sentences:
        # a fragment of one or two words means a period split a sentence in the middle
        assert len(s.split()) >= 3, (article["title"], s)


def test_no_period_abbreviations():
    for a in ARTICLES:
        text = _full_text(a) + "\n" + " ".join(a.get("redirects", [])) + " " + a["title"]
        m = ABBREV_RE.search(text)
        assert m is None, (a["title"], text[max(0, m.start() - 30) : m.end() + 30])
    for row in QUESTIONS + CLAIMS:
        text = row.get("question", row.get("claim")) + " "
        assert ABBREV_RE.search(text) is None, row["id"]


def test_lookup_keywords_repeat_within_pages():
    # lookup must be able to page through several results on some articles
    repeated = 0
    for a in CONTENT:
        sents = [s.lower() for s in _sentences(_full_text(a))]
        for kw in ("born", "album", "league", "rell effect", "orrin", "festival", "first minister"):
            if sum(kw in s for s in sents) >= 3:
                repeated += 1
                break
    assert repeated >= 10
    assert len(_lookup(BY_TITLE["Rell effect"], "Rell effect", False)) >= 3


# ---------------------------------------------------------------- task sets


def test_hotpotqa_fields_and_counts():
    ids = [q["id"] for q in QUESTIONS]
    assert len(ids) == len(set(ids))
    for q in QUESTIONS:
        assert set(q) >= {"id", "question", "answer", "type", "supporting", "level"}, q
        assert re.fullmatch(r"hp-\d{3}", q["id"])
        assert q["type"] in {"bridge", "comparison"}
        assert q["level"] in {"easy", "medium", "hard"}
        assert q["question"].endswith("?") and q["answer"].strip()
        assert len(q["supporting"]) == 2 and len(set(q["supporting"])) == 2, q["id"]
    assert len(QUESTIONS) >= 24
    assert sum(q["type"] == "bridge" for q in QUESTIONS) >= 8
    assert sum(q["type"] == "comparison" for q in QUESTIONS) >= 8


def test_hotpotqa_supporting_pages_hold_the_answer():
    for q in QUESTIONS:
        pages = [BY_TITLE.get(t) for t in q["supporting"]]
        assert all(p is not None and not p.get("disambiguation") for p in pages), q["id"]
        ans = q["answer"].casefold()
        if ans in YES_NO:
            assert q["type"] == "comparison", q["id"]
            continue
        assert any(_mentions(_full_text(p), ans) for p in pages), q["id"]
        if q["type"] == "comparison":
            # a comparison answer names one of the two compared entities
            assert _mentions(q["question"], ans), q["id"]


def test_hotpotqa_bridge_needs_both_pages():
    # the gold answer must not be stated on the page named in the question alone
    for q in QUESTIONS:
        if q["type"] != "bridge":
            continue
        holders = [t for t in q["supporting"] if _mentions(_full_text(BY_TITLE[t]), q["answer"])]
        assert holders, q["id"]
        others = [t for t in q["supporting"] if t not in holders]
        assert others, (q["id"], "answer appears on both supporting pages")


def test_fever_fields_counts_and_evidence():
    ids = [c["id"] for c in CLAIMS]
    assert len(ids) == len(set(ids))
    for c in CLAIMS:
        assert set(c) >= {"id", "claim", "label", "supporting"}, c
        assert re.fullmatch(r"fv-\d{3}", c["id"])
        assert c["label"] in LABELS
        assert c["supporting"] and all(t in BY_TITLE for t in c["supporting"]), c["id"]
        if c["label"] != "NOT ENOUGH INFO":
            assert c.get("evidence"), c["id"]
        if c.get("evidence"):
            assert any(c["evidence"] in _full_text(BY_TITLE[t]) for t in c["supporting"]), c["id"]
    assert len(CLAIMS) >= 12
    for label in LABELS:
        assert sum(c["label"] == label for c in CLAIMS) >= 3, label


# ---------------------------------------------------------------- exemplar plans


def _plans():
    for kind in ("hotpotqa", "fever"):
        for plan in PLANS[kind]:
            yield kind, plan


def test_exemplar_plan_shapes():
    assert set(PLANS) == {"hotpotqa", "fever"}
    assert len(PLANS["hotpotqa"]) == 6 and len(PLANS["fever"]) == 3
    assert {p["label"] for p in PLANS["fever"]} == LABELS
    for kind, plan in _plans():
        gold = plan["answer"] if kind == "hotpotqa" else plan["label"]
        assert plan["question" if kind == "hotpotqa" else "claim"].strip()
        steps = plan["steps"]
        assert 2 <= len(steps) <= (7 if kind == "hotpotqa" else 5)
        for i, step in enumerate(steps):
            assert step["thought"].strip() and "\n" not in step["thought"]
            m = ACTION_RE.match(step["action"])
            assert m, step["action"]
            assert (m.group(1) == "Finish") == (i == len(steps) - 1), step["action"]
        assert steps[-1]["action"] == f"Finish[{gold}]"
        if kind == "hotpotqa":
            assert f"so the answer is {gold}" in steps[-1]["thought"]


def test_exemplar_questions_not_in_test_set():
    test_texts = {q["question"].casefold() for q in QUESTIONS} | {c["claim"].casefold() for c in CLAIMS}
    for kind, plan in _plans():
        assert plan.get("question", plan.get("claim")).casefold() not in test_texts


@pytest.mark.parametrize("lists_last", [False, True], ids=["doc-order", "lists-last"])
def test_exemplar_steps_match_simulated_observations(lists_last):
    kinds = {"miss": 0, "disambiguation": 0, "lookup": 0}
    for kind, plan in _plans():
        page = None
        for step in plan["steps"]:
            verb, arg = ACTION_RE.match(step["action"]).groups()
            if verb == "Search":
                target = _resolve(arg)
                if step.get("miss"):
                    kinds["miss"] += 1
                    assert arg.casefold() not in {t.casefold() for t in list(BY_TITLE) + list(REDIRECTS)}
                    sim = step["similar"]
                    assert sim in BY_TITLE and arg.casefold() in sim.casefold(), sim
                    page = None
                elif step.get("disambiguation"):
                    kinds["disambiguation"] += 1
                    assert target is not None and target.get("disambiguation"), arg
                    items = [i.split(", ")[0] for b in target["body"] if isinstance(b, list) for i in b]
                    assert step["similar"] in items
                    page = None
                else:
                    assert target is not None and not target.get("disambiguation"), arg
                    page = target
                    assert step["expect"] in _search_obs(page, lists_last), (arg, step["expect"])
            elif verb == "Lookup":
                kinds["lookup"] += 1
                assert page is not None, "Lookup needs a page from a previous Search"
                hits = _lookup(page, arg, lists_last)
                if step.get("no_results"):
                    assert hits == [], hits
                else:
                    assert hits and step["expect"] in hits[0], (arg, hits[:1])
                    # the fact was not already visible in the search observation
                    assert step["expect"] not in _search_obs(page, lists_last)
    assert all(n >= 1 for n in kinds.values()), kinds


def test_exemplar_pages_do_not_leak_test_facts():
    # pages an exemplar reads must not be supporting pages of any test question or claim
    read = set()
    for _, plan in _plans():
        for step in plan["steps"]:
            verb, arg = ACTION_RE.match(step["action"]).groups()
            if verb == "Search" and not step.get("miss") and not step.get("disambiguation"):
                read.add(_resolve(arg)["title"])
    supporting = {t for row in QUESTIONS + CLAIMS for t in row["supporting"]}
    assert not read & supporting, read & supporting
