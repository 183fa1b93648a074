"""The reference tutor's sessions: create one, advance it by a student message, read it back."""

import json
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from evaluation.conf import setting
from evaluation.errors import FieldProblem, InvalidInput
from evaluation.models import Topic, TutoringSession, statements
from evaluation.providers import LLM, get_llm
from evaluation.tutoring import tutor
from evaluation.tutoring.topics import topic_as_dict

log = logging.getLogger(__name__)


class SessionComplete(Exception):
    """The session has ended; no more student messages are taken."""


def session_create(
    *, topic_id: str, user: str = "eval-student", seed: int | None = None, faults: list[str] | None = None
) -> TutoringSession:
    """A new session; a seed (a simulated run's) makes its exercises and tutor calls replay exactly; faults
    (tutor.FAULTS: the degraded tutor's) make the tutor show them."""
    unknown = sorted(set(faults or ()) - set(tutor.FAULTS))
    if unknown:
        raise InvalidInput([FieldProblem("faults", f"unknown {', '.join(unknown)} (known: {', '.join(tutor.FAULTS)})")])
    try:
        topic = Topic.objects.get(topic_id=topic_id)
    except Topic.DoesNotExist:
        raise InvalidInput([FieldProblem("topic_id", f"no topic {topic_id!r}")]) from None
    session = TutoringSession(topic=topic, user=user or "eval-student")
    session.state = tutor.initial_state(
        topic_as_dict(topic), str(session.id), setting("TUTOR_PROBLEMS"), seed=seed, faults=faults or ()
    )
    session.save()
    return session


def _append(session: TutoringSession, role: str, content: str) -> dict[str, Any]:
    entry = {
        "role": role,
        "content": content,
        "turn": len(session.full_conversation_log) + 1,
        "timestamp": timezone.now().isoformat(),
    }
    session.full_conversation_log.append(entry)
    session.conversation_history.append({"role": "teacher" if role == "tutor" else role, "content": content})
    return entry


def session_open(session_id: str, read: TutoringSession | None = None) -> "TurnDone | None":
    """The tutor's opening message, written once; None when the session already has one.

    `read` is the session as the caller just read it (the socket, to send its state), so it is not
    read again. The LLM answers outside any transaction (no lock or connection held for seconds);
    the opening is then written only if nobody wrote the session since it was read, else only if
    its log is still empty, so two sockets opening one session store one opening.
    """
    session = _held_or_read(session_id, read)
    if session.full_conversation_log:
        return None
    llm = _tutor_llm(str(session_id))
    _hand_back_connection()
    state = session.state
    reply, _ = tutor.tutor_turn(state, [], None, llm)
    entry = _append(session, "tutor", reply)
    if not _write(session, (*_LOGS, "state"), if_unchanged=True):
        with transaction.atomic():
            session = TutoringSession.objects.select_for_update().select_related("topic").get(pk=session_id)
            if session.full_conversation_log:
                return None
            session.state = state
            entry = _append(session, "tutor", reply)
            _write(session, (*_LOGS, "state"), if_unchanged=False)
    return TurnDone(entry, False, session_public_state(session), session)


def _hand_back_connection() -> None:
    """Before a tutor's LLM call (seconds): give the connection back to the pool on PostgreSQL rather
    than hold it across the call. A SQLite connection is a file handle and stays."""
    if connection.vendor != "sqlite" and not connection.in_atomic_block:
        connection.close()


_TUTOR_LLMS: OrderedDict[str, LLM] = OrderedDict()
_TUTOR_LLMS_LOCK = threading.Lock()
_TUTOR_LLMS_KEPT = 1024


def _tutor_llm(session_id: str) -> LLM:
    """The tutor's LLM, resolved once per session in this process (not a config lookup every turn):
    a session keeps the tutor it started with; a new session picks up a changed config."""
    with _TUTOR_LLMS_LOCK:
        llm = _TUTOR_LLMS.get(session_id)
        if llm is not None:
            _TUTOR_LLMS.move_to_end(session_id)
            return llm
    llm = get_llm("tutor")
    with _TUTOR_LLMS_LOCK:
        _TUTOR_LLMS[session_id] = llm
        while len(_TUTOR_LLMS) > _TUTOR_LLMS_KEPT:
            _TUTOR_LLMS.popitem(last=False)
    return llm


@dataclass(frozen=True)
class TurnDone:
    """A student message answered: the tutor's entry, whether the session ended, its public state, and
    the session as stored, which the socket hands to its next turn so that turn reads nothing."""

    entry: dict[str, Any]
    is_complete: bool
    state: dict[str, Any]
    session: TutoringSession


_LOGS = ("full_conversation_log", "conversation_history")
_TURN = (*_LOGS, "state", "is_complete")
"""What a turn writes: both logs, the tutor's state and whether the session ended."""


