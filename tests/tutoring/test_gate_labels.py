"""People's labels on runs of both batches correct the gate's change for the judge's error (every door reads
the gate through selectors.group_gate): read when the gate is read, the adjudicated value where one was set."""

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from evaluation.judging.services import run_labels_set
from evaluation.models import Adjudication, Annotation, DimensionScore, EvaluationRun, Persona, RunMessage, Topic
from evaluation.runs.selectors import run_people_values
from evaluation.tutoring import selectors
from evaluation.tutoring.judge import judge_config
from evaluation.tutoring.services import _baseline

pytestmark = pytest.mark.django_db
JUDGE = "offline/offline-rules-v1"


def make_runs(group, pacing, baseline=None):
    topic = Topic.objects.get(topic_id="comparing-decimals")
    runs = []
    for index, score in enumerate(pacing):
        persona = Persona.objects.get(persona_id=("ace", "struggler")[index % 2])
        run = EvaluationRun.objects.create(
            run_id=f"{group}_{index}",
            kind="tutor",
            persona=persona,
            topic=topic,
            status="completed",
            stage="completed",
            overall_score=score,
            judge_label=JUDGE,
            group=group,
            repeat_index=index // 2,
            max_turns=4,
            seed=1000 + index,
            config={"judge_config": judge_config(JUDGE), **({"baseline": baseline} if baseline else {})},
        )
        DimensionScore.objects.create(run=run, dimension="pacing", score=score, analysis="")
        now = timezone.now()
        for turn, (role, text) in enumerate([("tutor", "Which is larger, 0.5 or 0.45?"), ("student", "0.5")], 1):
            RunMessage.objects.create(run=run, turn=turn, role=role, content=text, timestamp=now, attempt=1)
        runs.append(run)
    return runs


def test_labels_on_both_batches_correct_the_change_and_an_adjudication_wins(catalog, django_user_model):
    base_scores = [6.0, 7.0, 6.0, 7.0, 6.0, 7.0, 6.0, 7.0]
    base = make_runs("base", base_scores)
    record = _baseline(
        "base",
        judge_config(JUDGE),
        topic="comparing-decimals",
        personas=["ace", "struggler"],
        max_turns=4,
        threshold=1.0,
        rule="noise-aware",
        force=False,
    )
    # the judge sees the new tutor as the old; people see it 2 points worse
    cand = make_runs("cand", [6.0, 7.0, 7.0, 6.0, 6.0, 7.0, 6.0, 7.0], baseline=record)
    judge_only = selectors.group_gate("cand")
    assert judge_only.outcome != "regression" and all(t.lam is None for t in judge_only.tests)
    assert "judged by the judge alone" in judge_only.family_rule

    people = [django_user_model.objects.create_user(n, password="x" * 16, is_staff=True) for n in ("olga", "omar")]
    for user in people:
        user.groups.add(Group.objects.get(name="operator"))
    for run in base[:4]:
        run_labels_set(run_id=run.run_id, user=people[0], values={"pacing": str(int(run.overall_score))})
    for run in cand[:4]:
        run_labels_set(run_id=run.run_id, user=people[0], values={"pacing": str(int(run.overall_score) - 2)})
        run_labels_set(run_id=run.run_id, user=people[1], values={"pacing": str(int(run.overall_score) - 3)})
    values = run_people_values([r.run_id for r in cand])
    assert values["cand_0"] == {"pacing": 3.5} and "cand_5" not in values  # the mean of two people's
    # an adjudication settles cand_0 at 4: it is the value used, the raw labels stay
    label = Annotation.objects.filter(item__transcript__external_id="cand_0").first()
    Adjudication.objects.create(
        item=label.item,
        dimension=label.dimension,
        rubric_version=label.rubric_version,
        value="4",
        score=3.0,
        adjudicator="carol",
    )
    assert run_people_values(["cand_0"]) == {"cand_0": {"pacing": 4.0}}
    assert Annotation.objects.filter(item__transcript__external_id="cand_0").count() == 2

    corrected = selectors.group_gate("cand")
    (test,) = corrected.tests
    assert test.labelled == (4, 4) and test.lam is not None
    assert test.delta < -1.5 and "pacing (4+4 labelled runs)" in corrected.family_rule
    assert corrected.outcome == "regression" and test.significant
    assert corrected.as_dict()["tests"][0]["labelled"] == (4, 4)
