"""Sample rows in the official HotpotQA and FEVER formats, shared by the dataset tests (not tests)."""

from __future__ import annotations

HOTPOT_OFFICIAL = [
    {
        "_id": "5a8b57f25542995d1e6f1371",
        "question": "Were Scott Derrickson and Ed Wood of the same nationality?",
        "answer": "yes",
        "type": "comparison",
        "level": "hard",
        "supporting_facts": [["Scott Derrickson", 0], ["Ed Wood", 0]],
        "context": [["Ed Wood", ["Edward Wood."]]],
    },
    {
        "_id": "5a8c7595554299585d9e36b6",
        "question": "What government position?",
        "answer": "Chief of Protocol",
        "type": "bridge",
        "level": "hard",
        "supporting_facts": [["Kiss and Tell (1945 film)", 0]],
        "context": [],
    },
]

FEVER_ROWS = [
    {
        "id": 91198,
        "verifiable": "NOT VERIFIABLE",
        "label": "NOT ENOUGH INFO",
        "claim": "Colin Kaepernick became a starting quarterback.",
        "evidence": [],
    },
    {
        "id": 194462,
        "verifiable": "VERIFIABLE",
        "label": "REFUTES",
        "claim": "Tilda Swinton is a vegan.",
        "evidence": [],
    },
]
