"""Realism reads: the sets a realism card compares (a persona's simulated runs by simulator model, a batch,
an imported transcript set, a shipped reference table), and their cards."""

import asyncio
import hashlib
import json
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from django.db.models import Max

from evaluation.conf import setting
from evaluation.errors import FieldProblem, InvalidInput, NotFound
from evaluation.models import EvaluationRun, Persona, RunMessage, Transcript
from evaluation.models.runs import RunKind, RunSource, RunStatus
from evaluation.providers import get_llm, resolve
from evaluation.providers.forecast import Forecast, forecast
from evaluation.text.student_turns import ActClassifier, student_turns
from evaluation.tutoring.next_turn import NextTurnReport, next_turn_plan, next_turns
from evaluation.tutoring.realism import (
    MIN_DIALOGUES,
    Card,
    Corpus,
    TableDialogue,
    bridge_error,
    builtin_corpus,
    grounding_fit,
    is_builtin,
    measure_messages,
    message_pairs,
    realism_card,
    table_text,
)
from evaluation.tutoring.simulator import StudentSimulator
from evaluation.tutoring.values import Grounding, PersonaSpec, TopicSpec

MAX_RUNS = 500
"""A persona's newest runs a card reads, per simulator model."""
MAX_TRANSCRIPTS = 20000
"""An imported set's transcripts a card reads at most."""
DEFAULT_REFERENCE = "bridge"
ACTS_CHOICES = ("rules", "judge")
"""How a card's acts are given: by the rules, or by the judge role's LLM (the rules when it is offline); the
command also takes a provider spec."""


def act_classifier(acts: str = "rules") -> ActClassifier:
    """The classifier `acts` names: "rules", "judge" (the judge role's LLM), or a provider spec for that role."""
    if acts == "rules":
        return ActClassifier()
    return ActClassifier(get_llm("judge", override=None if acts == "judge" else acts))


def _measured(
    name: str, conversations: list[tuple[str, list[tuple[str, str]]]], classifier: ActClassifier | None, about: str
) -> Corpus:
    """A set of (dialogue id, [(role, text)]) conversations measured, the acts by `classifier` (asked for every
    turn not yet cached first, several at a time)."""
    if classifier is not None:
        classifier.prepare(t for _, pairs in conversations for t in student_turns(pairs))
    dialogues = tuple(measure_messages(pairs, dialogue, classifier) for dialogue, pairs in conversations)
    return Corpus(name, dialogues, about, classifier.label if classifier is not None else "rules")


def simulator_label(config: dict[str, Any]) -> str:
    """provider/model of the run's simulator role, as its configuration recorded it."""
    record = (config.get("llm") or {}).get("simulator") or {}
    if not isinstance(record, dict) or not record.get("provider"):
        return "unknown simulator"
    return f"{record['provider']}/{record.get('model') or ''}".rstrip("/")


def _messages_by_run(runs: list[EvaluationRun]) -> dict[Any, list[tuple[str, str]]]:
    """Each run's newest attempt's messages, as (role, text), in two queries."""
    newest = dict(
        RunMessage.objects.filter(run__in=runs).values("run").annotate(n=Max("attempt")).values_list("run", "n")
    )
    out: dict[Any, list[tuple[str, str]]] = defaultdict(list)
    rows = RunMessage.objects.filter(run__in=runs).order_by("run", "attempt", "turn", "id")
    for run_id, attempt, role, content in rows.values_list("run", "attempt", "role", "content"):
        if attempt == newest.get(run_id):
            out[run_id].append((role, content))
    return out


