"""What people read for an id: one function for every page, admin list, legend and report."""

from typing import Any

WORDS = {"llm": "LLM", "ci": "CI", "api": "API", "id": "ID", "json": "JSON", "url": "URL"}
"""Words kept in capitals when an id becomes a label."""


def label(value: Any) -> str:
    """What people read for an id: a dimension or root cause (`explanation_quality` -> "Explanation
    quality", `missed_student_signal` -> "Missed student signal"), a persona or topic by its name
    (`simplicity_seeker` as an object -> "Sam"); one function for every page, admin list and legend."""
    if value is None or value == "":
        return "–"
    name = getattr(value, "name", None)
    if isinstance(name, str) and name.strip():
        # a record (persona, topic) is called by its name; anything else named (a rubric dimension) by its id's words
        return name.strip() if hasattr(value, "_meta") else label(name)
    words = [w for w in str(value).replace("-", "_").split("_") if w]
    if not words:
        return str(value)
    words = [WORDS.get(w.lower(), w) for w in words]
    first = words[0]
    words[0] = first if first.isupper() else first[:1].upper() + first[1:]
    return " ".join(words)
