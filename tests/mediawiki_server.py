"""A local MediaWiki Action API server on 127.0.0.1 for tests and the benchmark.

It serves articles in the corpus format the way Wikipedia's `api.php` does (formatversion=2):
`action=query&titles=..&redirects=1&prop=pageprops&ppprop=disambiguation` (title
normalisation, redirects, missing/invalid titles, the `\\x1f` multi-value separator),
`action=parse&pageid=..|page=..&prop=text` (MediaWiki-flavoured HTML: parser-output div,
infobox table, empty paragraphs, a TemplateStyles <style>), and `list=search&srsearch=..`.
Search ranking comes from libzim's Xapian index of the same articles (a stand-in for
CirrusSearch), so a ZIM and this server agree on the similar-title lists. Responses are
gzipped when asked. Faults (HTTP status + Retry-After, delays, broken bodies) are scripted
with `push_fault`; every request is recorded.

    with MediaWikiServer(articles) as wiki:
        backend = LiveBackend(wiki.api_url)
"""

from __future__ import annotations

import gzip
import html
import json
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from envs.wikipedia.zim import build_zim, open_archive, similar_titles

_ILLEGAL = re.compile(r"[#<>\[\]|{}\x00-\x1f\x7f]")

# A handful of small articles in the corpus format, used by tests until (and besides) the
# built-in corpus. Written for these tests; they describe nothing real.
SAMPLE_ARTICLES: list[dict] = [
    {
        "title": "Colorado orogeny",
        "redirects": ["Colorado Orogeny", "Orogeny of Colorado"],
        "body": [
            "The Colorado orogeny was an episode of mountain building in Colorado and nearby areas. "
            "It took place during the Paleoproterozoic era. The orogeny built a chain of mountains "
            "along the southern edge of a craton.",
            "The eastern sector extends into the High Plains and is called the Central Plains orogeny. "
            "The western sector reaches the Uinta range. Rocks of the eastern sector are buried. "
            "Geologists study the eastern sector with drill cores.",
            ["Paleoproterozoic mountain building events", "Geology of the state of Colorado", "Short"],
        ],
    },
    {
        "title": "High Plains",
        "disambiguation": True,
        "redirects": [],
        "body": [
            "High Plains may refer to:",
            [
                "High Plains (United States), a part of the Great Plains",
                "High Plains (Australia), a plateau in Victoria",
            ],
        ],
    },
    {
        "title": "High Plains (United States)",
        "redirects": ["High plains of America"],
        "body": [
            "The High Plains are a subregion of the Great Plains. From east to west, the High Plains "
            "rise in elevation from around 1,800 to 7,000 ft (550 to 2,130 m).",
            "Winters on the High Plains are cold and dry. Wheat is the main crop on the High Plains.",
        ],
    },
    {
        "title": "High Plains (Australia)",
        "redirects": [],
        "body": ["The High Plains are a plateau in the Australian state of Victoria. Snow covers them in winter."],
    },
    {
        "title": "Zürich Opera House",
        "redirects": ["Opernhaus Zürich"],
        "body": [
            "The Zürich Opera House is an opera house in the Swiss city of Zürich. It opened in 1891. "
            "Its ensemble stages about 250 performances a year.",
            "The building was designed by Fellner & Helmer. Its façade faces the lake.",
        ],
    },
    {
        "title": "AT&T Tower",
        "redirects": ["A&T Tower"],
        "body": ["AT&T Tower is a fictional office tower used in these tests. It has 42 floors."],
    },
    {
        "title": "C++ (language)",
        "redirects": [],
        "body": ["C++ (language) is an example article whose title holds plus signs. It is short."],
    },
    {
        "title": "東京タワー",
        "redirects": ["Tokyo Tower"],
        "body": ["東京タワー is the name of a tower in Tokyo written in Japanese. The tower is 333 metres tall."],
    },
    {
        "title": "Milhouse Example",
        "redirects": [],
        "body": [
            "Milhouse Example is a character in a cartoon invented for these tests. He is ten years old.",
            "Milhouse Example was named after a teacher of the cartoonist. The teacher taught history.",
            "Literal backslash sequences like a\\nb should be cleaned from observations.",
        ],
    },
]