def persona_corpora(
    persona: str = "all", *, group: str = "", acts: ActClassifier | None = None, simulator: str = ""
) -> list[Corpus]:
    """One set per persona and simulator model: the completed simulated tutor runs (of one batch with `group`),
    the newest MAX_RUNS of each (only those of the `simulator` model, provider/model, when given)."""
    runs = EvaluationRun.objects.filter(
        kind=RunKind.TUTOR, source=RunSource.SIMULATED, status=RunStatus.COMPLETED, persona__isnull=False
    ).select_related("persona")
    if persona != "all":
        if not Persona.objects.filter(persona_id=persona).exists():
            known = ", ".join(Persona.objects.order_by("persona_id").values_list("persona_id", flat=True))
            raise NotFound(f"persona: no persona {persona!r} (known: {known or 'none'}; or 'all')")
        runs = runs.filter(persona__persona_id=persona)
    if group:
        runs = runs.filter(group=group)
        if not runs.exists():
            raise NotFound(f"group: no completed simulated runs in group {group!r}")
    sets: dict[tuple[str, str], list[EvaluationRun]] = defaultdict(list)
    for run in runs.order_by("-created_at")[: MAX_RUNS * 50]:
        assert run.persona is not None  # filtered above
        key = (run.persona.persona_id, simulator_label(run.config or {}))
        if simulator and key[1] != simulator:
            continue
        if len(sets[key]) < MAX_RUNS:
            sets[key].append(run)
    corpora = []
    for (persona_id, label), chosen in sorted(sets.items()):
        messages = _messages_by_run(chosen)
        corpora.append(
            _measured(
                f"{persona_id} ({label})",
                [(r.run_id, messages.get(r.pk, [])) for r in chosen],
                acts,
                f"{len(chosen)} completed simulated run(s)" + (f" of {group}" if group else ""),
            )
        )
    return corpora


def imported_corpus(source: str, acts: ActClassifier | None = None) -> Corpus:
    """An imported transcript set, by the source name given at import."""
    rows = Transcript.objects.filter(source=source).order_by("external_id")
    if not rows.exists():
        known = ", ".join(Transcript.objects.order_by("source").values_list("source", flat=True).distinct()[:20])
        raise NotFound(f"no imported transcripts of source {source!r} (imported sources: {known or 'none'})")
    conversations = [
        (f"{source}:{external_id}", message_pairs(messages))
        for external_id, messages in rows.values_list("external_id", "messages")[:MAX_TRANSCRIPTS]
    ]
    return _measured(source, conversations, acts, f"imported transcripts of source {source!r}")


def corpus(name: str, acts: ActClassifier | None = None) -> Corpus:
    """A shipped table (`bridge`, `bridge:test`, ...) or, failing that, an imported set; `imported:NAME` reads the
    imported set even where a shipped table has its name. A shipped table holds no text, so its acts are always
    the rules'; an imported set's are `acts`'s."""
    if name.startswith("imported:"):
        return imported_corpus(name.removeprefix("imported:"), acts)
    if is_builtin(name):
        try:
            return builtin_corpus(name)
        except LookupError as exc:
            raise InvalidInput([FieldProblem("reference", str(exc.args[0]))]) from None
    return imported_corpus(name, acts)


@dataclass(frozen=True)
class Cards:
    reference: str
    cards: tuple[Card, ...]
    acts_by: str = "rules"
    """What was asked to give the acts ("rules" or "llm:provider/model")."""
    act_calls: int = 0
    """LLM calls made for the acts (turns already in the cache cost none)."""
    act_failures: int = 0
    """Of act_calls, those that failed (their turns by the rules)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "acts_by": self.acts_by,
            "act_calls": self.act_calls,
            "act_failures": self.act_failures,
            "sets": [c.as_dict() for c in self.cards],
        }


def realism_cards(
    *,
    reference: str = DEFAULT_REFERENCE,
    persona: str = "",
    transcripts: str = "",
    group: str = "",
    acts: str | ActClassifier = "rules",
) -> Cards:
    """Cards of the sets asked for (an imported set with `transcripts`, by its source name even where a shipped
    table has that name, else the persona sets) against `reference`,
    the acts by `acts` (ACTS_CHOICES, a provider spec, or a classifier)."""
    classifier = acts if isinstance(acts, ActClassifier) else act_classifier(acts)
    ref = corpus(reference, classifier)
    sets = (
        [imported_corpus(transcripts.removeprefix("imported:"), classifier)]
        if transcripts
        else persona_corpora(persona or "all", group=group, acts=classifier)
    )
    cards = tuple(realism_card(s, ref) for s in sets)
    return Cards(reference, cards, classifier.label, classifier.calls, classifier.failed)


def persona_realism(persona_id: str, simulator: str = "", *, reference: str = DEFAULT_REFERENCE) -> Card | None:
    """The card of one persona's runs (those of one simulator model when given), or None without runs."""
    for found in persona_corpora(persona_id):
        if not simulator or found.name.endswith(f"({simulator})"):
            return realism_card(found, corpus(reference))
    return None


