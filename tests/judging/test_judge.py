"""Judging imported items: offline (deterministic, from the text), and a real SDK against the loopback server."""

import json

import pytest
from django.core.management import CommandError, call_command

from evaluation.judging import services
from evaluation.models import Item, JudgeConfiguration, JudgeScore

pytestmark = pytest.mark.django_db

HISTORY = [
    {"role": "tutor", "content": "What is 12 x 3?"},
    {"role": "student", "content": "I think it is 38 because I added 12 three times."},
]
GOOD = "Not quite, but good try! Check your adding: what is 12 + 12 first? Then add 12 once more."
POOR = "The answer is 36. Next question."


def import_set():
    record = {
        "conversation_id": "c1",
        "conversation_history": HISTORY,
        "anno_llm_responses": {
            "good": {
                "response": GOOD,
                "annotation": {"Mistake_Identification": "Yes", "Revealing_of_the_Answer": "No"},
            },
            "poor": {"response": POOR, "annotation": {"Mistake_Identification": "No"}},
        },
    }
    services.transcripts_import(json.dumps(record), file="set.json")


def values(key: str, configuration: JudgeConfiguration, repeat: int = 1) -> dict[str, str]:
    rows = JudgeScore.objects.filter(item__key=key, configuration=configuration, repeat=repeat)
    return {row.dimension.name: row.value for row in rows.select_related("dimension")}


def test_offline_judge_scores_every_dimension_from_the_text_deterministically(capsys):
    import_set()
    call_command("judge_imported", "--rubric", "tutor-response", "--provider", "offline", "--repeats", "2")
    out = capsys.readouterr().out
    assert "offline/offline-rules-v1 | prompt " in out and "| tutor-response v1: 4 judged, 0 already judged" in out
    configuration = JudgeConfiguration.objects.get()
    assert JudgeScore.objects.count() == 2 * 2 * 8  # items x repeats x dimensions
    good, poor = values("good", configuration), values("poor", configuration)
    assert good["Mistake_Identification"] == "Yes" and poor["Mistake_Identification"] == "No"
    assert good["Revealing_of_the_Answer"] == "No" and poor["Revealing_of_the_Answer"] != "No"
    assert good["Tutor_Tone"] == "Encouraging"
    assert good["Actionability"] == "Yes" and poor["Actionability"] != "Yes"
    rationale = JudgeScore.objects.filter(item__key="good").first().rationale
    assert rationale.startswith("[offline rule-based judge]")
    # judged again: the same values (the jitter is seeded by the text and the repeat)
    before = {(s.item_id, s.dimension_id, s.repeat): s.value for s in JudgeScore.objects.all()}
    call_command("judge_imported", "--rubric", "tutor-response", "--provider", "offline", "--repeats", "2", "--again")
    assert before == {(s.item_id, s.dimension_id, s.repeat): s.value for s in JudgeScore.objects.all()}
    call_command("judge_imported", "--rubric", "tutor-response", "--provider", "offline", "--repeats", "2")
    assert "0 judged, 4 already judged" in capsys.readouterr().out


def test_the_judge_frames_real_sessions_as_real_and_reads_one_candidate_in_context(loopback):
    import_set()
    services.transcripts_import(json.dumps({"id": "s1", "messages": HISTORY + [{"role": "tutor", "content": GOOD}]}))
    report = services.transcripts_judge(rubric="tutor-response", provider=f"openai/judge-m@{loopback.openai_url}")
    assert (report.judged, report.failed) == (2, ())
    configuration = JudgeConfiguration.objects.get()
    # a server on this machine is named "local": the same judge on another port is the same judge
    assert configuration.provider == "openai/judge-m" and configuration.key.startswith("openai/judge-m@local | prompt ")
    # the loopback answers the first value its schema allows: "Yes" (best first), for every dimension
    assert values("good", configuration)["Coherence"] == "Yes"
    bodies = [r.body for r in loopback.requests]
    system = bodies[0]["messages"][0]["content"]
    assert "real tutoring conversation" in system and "persona " not in system and "simulated" not in system
    assert "Scale, best first: Encouraging | Neutral | Offensive." in system
    users = sorted(b["messages"][-1]["content"] for b in bodies)
    assert any(u.endswith(f"# Candidate tutor response\n{GOOD}") for u in users)
    assert all("[Turn 2] STUDENT: I think it is 38" in u for u in users)
    assert not any(POOR in u and GOOD in u for u in users)  # one candidate per call
    session = services.transcripts_judge(rubric="tutor-session", provider=f"openai/judge-m@{loopback.openai_url}")
    assert session.judged == 1 and Item.objects.get(key="").judge_scores.count() == 5
    system = loopback.requests[-1].body["messages"][0]["content"]
    assert "real conversation between a tutor and a student" in system and "persona " not in system