SAMPLE_HOTPOT: list[dict] = [
    {
        "id": "t-001",
        "question": "What is the elevation range of the area the eastern sector of the Colorado orogeny extends into?",
        "answer": "1,800 to 7,000 ft",
        "type": "bridge",
        "supporting": ["Colorado orogeny", "High Plains (United States)"],
        "level": "medium",
    },
    {
        "id": "t-002",
        "question": "Which is taller, Tokyo Tower or AT&T Tower?",
        "answer": "Tokyo Tower",
        "type": "comparison",
        "supporting": ["東京タワー", "AT&T Tower"],
        "level": "easy",
    },
]
SAMPLE_FEVER: list[dict] = [
    {
        "id": "f-001",
        "claim": "The Zürich Opera House opened in 1891.",
        "label": "SUPPORTS",
        "supporting": ["Zürich Opera House"],
    },
    {"id": "f-002", "claim": "AT&T Tower has 12 floors.", "label": "REFUTES", "supporting": ["AT&T Tower"]},
    {
        "id": "f-003",
        "claim": "Milhouse Example likes pizza.",
        "label": "NOT ENOUGH INFO",
        "supporting": ["Milhouse Example"],
    },
]
SAMPLE_PLANS: dict = {
    "hotpotqa": [
        {
            "question": SAMPLE_HOTPOT[0]["question"],
            "answer": "1,800 to 7,000 ft",
            "steps": [
                {"thought": "I need to search Colorado orogeny.", "action": "Search[Colorado orogeny]"},
                {"thought": "I need to look up eastern sector.", "action": "Lookup[eastern sector]"},
                {"thought": "I need to search High Plains.", "action": "Search[High Plains]", "miss": True},
                {
                    "thought": "I need to search High Plains (United States).",
                    "action": "Search[High Plains (United States)]",
                },
                {"thought": "So the answer is 1,800 to 7,000 ft.", "action": "Finish[1,800 to 7,000 ft]"},
            ],
        },
        {
            "question": SAMPLE_HOTPOT[1]["question"],
            "answer": "Tokyo Tower",
            "steps": [
                {"thought": "I need to search Tokyo Tower.", "action": "Search[Tokyo Tower]"},
                {"thought": "Tokyo Tower is 333 metres tall. Next AT&T Tower.", "action": "Search[AT&T Tower]"},
                {"thought": "42 floors is less than 333 metres.", "action": "Finish[Tokyo Tower]"},
            ],
        },
        {
            "question": "Who was Milhouse Example named after?",
            "answer": "a teacher of the cartoonist",
            "steps": [
                {"thought": "I need to search Milhouse.", "action": "Search[Milhouse]", "miss": True},
                {"thought": "I should search Milhouse Example.", "action": "Search[Milhouse Example]"},
                {
                    "thought": "The answer is a teacher of the cartoonist.",
                    "action": "Finish[a teacher of the cartoonist]",
                },
            ],
        },
    ],
    "fever": [
        {
            "claim": SAMPLE_FEVER[0]["claim"],
            "label": "SUPPORTS",
            "steps": [
                {"thought": "I should search Zürich Opera House.", "action": "Search[Zürich Opera House]"},
                {"thought": "It opened in 1891.", "action": "Finish[SUPPORTS]"},
            ],
        },
        {
            "claim": SAMPLE_FEVER[2]["claim"],
            "label": "NOT ENOUGH INFO",
            "steps": [
                {"thought": "I should search Milhouse Example.", "action": "Search[Milhouse Example]"},
                {"thought": "Maybe look up pizza.", "action": "Lookup[pizza]"},
                {"thought": "Nothing about pizza.", "action": "Finish[NOT ENOUGH INFO]"},
            ],
        },
    ],
}