def reference_table(records: Any) -> tuple[str, int, int]:
    """A reference table (CSV text) from (split, external id, messages, metadata) of Bridge's excerpts, and its
    dialogue and turn counts. An excerpt met again (Bridge repeats some, within and across splits, always with
    the same dialogue) is one dialogue with every split that holds it."""
    rows: dict[str, TableDialogue] = {}
    for split, external_id, messages, metadata in records:
        seen = rows.get(external_id)
        if seen is not None:
            if split not in seen.splits:
                rows[external_id] = TableDialogue(seen.measures, (*seen.splits, split), seen.error)
            continue
        rows[external_id] = TableDialogue(
            measure_messages(messages, external_id), (split,), bridge_error(metadata.get("e"))
        )
    return table_text(list(rows.values())), len(rows), sum(len(r.measures.turns) for r in rows.values())


def persona_grounding_proposal(reference: str = DEFAULT_REFERENCE) -> dict[str, Any]:
    """Grounding values fitted to a reference (a shipped table or part of one, or an imported set)."""
    return grounding_fit(corpus(reference))


def replayed_offline(
    persona: PersonaSpec,
    conversations: list[tuple[str, list[tuple[str, str]], TopicSpec | None]],
    name: str,
) -> Corpus:
    """The conversations (dialogue id, [(role, text)], topic) with the student's side played again by the offline
    student as `persona`, one simulator per conversation as in a run (its seeded decisions, its behaviours' triggers
    over its own earlier turns, the topic's mistakes): the tutor's messages stay as they were, the student's history
    is its own new turns. Measured."""
    llm = get_llm("simulator", override="offline")
    out = []
    for number, (dialogue, pairs, topic) in enumerate(conversations):
        simulator = StudentSimulator(persona, topic, llm, seed=number + 1)
        written: list[tuple[str, str]] = []
        for role, text in pairs:
            if role == "student" and any(r == "tutor" for r, _ in written):
                history = [{"role": r, "content": t, "turn": k + 1} for k, (r, t) in enumerate(written)]
                text, _ = asyncio.run(simulator.respond(history, len(history) + 1))
            written.append((role, text))
        out.append((dialogue, written))
    return _measured(name, out, None, f"{len(out)} run(s)' tutor turns, the students played again offline")


