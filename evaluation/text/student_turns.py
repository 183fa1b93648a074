"""Student-turn measures: what one student turn looks like (length, question, answer, acknowledgement,
confusion, off-task, repeat, dialogue act), read by rules from the transcript alone.

The same rules measure simulated runs and imported real sessions, so the two can be set side by side
(tutoring.realism). Every rule is a word list or a pattern a reader can check; none needs a model.
The dialogue act is one of ACTS, decided in this order (the first that holds wins):
1. acknowledgement: the turn is only acknowledgement phrases ("ok", "yes", "got it", "thank you");
2. off_task: it names something outside the lesson (OFF_TASK_MARKERS: "bathroom", "gtg", "my dog");
3. answer_attempt: it holds mathematics (a digit, a number word, an operator sign);
4. confusion: it says the student does not know or understand (CONFUSION_MARKERS);
5. question: it asks something (a "?" or a question word first);
6. answer_attempt: the tutor's last message asked a question and the turn holds a content word;
7. other.

With an LLM (ActClassifier over the judge role, or any provider), the act is the model's instead: it reads the
tutor's last message and the turn and answers one of ACTS as JSON. The offline provider keeps the rules. Each
(tutor message, turn) is classified once per model and prompt version in a process (ACT_CACHE), so a card that
meets the same turn twice, or a second card over the same runs, does not pay for it again.
"""

import functools
import random
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from evaluation.providers import LLM, Message, ProviderError
from evaluation.text.measures import STOPWORDS, ngram_overlap, tokens

ACTS = ("answer_attempt", "question", "acknowledgement", "confusion", "off_task", "other")
"""The dialogue acts a student turn is given (after Scarlatos et al. 2026's student acts: math answer,
seek information, acknowledge, not understanding, off-topic; and "other")."""

_ACK_WORDS = """ok okay okey okk k kk yes yeah yea ya yep yup yess sure alright allright right cool fine thanks thx
ty mhm mm hmm oh ah great good nice awesome gotcha understood"""
_ACK_PHRASES = (
    "thank you",
    "thanks a lot",
    "got it",
    "i got it",
    "i see",
    "i understand",
    "i get it",
    "sounds good",
    "makes sense",
    "that makes sense",
    "all right",
    "yes please",
    "of course",
    "for sure",
)
ACKNOWLEDGEMENTS = tuple((w,) for w in _ACK_WORDS.split()) + tuple(tuple(p.split()) for p in _ACK_PHRASES)
"""Phrases (as word tokens) that acknowledge without adding anything; a turn made of them alone is acknowledgement-only."""
_ACK_SET = frozenset(ACKNOWLEDGEMENTS)
_ACK_LONGEST = max(len(p) for p in ACKNOWLEDGEMENTS)

CONFUSION_MARKERS = tuple(
    tuple(p.split())
    for p in (
        "don't know",
        "dont know",
        "do not know",
        "idk",
        "dunno",
        "no idea",
        "not sure",
        "confused",
        "confusing",
        "don't understand",
        "dont understand",
        "do not understand",
        "don't get",
        "dont get",
        "i'm lost",
        "im lost",
        "i am lost",
        "stuck",
        "what do you mean",
        "huh",
        "i forgot",
        "i forget",
    )
)
"""Phrases (as word tokens) by which a student says it does not know or understand."""

OFF_TASK_MARKERS = tuple(
    tuple(p.split())
    for p in (
        "bathroom",
        "brb",
        "gtg",
        "g2g",
        "got to go",
        "gotta go",
        "have to go",
        "need to go",
        "bye",
        "goodbye",
        "lunch",
        "dinner",
        "minecraft",
        "fortnite",
        "roblox",
        "video game",
        "my dog",
        "my cat",
        "football",
        "soccer",
        "youtube",
        "tiktok",
        "my mom",
        "my mum",
        "my dad",
        "did you know",
    )
)
"""Phrases (as word tokens) that name something outside the lesson or leaving it."""

