"""Dashboard, report and comparison pages: content, safety, and a bounded number of SQL queries."""

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from evaluation.models import DimensionScore, EvaluationRun, Persona, Problem, RunMessage, Topic

pytestmark = pytest.mark.django_db
DIMS = ["responsiveness", "explanation_quality", "emotional_attunement", "pacing", "authenticity"]


def make_runs(count, messages=4, problems=2, group=""):
    persona = Persona.objects.get(persona_id="ace")
    topic = Topic.objects.filter(approved=True).first()
    runs = EvaluationRun.objects.bulk_create(
        EvaluationRun(
            run_id=f"run_test_{uuid.uuid4().hex[:10]}",
            persona=persona,
            topic=topic,
            status="completed",
            stage="completed",
            overall_score=6.5,
            group=group,
            judge_label="offline/offline-rules-v1",
        )
        for _ in range(count)
    )
    now = timezone.now()
    DimensionScore.objects.bulk_create(
        DimensionScore(run=r, dimension=d, score=5 + i % 5, analysis=f"about {d}")
        for r in runs
        for i, d in enumerate(DIMS)
    )
    RunMessage.objects.bulk_create(
        RunMessage(run=r, turn=t, role="tutor" if t % 2 else "student", content=f"message {t}", timestamp=now)
        for r in runs
        for t in range(1, messages + 1)
    )
    Problem.objects.bulk_create(
        Problem(
            run=r,
            rank=k,
            title=f"problem {k}",
            turns=[1, 2],
            quote="message 1",
            severity="major",
            root_cause="wrong_pacing",
        )
        for r in runs
        for k in range(1, problems + 1)
    )
    return runs


def count_queries(client, url):
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, response.status_code
    return len(ctx.captured_queries), response


def test_run_list_queries_do_not_grow_with_runs(staff_client, catalog):
    make_runs(3)
    few, _ = count_queries(staff_client, "/admin/evaluation/")
    make_runs(120, messages=30, problems=5)
    many, response = count_queries(staff_client, "/admin/evaluation/")
    assert many == few, (few, many)
    assert response.content.decode().count('class="card ') == 24  # one page
    assert "123 runs" in response.content.decode()


def test_report_queries_do_not_grow_with_messages_or_problems(staff_client, catalog):
    small = make_runs(1, messages=4, problems=1)[0]
    big = make_runs(1, messages=200, problems=5)[0]
    few, _ = count_queries(staff_client, f"/admin/evaluation/runs/{small.run_id}/")
    many, response = count_queries(staff_client, f"/admin/evaluation/runs/{big.run_id}/")
    assert many == few, (few, many)
    assert response.content.decode().count('class="msg ') == 200


def test_report_renders_scores_from_the_data_and_links_problems(staff_client, catalog):
    run = make_runs(1)[0]
    DimensionScore.objects.create(run=run, dimension="curiosity", score=9, analysis="a dimension no list knows")
    html = staff_client.get(f"/admin/evaluation/runs/{run.run_id}/").content.decode()
    assert "curiosity" in html and "a dimension no list knows" in html
    assert '<a href="#turn-1">1</a>' in html and 'id="turn-1"' in html
    assert "offline rule-based judge" in html


def test_transcript_markdown_is_rendered_and_html_is_inert(staff_client, catalog):
    run = make_runs(1, messages=0)[0]
    payload = '**bold** <script>alert("x")</script> <img src=x onerror="alert(1)"> [link](javascript:alert(2))'
    RunMessage.objects.create(run=run, turn=1, role="student", content=payload, timestamp=timezone.now())
    html = staff_client.get(f"/admin/evaluation/runs/{run.run_id}/").content.decode()
    body = html.split('id="turn-1"')[1].split("</div></div>")[0]
    assert "<strong>bold</strong>" in body
    assert "<script>" not in body and "<img" not in body and 'href="javascript' not in body
    assert "&lt;script&gt;" in body and "onerror" in body  # shown as text


def test_dashboard_filters(staff_client, catalog):
    runs = make_runs(2)
    EvaluationRun.objects.filter(pk=runs[0].pk).update(status="failed")
    html = staff_client.get("/admin/evaluation/?status=failed").content.decode()
    assert runs[0].run_id in html and runs[1].run_id not in html
    html = staff_client.get("/admin/evaluation/?persona=quiet_one").content.decode()
    assert "0 runs" in html


def test_comparison_page_table_chart_and_causes(staff_client, catalog):
    make_runs(3, group="comparison_test")
    html = staff_client.get("/admin/evaluation/comparisons/comparison_test/").content.decode()
    assert "<svg" in html and "explanation_quality" in html and "wrong_pacing" in html
    assert "±" in html  # three repeats of one persona: mean ± spread
    assert staff_client.get("/admin/evaluation/comparisons/nope/").status_code == 404


def test_pages_need_staff(client, catalog):
    for url in ("/admin/evaluation/", "/admin/evaluation/runs/x/", "/admin/evaluation/comparisons/x/"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/")


def test_admin_links_run_to_report_and_persona_to_runs(staff_client, catalog):
    run = make_runs(1, group="comparison_links")[0]
    html = staff_client.get(f"/admin/evaluation/evaluationrun/{run.pk}/change/").content.decode()
    assert f"/admin/evaluation/runs/{run.run_id}/" in html and "/admin/evaluation/comparisons/comparison_links/" in html
    html = staff_client.get("/admin/evaluation/persona/").content.decode()
    assert "/admin/evaluation/?persona=ace" in html


def test_artifact_download_is_limited_to_report_files(staff_client, catalog, tmp_path):
    run = make_runs(1)[0]
    (tmp_path / "review.md").write_text("# Review")
    run.artifacts_dir = str(tmp_path)
    run.save()
    response = staff_client.get(f"/admin/evaluation/runs/{run.run_id}/files/review.md")
    assert response.status_code == 200 and b"".join(response.streaming_content) == b"# Review"
    assert staff_client.get(f"/admin/evaluation/runs/{run.run_id}/files/..%2F..%2Fetc%2Fpasswd").status_code == 404


def test_admin_index_links_the_dashboard(staff_client):
    assert 'href="/admin/evaluation/"' in staff_client.get("/admin/").content.decode()
