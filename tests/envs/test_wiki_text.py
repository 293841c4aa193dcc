"""Pure text functions: page text, sentence split, observations, titles (text.py)."""

from envs.wikipedia import text


def test_blocks_are_paragraphs_then_lists_like_the_original():
    html = (
        "<html><body><p>First para here.</p><ul><li>list item one</li><li>list item two</li></ul>"
        "<p>Second para here.</p><script>var x = 'no';</script></body></html>"
    )
    assert text.html_blocks(html) == ["First para here.", "Second para here.", "list item one\nlist item two"]


def test_page_text_keeps_blocks_of_more_than_two_words():
    assert text.page_text(["Two words", "Three words here", "a\nb"]) == "Three words here\n"


def test_sentences_split_on_dot_space_and_append_dot():
    page = "A is B. C is D.\nE is F\n"
    assert text.sentences(page) == ["A is B.", "C is D..", "E is F."]


def test_page_observation_is_first_five_sentences():
    page = "S1. S2. S3.\nS4. S5. S6. S7."
    assert text.page_observation(page) == "S1. S2. S3.. S4. S5."


def test_lookup_list_is_case_insensitive():
    sents = ["The Eastern sector.", "West.", "eastern again."]
    assert text.lookup_list(sents, "EASTERN") == ["The Eastern sector.", "eastern again."]


def test_disambiguation_detection():
    assert text.is_disambiguation(["High Plains may refer to:", "x"])
    assert not text.is_disambiguation(["High Plains refers to one of two regions:"])


def test_title_variants_follow_mediawiki_near_match():
    assert text.title_variants("colorado orogeny") == ["Colorado orogeny", "Colorado Orogeny", "COLORADO OROGENY"]
    assert text.title_variants("  High_plains  ") == ["High plains", "High Plains", "HIGH PLAINS"]
    assert text.title_variants("東京タワー") == ["東京タワー"]


def test_title_variants_reject_impossible_titles():
    for bad in ("", "   ", "Foo#bar", "a|b", "x[y]", "{{t}}", "x" * 300):
        assert text.title_variants(bad) == []


def test_miss_observation_formats_and_truncates():
    assert text.miss_observation("X", ["A", "B's"]) == "Could not find X. Similar: ['A', \"B's\"]."
    assert (
        text.miss_observation("X", list("abcdefg"), disambiguation=True)
        == "Could not find [X]. Similar: ['a', 'b', 'c', 'd', 'e']."
    )
    long = text.miss_observation("y" * 10_000, [])
    assert len(long) < 400 and long.startswith("Could not find yyy") and "..." in long


def test_clean_observation_drops_literal_backslash_n_only():
    assert text.clean_observation("a\\nb\nc") == "ab\nc"


def test_broken_html_gives_no_blocks():
    assert text.html_blocks(b"") == []
    assert text.html_blocks("   ") == []
    assert text.html_blocks(b"\xff\xfe<p>still three words</p>") == ["still three words"]


def test_zim_titles_may_hold_mediawiki_illegal_characters():
    assert text.title_variants("c# quartet", mediawiki=False)[0] == "C# quartet"
    assert text.title_variants("x" * 300, mediawiki=False) == []