NUMBER_WORDS = frozenset(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen
    seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million
    half halves third thirds quarter quarters fourth fourths fifths sixths eighths tenths hundredths""".split()
)
_MATH_SIGN = re.compile(r"\d|[+\u00d7\u00f7=<>%^*]")
QUESTION_WORDS = frozenset(
    "what why how when where which who whose can could do does did is are will would should may".split()
)
REPEAT_OVERLAP = 0.5
"""A turn repeats an earlier one of the same student when it has the same words, or when at least this share
of its word 3-grams occur in it."""

AnswerCheck = Callable[[str, str], bool | None]
"""(the tutor's last message, the student's turn) -> whether the answer is right; None when the problem is not
known. The tutoring room passes one that solves its own exercises."""


@dataclass(frozen=True)
class TurnMeasures:
    """What one student turn looks like."""

    words: int
    """Whitespace-separated words, as word_count counts them."""
    characters: int
    """Characters of the turn, surrounding space left out."""
    asks_question: bool
    """Holds a "?" or begins with a question word."""
    answer_attempt: bool
    """Its act is answer_attempt."""
    correct: bool | None
    """For an answer attempt to a problem the checker knows: whether it is right; else None."""
    acknowledgement_only: bool
    confusion: bool
    """Says the student does not know or understand (a CONFUSION_MARKERS phrase)."""
    off_task: bool
    """Names something outside the lesson (an OFF_TASK_MARKERS phrase)."""
    repeat: bool
    """Repeats an earlier turn of the same student in the same dialogue."""
    act: str
    """One of ACTS."""


@dataclass(frozen=True)
class DialogueMeasures:
    """A dialogue's student turns, measured, and the student's lexical diversity over the dialogue."""

    dialogue: str
    """The dialogue's id (a run id, or source:external id)."""
    turns: tuple[TurnMeasures, ...]
    type_token_ratio: float | None
    """Distinct word tokens over all word tokens of the student's turns; None without any."""


@functools.cache
def _by_length(phrases: tuple[tuple[str, ...], ...]) -> tuple[tuple[int, frozenset[tuple[str, ...]]], ...]:
    return tuple((n, frozenset(p for p in phrases if len(p) == n)) for n in sorted({len(p) for p in phrases}))


def _has_phrase(words: Sequence[str], phrases: tuple[tuple[str, ...], ...]) -> bool:
    """Does any of the phrases occur in the words (as consecutive tokens)?"""
    return any(
        tuple(words[i : i + n]) in wanted for n, wanted in _by_length(phrases) for i in range(len(words) - n + 1)
    )


def acknowledgement_only(words: Sequence[str]) -> bool:
    """Is the turn made only of acknowledgement phrases (longest phrase first)?"""
    i = 0
    while i < len(words):
        for n in range(min(_ACK_LONGEST, len(words) - i), 0, -1):
            if tuple(words[i : i + n]) in _ACK_SET:
                i += n
                break
        else:
            return False
    return bool(words)


def _words(text: str) -> list[str]:
    return tokens(text.replace("\u2019", "'"))


def has_mathematics(text: str, words: Sequence[str]) -> bool:
    return bool(_MATH_SIGN.search(text)) or not NUMBER_WORDS.isdisjoint(words)


def asks_question(text: str, words: Sequence[str]) -> bool:
    return "?" in text or (bool(words) and words[0] in QUESTION_WORDS)


def dialogue_act(text: str, *, tutor_asked: bool = False) -> str:
    """The turn's act by the rules in this module's docstring."""
    words = _words(text)
    if acknowledgement_only(words):
        return "acknowledgement"
    if _has_phrase(words, OFF_TASK_MARKERS):
        return "off_task"
    if has_mathematics(text, words):
        return "answer_attempt"
    if _has_phrase(words, CONFUSION_MARKERS) or words == ["what"]:
        return "confusion"
    if asks_question(text, words):
        return "question"
    if tutor_asked and any(w not in STOPWORDS for w in words):
        return "answer_attempt"
    return "other"


ACT_PROMPT_VERSION = "1"
"""Bump when ACT_PROMPT or act_messages changes what the model reads: it is part of every cached answer's key."""
ACT_PROMPT = """You label one student turn of a tutoring chat with its dialogue act. Answer with exactly one of:
- answer_attempt: the student tries to answer or work on the problem (a number, an expression, a step, a guess,
  "is it 12?" counts too);
- question: the student asks the tutor something that is not an attempt to answer;
- acknowledgement: only acknowledges ("ok", "yes", "got it", "thanks") and adds nothing;
- confusion: says it does not know or understand ("idk", "I'm lost", "what do you mean");
- off_task: about something outside the lesson, or leaving it ("brb", "my dog", "gtg");
- other: none of these.
Judge the student's turn only; the tutor's message is context."""
ACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"act": {"enum": list(ACTS)}},
    "required": ["act"],
    "additionalProperties": False,
}
TUTOR_CONTEXT_CHARS = 600
"""The end of the tutor's last message the model reads (and the cache keys on)."""
ACT_CACHE: dict[tuple[str, str, str, str], str] = {}
"""(model label, prompt version, tutor context, turn) -> act, for every model this process asked."""
ACT_CACHE_KEPT = 200_000
_ACT_LOCK = threading.Lock()


def act_messages(tutor_message: str, text: str) -> list[Message]:
    """What the model reads to label one turn."""
    context = tutor_message[-TUTOR_CONTEXT_CHARS:] or "(none: the student speaks first)"
    return [
        Message("system", ACT_PROMPT),
        Message("user", f"Tutor's last message:\n{context}\n\nStudent's turn:\n{text}"),
    ]


@dataclass(frozen=True)
class ActRule:
    """The offline provider's answer to an act call: the rules of this module."""

    tutor_message: str
    text: str

    def __call__(self, request: Any, rng: random.Random) -> dict[str, Any]:
        return {"act": dialogue_act(self.text, tutor_asked="?" in self.tutor_message)}