def _encoded_log(session: TutoringSession, name: str) -> statements.EncodedJSON:
    """A log as JSON text, encoding only the entries added since this copy of the session last wrote it.

    A turn writes both logs twice, and encoding them whole made each turn's writes grow with the
    session's length. The logs are append-only (`_append` is their one writer), so the text written
    last time stays a prefix; the cache is kept for this list object only, so a log read or assigned
    anew is encoded whole. The text is what `json.dumps(log)` gives, as the field's own encoder does.
    """
    log = getattr(session, name)
    cache: dict[str, tuple[list[Any], int, str]] = session.__dict__.setdefault("_encoded_logs", {})
    owner, count, text = cache.get(name, (log, 0, "[]"))
    if owner is not log or count > len(log):
        count, text = 0, "[]"
    if count < len(log):
        added = ", ".join(json.dumps(entry) for entry in log[count:])
        text = f"[{added}]" if count == 0 else f"{text[:-1]}, {added}]"
    cache[name] = (log, len(log), text)
    return statements.EncodedJSON(text)


def _read(session_id: str) -> TutoringSession:
    session = session_lookup(session_id)
    if session is None:
        raise TutoringSession.DoesNotExist(f"no session {session_id}")
    return session


def _write(session: TutoringSession, fields: tuple[str, ...], *, if_unchanged: bool) -> bool:
    """Save these fields; with if_unchanged only if nobody saved the session since this copy was read
    or written (its updated_at still matches): the check a turn makes instead of reading it again."""
    now = timezone.now()
    where = {"pk": session.pk, "updated_at": session.updated_at} if if_unchanged else {"pk": session.pk}
    values = {name: _encoded_log(session, name) if name in _LOGS else getattr(session, name) for name in fields}
    if not statements.update(TutoringSession, where, updated_at=now, **values):
        return False
    session.updated_at = now
    return True


def session_advance(session_id: str, student_text: str, held: TutoringSession | None = None) -> TurnDone:
    """Answer a student message and store it with the tutor's reply, in one write.

    `held` is the session as the previous turn on this socket left it: the turn then reads nothing,
    and the write checks that nobody wrote the session since (another socket on it). If somebody
    did, the held copy was out of date when the tutor answered from it: the session is read again
    and the tutor answers anew from what is stored (a second LLM call, only then). A tutor that fails
    stores the student's message on its own, so a tutor failure never loses it.
    """
    session = _held_or_read(session_id, held)
    turn = _answer(session_id, session, student_text)
    if turn is None and session is held:  # the held copy was out of date
        session = _read(session_id)
        turn = _answer(session_id, session, student_text)
    if turn is None:
        # Another socket stored messages while the tutor was answering: add these after them.
        state, complete, reply = session.state, session.is_complete, session.full_conversation_log[-1]["content"]
        session = _read(session_id)
        session.state = state
        session.is_complete = session.is_complete or complete
        _append(session, "student", student_text)
        turn = _append(session, "tutor", reply)
        _write(session, _TURN, if_unchanged=False)
    return TurnDone(turn, session.is_complete, session_public_state(session), session)


def _answer(session_id: str, session: TutoringSession, student_text: str) -> dict[str, Any] | None:
    """The tutor's reply to the student on this copy of the session, stored with the student's message
    if nobody wrote the session since the copy was read or written; None (the copy holding both) if
    somebody did."""
    if session.is_complete:
        raise SessionComplete("this session is complete")
    _append(session, "student", student_text)
    llm = _tutor_llm(str(session_id))
    _hand_back_connection()
    try:
        reply, complete = tutor.tutor_turn(session.state, list(session.full_conversation_log), student_text, llm)
    except BaseException:
        _keep_student_message(session_id, session, student_text)
        raise
    entry = _append(session, "tutor", reply)
    session.is_complete = complete
    return entry if _write(session, _TURN, if_unchanged=True) else None


def _keep_student_message(session_id: str, session: TutoringSession, student_text: str) -> None:
    """The tutor failed: store what the student said all the same (after any messages stored since
    this copy was read). A failure here is logged; the tutor's error is the one the caller hears."""
    try:
        if not _write(session, _LOGS, if_unchanged=True):
            session = _read(session_id)
            _append(session, "student", student_text)
            _write(session, _LOGS, if_unchanged=False)
    except Exception:
        log.warning("session %s: the student's message was not stored after a tutor failure", session_id, exc_info=True)


def _held_or_read(session_id: str, held: TutoringSession | None) -> TutoringSession:
    """The copy the caller holds when it is this session's, else the session as stored."""
    return held if held is not None and str(held.pk) == str(session_id) else _read(session_id)


def session_lookup(session_id: Any) -> TutoringSession | None:
    return statements.get(TutoringSession, session_id, related=("topic",))


def session_public_state(session: TutoringSession) -> dict[str, Any]:
    state = session.state or {}
    problems = state.get("problems") or []
    return {
        "session_id": str(session.id),
        "topic_id": session.topic.topic_id,
        "user": session.user,
        "is_complete": session.is_complete,
        "problem_index": state.get("index", 0),
        "problem_count": len(problems),
        "turn": state.get("turn", 0),
        "message_count": len(session.full_conversation_log),
        "tutor": state.get("tutor"),
    }
