"""`react-editor wiki ...` debugging commands."""

from __future__ import annotations

import json

import pytest

from envs.wikipedia.zim import build_zim
from react_editor.main import main
from tests.mediawiki_server import SAMPLE_ARTICLES, MediaWikiServer


@pytest.fixture(scope="module")
def zim(tmp_path_factory):
    return build_zim(SAMPLE_ARTICLES, tmp_path_factory.mktemp("z") / "react_editor.zim")


def test_search_with_lookups_json(zim, capsys):
    rc = main(["wiki", "search", "Colorado orogeny", "--lookup", "eastern sector", "--wiki", f"zim:{zim}", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert rows[0]["observation"].startswith("The Colorado orogeny")
    assert rows[1]["observation"].startswith("(Result 1 / 3)")


def test_step_text_output_and_live_backend(capsys):
    with MediaWikiServer(SAMPLE_ARTICLES) as server:
        rc = main(["wiki", "step", "Search[High Plains]", "finish[x]", "--wiki", "live", "--wiki-url", server.api_url])
    out = capsys.readouterr().out
    assert rc == 0
    assert "> Search[High Plains]\nCould not find [High Plains]." in out and "Episode finished" in out


def test_missing_zim_is_one_line_error(tmp_path, capsys):
    rc = main(["wiki", "search", "x", "--wiki", f"zim:{tmp_path / 'gone.zim'}"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ZIM file not found") and "gone.zim" in err and err.count("\n") == 1


def test_live_failure_exit_code(capsys):
    with MediaWikiServer(SAMPLE_ARTICLES) as server:
        from tests.mediawiki_server import Fault

        server.push_fault(*[Fault(status=500, retry_after=0)] * 3)
        rc = main(["wiki", "search", "Colorado orogeny", "--wiki", "live", "--wiki-url", server.api_url, "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert rc == 1 and rows[0]["observation"].startswith("Search failed: HTTP 500")


def test_prompts_check_detects_stale_files(tmp_path, monkeypatch, capsys):
    from envs.wikipedia import exemplars

    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    files = {"hotpotqa": tmp_path / "prompts.json", "fever": tmp_path / "fever_prompts.json"}
    monkeypatch.setattr(exemplars, "PROMPTS_FILES", files)
    import envs.wikipedia.builtin as builtin
    from tests.mediawiki_server import write_corpus

    monkeypatch.setattr(builtin, "CORPUS_DIR", write_corpus(tmp_path / "corpus"))
    assert main(["wiki", "prompts", "--check"]) == 2
    assert "stale" in capsys.readouterr().err
    assert main(["wiki", "prompts", "--write"]) == 0
    assert main(["wiki", "prompts", "--check"]) == 0
    files["fever"].write_text(files["fever"].read_text().replace("SUPPORTS", "REFUTES", 1))
    assert main(["wiki", "prompts", "--check"]) == 2