def write_corpus(folder: Path) -> Path:
    """A corpus directory in the built-in format, from the samples above."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (
        ("articles.jsonl", SAMPLE_ARTICLES),
        ("hotpotqa.jsonl", SAMPLE_HOTPOT),
        ("fever.jsonl", SAMPLE_FEVER),
    ):
        (folder / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    (folder / "exemplar_plans.json").write_text(
        json.dumps(SAMPLE_PLANS, ensure_ascii=False, indent=1), encoding="utf-8"
    )
    return folder


@dataclass
class Fault:
    status: int = 500
    retry_after: float | str | None = None
    delay_s: float = 0.0
    body: bytes | None = None  # raw body sent with status 200 when status == 200


@dataclass
class Request:
    params: dict[str, str]
    headers: dict[str, str]
    gzipped: bool = False
    at: float = field(default_factory=time.monotonic)


def mw_normalize(title: str) -> str:
    t = " ".join(title.replace("_", " ").split())
    return t[:1].upper() + t[1:]


def mw_html(article: dict) -> str:
    """Roughly what `action=parse&prop=text` returns for an article."""
    esc = html.escape
    parts = [
        '<div class="mw-content-ltr mw-parser-output" lang="en" dir="ltr">',
        '<style data-mw-deduplicate="TemplateStyles:r1">.mw-parser-output .hatnote{font-style:italic}</style>',
        f'<div class="shortdescription nomobile noexcerpt noprint searchaux" style="display:none">{esc(article["title"])}</div>',
        '<table class="infobox"><tbody><tr><th>Name</th><td>'
        f"{esc(article['title'])} infobox cell text</td></tr></tbody></table>",
        '<p class="mw-empty-elt">\n</p>',
    ]
    for block in article["body"]:
        if isinstance(block, str):
            parts.append(f"<p>{esc(block)}\n</p>")
        else:
            items = "\n".join(f"<li>{esc(i)}</li>" for i in block)
            parts.append(f"<ul>{items}</ul>")
    parts.append("<!--\nNewPP limit report\n-->\n</div>")
    return "\n".join(parts)


class MediaWikiServer:
    def __init__(self, articles: list[dict] | None = None, zim_path: Path | None = None):
        self.articles = list(articles if articles is not None else SAMPLE_ARTICLES)
        self.pages: dict[str, dict] = {}
        self.ids: dict[int, str] = {}
        self.redirects: dict[str, str] = {}
        for i, a in enumerate(self.articles, 1):
            self.pages[a["title"]] = {"pageid": i, "article": a}
            self.ids[i] = a["title"]
        for a in self.articles:
            for r in a.get("redirects", []):
                if r not in self.pages:
                    self.redirects[mw_normalize(r)] = a["title"]
        self._tmp = None
        if zim_path is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="mwserver-")
            zim_path = build_zim(self.articles, Path(self._tmp.name) / "search.zim")
        self.archive = open_archive(zim_path)
        self.requests: list[Request] = []
        self.faults: list[Fault] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    # -- control ---------------------------------------------------------------------------
    def push_fault(self, *faults: Fault) -> None:
        with self._lock:
            self.faults.extend(faults)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.faults.clear()

    @property
    def api_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/w/api.php"

    def start(self) -> "MediaWikiServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # no 40 ms delayed-ACK stalls on keep-alive

            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                server._handle(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        self.archive = None
        if self._tmp:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- HTTP -----------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        url = urlsplit(h.path)
        params = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        gz = "gzip" in (h.headers.get("Accept-Encoding") or "")
        with self._lock:
            self.requests.append(Request(params, dict(h.headers.items()), gz))
            fault = self.faults.pop(0) if self.faults else None
        if url.path != "/w/api.php":
            return self._send(h, 404, b"not found", "text/plain", gz)
        if fault is not None:
            if fault.delay_s:
                time.sleep(fault.delay_s)
            if fault.status != 200:
                headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
                return self._send(h, fault.status, b"<html>error</html>", "text/html", gz, headers)
            if fault.body is not None:
                return self._send(h, 200, fault.body, "application/json", gz)
        data = self.api(params)
        self._send(h, 200, json.dumps(data, ensure_ascii=False).encode(), "application/json; charset=utf-8", gz)

    def _send(self, h, status, body: bytes, ctype: str, gz: bool, headers: dict | None = None) -> None:
        if gz:
            body = gzip.compress(body)
        try:
            h.send_response(status)
            h.send_header("Content-Type", ctype)
            if gz:
                h.send_header("Content-Encoding", "gzip")
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # client timed out and left
            pass

    # -- the API --------------------------------------------------------------------------
    def api(self, p: dict[str, str]) -> dict[str, Any]:
        action = p.get("action")
        if action == "query" and p.get("list") == "search":
            return self._search(p)
        if action == "query" and "titles" in p:
            return self._query(p)
        if action == "parse":
            return self._parse(p)
        return {"error": {"code": "badvalue", "info": f"Unrecognized request: {sorted(p)}"}}

    def _query(self, p: dict[str, str]) -> dict[str, Any]:
        raw = p["titles"]
        titles = raw[1:].split("\x1f") if raw.startswith("\x1f") else raw.split("|")
        normalized, redirects, pages, seen = [], [], [], set()
        for t in titles:
            if not t.strip() or _ILLEGAL.search(t):
                pages.append(
                    {
                        "title": t,
                        "invalidreason": "The requested page title contains invalid characters",
                        "invalid": True,
                    }
                )
                continue
            n = mw_normalize(t)
            if n != t:
                normalized.append({"fromencoded": False, "from": t, "to": n})
            if p.get("redirects") and n in self.redirects:
                redirects.append({"from": n, "to": self.redirects[n]})
                n = self.redirects[n]
            if n in seen:
                continue
            seen.add(n)
            page = self.pages.get(n)
            if page is None:
                pages.append({"ns": 0, "title": n, "missing": True})
                continue
            rec: dict[str, Any] = {"pageid": page["pageid"], "ns": 0, "title": n}
            if "pageprops" in p.get("prop", "") and page["article"].get("disambiguation"):
                rec["pageprops"] = {"disambiguation": ""}
            pages.append(rec)
        q: dict[str, Any] = {}
        if normalized:
            q["normalized"] = normalized
        if redirects:
            q["redirects"] = redirects
        q["pages"] = pages
        return {"batchcomplete": True, "query": q}

    def _parse(self, p: dict[str, str]) -> dict[str, Any]:
        title = None
        if "pageid" in p:
            title = self.ids.get(int(p["pageid"])) if p["pageid"].isdigit() else None
        elif "page" in p:
            title = mw_normalize(p["page"])
            if p.get("redirects"):
                title = self.redirects.get(title, title)
        if title is None or title not in self.pages:
            return {"error": {"code": "missingtitle", "info": "The page you specified doesn't exist."}}
        page = self.pages[title]
        return {"parse": {"title": title, "pageid": page["pageid"], "text": mw_html(page["article"])}}

    def _search(self, p: dict[str, str]) -> dict[str, Any]:
        q = p.get("srsearch", "")
        if len(q) > 300:
            return {
                "error": {
                    "code": "search-too-long",
                    "info": "Search request is longer than the maximum allowed length. (300)",
                }
            }
        limit = int(p.get("srlimit") or 10)
        titles = similar_titles(self.archive, q, limit) if q.strip() else []
        hits = [{"ns": 0, "title": t, "pageid": self.pages[t]["pageid"]} for t in titles if t in self.pages]
        return {"batchcomplete": True, "query": {"searchinfo": {"totalhits": len(hits)}, "search": hits}}


def serve_forever(articles: list[dict] | None = None) -> None:  # pragma: no cover - manual use
    with MediaWikiServer(articles) as s:
        print(s.api_url, flush=True)
        while True:
            time.sleep(3600)