def test_a_different_prompt_or_rubric_version_is_a_different_configuration():
    import_set()
    first = services.transcripts_judge(rubric="tutor-response", provider="offline")
    rubric = services.rubric_get("tutor-response")
    rubric.version = 2
    rubric.save()
    second = services.transcripts_judge(rubric="tutor-response", provider="offline")
    assert first.configuration != second.configuration and second.judged == 2
    assert second.configuration.endswith("| tutor-response v2")
    dim = rubric.dimensions.get(name="Coherence")
    dim.question = "Does it follow from what the student said?"
    dim.save()
    third = services.transcripts_judge(rubric="tutor-response", provider="offline")
    assert third.configuration.split(" | ")[1] != second.configuration.split(" | ")[1]


def test_bad_arguments_are_refused():
    with pytest.raises(CommandError, match="no rubric 'nope'"):
        call_command("judge_imported", "--rubric", "nope")
    with pytest.raises(CommandError, match="unknown provider 'acme'"):
        call_command("judge_imported", "--rubric", "tutor-response", "--provider", "acme")
    with pytest.raises(CommandError, match="repeats: must be from 1 to 20"):
        call_command("judge_imported", "--rubric", "tutor-response", "--repeats", "0")


def test_the_offline_session_judge_reads_uptake_warmth_and_repetition(client, staff_user):
    warm = [
        {"role": "tutor", "content": "What is 3/4 as a decimal?"},
        {"role": "student", "content": "I'm confused, is it 3.4?"},
        {"role": "tutor", "content": "Don't worry, 3.4 is a good try. Think about 3 divided by 4: what do you get?"},
        {"role": "student", "content": "0.75"},
        {"role": "tutor", "content": "Great, 0.75 is right. Remember: the fraction bar means divide."},
    ]
    cold = [
        {"role": "tutor", "content": "What is 3/4 as a decimal? Answer the question now please."},
        {"role": "student", "content": "I'm confused, is it 3.4?"},
        {"role": "tutor", "content": "Answer the question now please. What is 3/4 as a decimal?"},
        {"role": "student", "content": "0.75"},
        {"role": "tutor", "content": "Answer the question now please. Next one."},
    ]
    body = json.dumps([{"id": "warm", "messages": warm}, {"id": "cold", "messages": cold}])
    services.transcripts_import(body, file="sessions.json")
    services.transcripts_judge(rubric="tutor-session", provider="offline")
    scores = {
        (s.item.transcript.external_id, s.dimension.name): int(s.value)
        for s in JudgeScore.objects.select_related("item__transcript", "dimension")
    }
    for dimension in ("responsiveness", "emotional_attunement", "authenticity"):
        assert scores[("warm", dimension)] > scores[("cold", dimension)], dimension
    # the transcript page shows the judge's values though nobody labelled it
    client.force_login(staff_user)
    page = client.get(
        f"/admin/evaluation/judging/transcripts/{Item.objects.get(transcript__external_id='warm').transcript_id}/"
    )
    html = page.content.decode()
    # the dimension by its label (the id stays in the title), people's column empty, the judge's repeat shown
    assert '<th title="authenticity">Authenticity</th><td><span class="meta">-</span></td>' in html and "(r1)" in html
    assert ">authenticity<" not in html


def test_a_failing_vendor_fails_those_calls_only_and_the_command_says_so(loopback, capsys):
    from evaluation.providers.loopback import Reply

    import_set()
    loopback.script(*[Reply(status=400, error_message="bad model")] * 1, endpoint="chat")
    provider = f"openai/judge-m@{loopback.openai_url}"
    with pytest.raises(CommandError, match="1 call\\(s\\) failed; the others are stored"):
        call_command("judge_imported", "--rubric", "tutor-response", "--provider", provider, "--workers", "1")
    assert "failed: item " in capsys.readouterr().err
    assert JudgeScore.objects.count() == 8  # the other candidate's eight dimensions
    call_command("judge_imported", "--rubric", "tutor-response", "--provider", provider)
    assert "1 judged, 1 already judged" in capsys.readouterr().out and JudgeScore.objects.count() == 16
