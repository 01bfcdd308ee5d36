"""A small JSONL corpus of intent-labelled dialogues, the input of the data-prep stages, shared by
their tests and the bad-input checks of their entry points."""

import json

INTENTS = {
    "order_status": ["where is my order", "my order has not arrived", "track my package please"],
    "refund": ["i want a refund", "give me my money back", "refund my order please"],
    "address": ["change my address", "ship to a new address", "my address is wrong"],
}


def write_corpus(path, dialogues=12):
    """Writes `dialogues` five-turn user/agent dialogues, user turns labelled, to `path`; returns it."""
    lines = []
    names = sorted(INTENTS)
    for i in range(dialogues):
        intent = names[i % 3]
        turns = []
        for j in range(5):
            user = INTENTS[intent][(i + j) % 3]
            turns.append({"speaker": "user" if j % 2 == 0 else "agent",
                          "text": user if j % 2 == 0 else f"let me check that {j}", "intent": intent if j % 2 == 0 else None})
        lines.append(json.dumps({"dialogue_id": f"d{i}", "turns": turns}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)
