"""HotpotQA EM/F1 (official semantics) and FEVER accuracy (scoring.py)."""

import pytest

from envs.wikipedia.scoring import exact_match, f1, f1_parts, fever_correct, normalize_answer


def test_normalize_answer():
    assert normalize_answer("The  Saimaa Gesture!") == "saimaa gesture"
    assert normalize_answer("An apple, a day") == "apple day"
    assert normalize_answer("1,800 to 7,000 ft") == "1800 to 7000 ft"


def test_exact_match():
    assert exact_match("the Saimaa gesture", "The Saimaa Gesture")
    assert not exact_match("Saimaa", "The Saimaa Gesture")


def test_f1_partial_and_disjoint():
    assert f1("Richard Nixon", "Richard Milhous Nixon") == pytest.approx(0.8)
    assert f1_parts("Richard Nixon", "Richard Milhous Nixon")[1:] == (1.0, pytest.approx(2 / 3))
    assert f1("apple", "banana") == 0.0
    assert f1("", "banana") == 0.0


def test_f1_yes_no_must_match_exactly():
    assert f1("yes", "yes") == 1.0
    assert f1("yes it is", "yes") == 0.0
    assert f1("no", "no way") == 0.0


def test_fever_correct():
    assert fever_correct("supports", "SUPPORTS")
    assert fever_correct("NOT ENOUGH INFO.", "NOT ENOUGH INFO")
    assert not fever_correct("REFUTES", "SUPPORTS")
    assert not fever_correct("", "SUPPORTS")