@dataclass(frozen=True)
class Fit:
    """A persona's grounding fitted to a reference, and its cards before and after."""

    persona: str
    reference: str
    grounding: dict[str, Any]
    before: tuple[Card, ...]
    """The persona's completed runs as they were played, one card per simulator model."""
    replayed_before: Card | None
    """Their tutor turns with the offline student as the persona is grounded now (None without runs)."""
    after: Card | None
    """The same tutor turns with the offline student grounded by the proposal (None without runs)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "persona": self.persona,
            "reference": self.reference,
            "grounding": self.grounding,
            "before": [c.as_dict() for c in self.before],
            "replayed_before": self.replayed_before.as_dict() if self.replayed_before else None,
            "after": self.after.as_dict() if self.after else None,
        }


def persona_fit(persona_id: str, reference: str = DEFAULT_REFERENCE) -> Fit:
    """Grounding fitted to `reference` for a persona, with its card before (its runs, per simulator model; and those
    runs' tutor turns answered by the offline student as grounded now) and after (the same tutor turns answered by
    the offline student grounded by the proposal), all against `reference`."""
    ref = corpus(reference)
    proposal = grounding_fit(ref)
    before = persona_corpora(persona_id)
    record = Persona.objects.filter(persona_id=persona_id).first()
    if record is None:
        raise NotFound(f"persona: no persona {persona_id!r}")
    runs = list(
        EvaluationRun.objects.filter(
            kind=RunKind.TUTOR, source=RunSource.SIMULATED, status=RunStatus.COMPLETED, persona=record
        )
        .select_related("topic")
        .order_by("-created_at")[:MAX_RUNS]
    )
    if not runs:
        return Fit(persona_id, reference, proposal, (), None, None)
    messages = _messages_by_run(runs)
    conversations = [
        (r.run_id, messages.get(r.pk, []), TopicSpec.from_record(r.topic) if r.topic else None) for r in runs
    ]
    now = PersonaSpec.from_record(record)
    fitted = replace(now, grounding=Grounding.from_dict(proposal))
    return Fit(
        persona_id,
        reference,
        proposal,
        tuple(realism_card(c, ref) for c in before),
        realism_card(replayed_offline(now, conversations, f"{persona_id} (offline, grounding now)"), ref),
        realism_card(replayed_offline(fitted, conversations, f"{persona_id} (offline, grounding proposed)"), ref),
    )


_NOTES: dict[tuple[Any, ...], dict[str, Any] | None] = {}
NOTES_KEPT = 256
NOTE_VERSION = "2"
"""Part of a kept note's file name: bump when what a note says changes, so older files are not read."""
NOTES_FOLDER = "realism-notes"
"""Under RUNS_DIR: the notes worked out, one small JSON file each, read by every process of the deployment."""
NOTE_FILES_KEPT = 4000
"""When a note is written into a folder holding more, the older half goes (a note is stale once its persona's next run
completes)."""


def _note_file(signature: tuple[Any, ...]) -> Path:
    body = json.dumps([NOTE_VERSION, *(str(x) for x in signature)])
    return Path(setting("RUNS_DIR")) / NOTES_FOLDER / f"{hashlib.sha256(body.encode()).hexdigest()[:40]}.json"


def _note_read(signature: tuple[Any, ...]) -> tuple[bool, dict[str, Any] | None]:
    try:
        return True, json.loads(_note_file(signature).read_text(encoding="utf-8"))["note"]
    except (OSError, ValueError, KeyError, TypeError):
        return False, None