class ActClassifier:
    """Gives each student turn its dialogue act: by the rules (no LLM, or the offline provider) or by an LLM, each
    (tutor message, turn) asked once per model and prompt version (ACT_CACHE). A call that fails leaves the turn to
    the rules, and is counted."""

    def __init__(self, llm: LLM | None = None, *, workers: int = 4):
        self.llm = None if llm is None or llm.is_offline else llm
        self.workers = max(1, workers)
        self.calls = 0
        """Calls this classifier made (answers taken from the cache are not calls)."""
        self.failed = 0
        """Calls that failed, whose turns the rules labelled."""

    @property
    def label(self) -> str:
        """ "rules", or "llm:provider/model"."""
        return "rules" if self.llm is None else f"llm:{self.llm.label}"

    def _key(self, tutor_message: str, text: str) -> tuple[str, str, str, str]:
        assert self.llm is not None
        return (self.llm.label, ACT_PROMPT_VERSION, tutor_message[-TUTOR_CONTEXT_CHARS:], text)

    def _ask(self, tutor_message: str, text: str) -> str:
        assert self.llm is not None
        try:
            result = self.llm.call(
                act_messages(tutor_message, text), schema=ACT_SCHEMA, offline=ActRule(tutor_message, text)
            )
            act = str(result.data["act"])
            if act not in ACTS:
                raise ProviderError(f"{act!r} is not an act")
        except (ProviderError, KeyError, TypeError):
            with _ACT_LOCK:
                self.calls += 1
                self.failed += 1
            return dialogue_act(text, tutor_asked="?" in tutor_message)
        with _ACT_LOCK:
            self.calls += 1
            if len(ACT_CACHE) >= ACT_CACHE_KEPT:
                ACT_CACHE.clear()
            ACT_CACHE[self._key(tutor_message, text)] = act
        return act

    def prepare(self, turns: Iterable[tuple[str, str]]) -> None:
        """Classify (tutor message, turn) pairs not yet cached, `workers` calls at a time."""
        if self.llm is None:
            return
        missing = list(dict.fromkeys(t for t in turns if self._key(*t) not in ACT_CACHE))
        if not missing:
            return
        with ThreadPoolExecutor(max_workers=min(self.workers, len(missing))) as pool:
            list(pool.map(lambda t: self._ask(*t), missing))

    def __call__(self, tutor_message: str, text: str) -> str:
        if self.llm is None:
            return dialogue_act(text, tutor_asked="?" in tutor_message)
        found = ACT_CACHE.get(self._key(tutor_message, text))
        return found if found is not None else self._ask(tutor_message, text)


def student_turns(messages: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """(the tutor's last message, the student's turn) for each student turn of a dialogue."""
    out = []
    last_tutor = ""
    for role, text in messages:
        if role == "tutor":
            last_tutor = text
        elif role == "student":
            out.append((last_tutor, text))
    return out


def _repeats(words: list[str], text: str, earlier: list[tuple[list[str], str]]) -> bool:
    if not words:
        return False
    return any(words == w or ngram_overlap(text, t) >= REPEAT_OVERLAP for w, t in earlier)


def measure_dialogue(
    messages: Sequence[tuple[str, str]],
    *,
    dialogue: str = "",
    check: AnswerCheck | None = None,
    acts: Callable[[str, str], str] | None = None,
) -> DialogueMeasures:
    """Measure every student turn of a dialogue given as (role, text) pairs, roles as stored ("tutor",
    "student"; others are context and skipped). `acts(tutor's last message, turn)` gives the act (an
    ActClassifier); by default the rules."""
    last_tutor = ""
    earlier: list[tuple[list[str], str]] = []
    turns = []
    all_words: list[str] = []
    for role, text in messages:
        if role == "tutor":
            last_tutor = text
            continue
        if role != "student":
            continue
        words = _words(text)
        act = acts(last_tutor, text) if acts is not None else dialogue_act(text, tutor_asked="?" in last_tutor)
        correct = check(last_tutor, text) if check is not None and act == "answer_attempt" else None
        turns.append(
            TurnMeasures(
                words=len(text.split()),
                characters=len(text.strip()),
                asks_question=asks_question(text, words),
                answer_attempt=act == "answer_attempt",
                correct=correct,
                acknowledgement_only=acknowledgement_only(words),
                confusion=_has_phrase(words, CONFUSION_MARKERS) or words == ["what"],
                off_task=_has_phrase(words, OFF_TASK_MARKERS),
                repeat=_repeats(words, text, earlier),
                act=act,
            )
        )
        earlier.append((words, text))
        all_words += words
    ratio = round(len(set(all_words)) / len(all_words), 6) if all_words else None
    return DialogueMeasures(dialogue, tuple(turns), ratio)