def _note_write(signature: tuple[Any, ...], note: dict[str, Any] | None) -> None:
    path = _note_file(signature)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps({"note": note}), encoding="utf-8")
        os.replace(temporary, path)
        kept = list(path.parent.glob("*.json"))
        if len(kept) > NOTE_FILES_KEPT:
            for old in sorted(kept, key=lambda p: p.stat().st_mtime)[: len(kept) // 2]:
                old.unlink(missing_ok=True)
    except OSError:  # a read-only or full disk costs the next process the work, nothing else
        pass


def realism_note(persona_id: str, simulator: str, *, reference: str = DEFAULT_REFERENCE) -> dict[str, Any] | None:
    """What a report of a run of this persona and simulator says of its students' realism: the card's verdict and
    notes over the persona's completed runs with that simulator (None before MIN_DIALOGUES of them). Worked out
    once (the flags only: the card's shown intervals are left out) and kept, in the process and in a file under
    RUNS_DIR that every process reads, until another run of the persona completes; the worker that finishes a
    batch works out its notes as it writes the comparison, so a page that shows them reads them."""
    runs = EvaluationRun.objects.filter(
        kind=RunKind.TUTOR, source=RunSource.SIMULATED, status=RunStatus.COMPLETED, persona__persona_id=persona_id
    )
    signature = (persona_id, simulator, reference, runs.count(), runs.aggregate(m=Max("completed_at"))["m"])
    if signature in _NOTES:
        return _NOTES[signature]
    found, kept = _note_read(signature)
    if found:
        _keep(signature, kept)
        return kept
    note = None
    if signature[3] >= MIN_DIALOGUES:
        sets = persona_corpora(persona_id, simulator=simulator)
        card = realism_card(sets[0], corpus(reference), intervals=False) if sets else None
        if card is not None and card.unrealistic is not None:
            note = {
                "reference": reference,
                "simulator": simulator,
                "runs": card.dialogues,
                "unrealistic": card.unrealistic,
                "notes": list(card.notes),
                "summary": card.summary(),
            }
    _note_write(signature, note)
    _keep(signature, note)
    return note


def _keep(signature: tuple[Any, ...], note: dict[str, Any] | None) -> None:
    if len(_NOTES) >= NOTES_KEPT:
        _NOTES.clear()
    _NOTES[signature] = note


def group_realism(entries: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The realism notes of a comparison's (persona, simulator) pairs that are unrealistic."""
    found = []
    for persona_id, simulator in sorted(set(entries)):
        note = realism_note(persona_id, simulator)
        if note and note["unrealistic"]:
            found.append({"persona_id": persona_id, **note})
    return found


def _next_turn_inputs(transcripts: str, persona: str) -> tuple[list[Any], list[PersonaSpec]]:
    rows = list(
        Transcript.objects.filter(source=transcripts)
        .order_by("external_id")
        .values_list("external_id", "messages")[:MAX_TRANSCRIPTS]
    )
    if not rows:
        raise NotFound(f"no imported transcripts of source {transcripts!r}")
    dialogues = [(f"{transcripts}:{eid}", [(m["role"], m["content"]) for m in messages]) for eid, messages in rows]
    personas = Persona.objects.order_by("persona_id")
    if persona != "all":
        personas = personas.filter(persona_id=persona)
        if not personas.exists():
            raise NotFound(f"persona: no persona {persona!r}")
    return dialogues, [PersonaSpec.from_record(p) for p in personas]


def next_turn_reports(
    *,
    transcripts: str,
    persona: str = "all",
    provider: str | None = None,
    providers: Sequence[str] = (),
    limit: int = 100,
    batch: bool | None = None,
) -> list[NextTurnReport]:
    """Next-turn tests of each persona (or one) against an imported set of real dialogues, with each simulator model
    of `providers` (or `provider`; default the simulator role's; offline: the rule-based student), one report per
    persona and model. batch: True sends each persona's calls as one provider batch, None follows the LLM config."""
    dialogues, specs = _next_turn_inputs(transcripts, persona)
    reports = []
    for spec in list(providers) or [provider or ""]:
        llm = get_llm("simulator", override=spec or None)
        reports += [next_turns(dialogues, p, llm, limit=limit, batch=batch) for p in specs]
    return reports


def next_turn_forecast(
    *, transcripts: str, persona: str = "all", providers: Sequence[str] = (), limit: int = 100
) -> Forecast:
    """What a next-turn job would cost, per simulator model, direct and by batch; nothing is sent."""
    dialogues, specs = _next_turn_inputs(transcripts, persona)
    plans = [next_turn_plan(dialogues, specs, resolve("simulator", s or None), limit=limit) for s in providers or [""]]
    notes = [
        f"{plans[0].calls} call(s) per simulator model: {len(specs)} persona(s) x the replayed student turns "
        f"(at most {limit} per persona). Each persona's prompt is the same on every call, so prompt caching lowers "
        "the input's price; the high prices that prefix as written to the cache."
    ]
    return forecast(plans, notes)
