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


def test_run_list_queries_do_not_grow_with_runs(staff_client, catalog, stale_mark_made):
    make_runs(3)
    few, _ = count_queries(staff_client, "/admin/evaluation/")
    make_runs(120, messages=30, problems=5)
    many, response = count_queries(staff_client, "/admin/evaluation/")
    assert many == few, (few, many)
    assert response.content.decode().count('class="card ') == 24  # one page
    assert "123 runs" in response.content.decode()


def test_report_queries_do_not_grow_with_messages_or_problems(staff_client, catalog, stale_mark_made):
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
    assert '<a href="#message-1">1</a>' in html and 'id="message-1"' in html and "Message 1 · " in html
    assert "offline rule-based judge" in html


def test_transcript_markdown_is_rendered_and_html_is_inert(staff_client, catalog):
    run = make_runs(1, messages=0)[0]
    payload = '**bold** <script>alert("x")</script> <img src=x onerror="alert(1)"> [link](javascript:alert(2))'
    RunMessage.objects.create(run=run, turn=1, role="student", content=payload, timestamp=timezone.now())
    html = staff_client.get(f"/admin/evaluation/runs/{run.run_id}/").content.decode()
    body = html.split('id="message-1"')[1].split("</div></div>")[0]
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


def card_html(html, run_id):
    return html.split(f'data-run="{run_id}"')[1].split("\n  </div>")[0]


def test_a_card_shows_its_status_once_and_labelled_scores_in_one_format(staff_client, catalog):
    run = make_runs(1)[0]
    card = card_html(staff_client.get("/admin/evaluation/").content.decode(), run.run_id)
    assert card.count("Completed") == 1 and "completed" not in card.replace("status-completed", "")
    assert '<span class="score-badge s6" title="average score">6.5</span>' in card
    # every bar carries its value and its dimension, in the same one-decimal format as the average
    values = [v.split("<")[0] for v in card.split('class="minibar-value">')[1:]]
    names = [v.split("<")[0] for v in card.split('class="minibar-name">')[1:]]
    assert values == ["5.0", "6.0", "7.0", "8.0", "9.0"] and names == ["resp", "expl", "emot", "pace", "auth"]


def test_a_running_card_shows_its_progress_once(staff_client, catalog):
    run = make_runs(1)[0]
    EvaluationRun.objects.filter(pk=run.pk).update(status="running", stage="running_session", detail="Turn 3/20")
    card = card_html(staff_client.get("/admin/evaluation/").content.decode(), run.run_id)
    assert "Turn 3/20" in card and "running_session" not in card and "Running" not in card


def test_comparison_numbers_share_the_one_decimal_format(staff_client, catalog):
    runs = make_runs(2, group="comparison_format")
    EvaluationRun.objects.filter(pk=runs[0].pk).update(overall_score=7)
    html = staff_client.get("/admin/evaluation/comparisons/comparison_format/").content.decode()
    table = html.split('<table class="heat">')[1].split("</table>")[0]
    cells = [c.split("</td>")[0] for c in table.split('">')[1:] if c[:1].isdigit()]
    assert cells and all(c.split(" ± ")[0].count(".") == 1 and len(c.split(" ± ")[0].split(".")[1]) == 1 for c in cells)


@pytest.mark.parametrize(
    ("usage", "config", "expected", "absent"),
    [
        (
            {"calls": 14, "input_tokens": 7091, "by_provider": {"offline": 14}},
            {},
            "Offline: no LLM was called",
            "14 LLM calls",
        ),
        ({"calls": 14, "input_tokens": 7091}, {"provider": "offline"}, "Offline: no LLM was called", "LLM calls ·"),
        (
            {"calls": 5, "input_tokens": 900, "by_provider": {"openai": 3, "offline": 2}},
            {},
            "5 LLM calls · 900 input tokens",
            "Offline:",
        ),
    ],
    ids=["offline", "offline-before-providers-were-counted", "mixed"],
)
def test_report_usage_says_offline_when_no_llm_was_called(staff_client, catalog, usage, config, expected, absent):
    run = make_runs(1)[0]
    EvaluationRun.objects.filter(pk=run.pk).update(token_usage=usage, config=config)
    html = staff_client.get(f"/admin/evaluation/runs/{run.run_id}/").content.decode()
    usage_html = html.split('<section class="usage">')[1]
    assert expected in usage_html and absent not in usage_html


def test_report_status_is_shown_once(staff_client, catalog):
    run = make_runs(1)[0]
    html = staff_client.get(f"/admin/evaluation/runs/{run.run_id}/").content.decode()
    status = html.split('<p class="status')[1].split("</p>")[0]
    assert (
        "Completed" in status and "completed</b>" not in status and "Complete<" not in status.replace("Completed", "")
    )


def test_the_existing_session_picker_lists_only_sessions_with_messages(staff_client, catalog):
    from evaluation.models import TutoringSession

    topic = Topic.objects.filter(approved=True).first()
    empty = TutoringSession.objects.create(topic=topic)
    talked = TutoringSession.objects.create(
        topic=topic,
        full_conversation_log=[{"role": "student", "content": "hi"}, {"role": "tutor", "content": "hello"}],
    )
    history_only = TutoringSession.objects.create(
        topic=topic, conversation_history=[{"role": "student", "content": "x"}]
    )
    html = staff_client.get("/admin/evaluation/").content.decode()
    picker = html.split('name="session_id"')[1].split("</select>")[0]
    assert str(empty.id) not in picker
    assert f'value="{talked.id}"' in picker and "2 messages" in picker
    assert f'value="{history_only.id}"' in picker and "1 message ·" in picker


def test_charts_show_dimensions_over_time_per_tutor_version_and_per_persona(staff_client, catalog):
    from datetime import timedelta

    from evaluation.models import Agent

    tutor = Agent.objects.create(id="tutor-v2", display_name="Tutor v2", kind="protocol", model="gpt-x")
    old, new = make_runs(2)
    EvaluationRun.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=3))
    EvaluationRun.objects.filter(pk=new.pk).update(agent=tutor)
    quiet = make_runs(1)[0]
    EvaluationRun.objects.filter(pk=quiet.pk).update(persona=Persona.objects.get(persona_id="quiet_one"))
    html = staff_client.get("/admin/evaluation/charts/").content.decode()
    assert "3 completed runs" in html
    for label in ("Scores per dimension over time", "Scores per tutor version", "Scores per persona"):
        assert f'aria-label="{label}"' in html
    by_tutor = html.split('id="chart-by-tutor"')[1].split("</section>")[0]
    assert "Reference tutor" in by_tutor and "Tutor v2 (gpt-x)" in by_tutor
    by_persona = html.split('id="chart-by-persona"')[1].split("</section>")[0]
    assert ">Arjun<" in by_persona and ">Meera<" in by_persona
    over_time = html.split('id="chart-over-time"')[1].split("</section>")[0]
    assert "<polyline" in over_time  # two days: a line per dimension
    # the list's filters select the charted runs
    html = staff_client.get("/admin/evaluation/charts/?persona=quiet_one").content.decode()
    assert "1 completed run " in html and ">ace<" not in html
    assert "No completed runs" in staff_client.get("/admin/evaluation/charts/?persona=struggler").content.decode()


def test_dashboard_exports_the_filtered_runs_as_csv_and_json(staff_client, catalog):
    failed, completed = make_runs(2)
    EvaluationRun.objects.filter(pk=failed.pk).update(status="failed")
    html = staff_client.get("/admin/evaluation/?status=failed").content.decode()
    links = {
        fmt: html.split(f"format={fmt}")[0].rsplit('href="', 1)[1]
        + f"format={fmt}"
        + html.split(f"format={fmt}")[1].split('"')[0]
        for fmt in ("csv", "json")
    }
    for link in links.values():
        assert "status=failed" in link and "kind=tutor" in link
    csv_response = staff_client.get(links["csv"].replace("&amp;", "&"))
    text = b"".join(csv_response.streaming_content).decode()
    assert csv_response.status_code == 200 and failed.run_id in text and completed.run_id not in text
    assert "score:responsiveness" in text.splitlines()[0]
    data = staff_client.get(links["json"].replace("&amp;", "&")).json()
    assert data["count"] == 1 and [r["run_id"] for r in data["results"]] == [failed.run_id]


def test_the_report_pages_sidebar_lists_what_the_user_may_open_and_follows_a_change(django_user_model, catalog):
    """The navigation sidebar of the dashboard's pages is kept per set of permissions: each user sees
    their own, and a permission granted shows on the next page."""
    from django.contrib.auth.models import Permission
    from django.test import Client

    run = make_runs(1)[0]
    reader = django_user_model.objects.create_user("reader", "r@example.com", "pw-reader-123", is_staff=True)
    reader.user_permissions.add(Permission.objects.get(codename="view_evaluationrun"))
    client = Client()
    client.force_login(reader)

    def sidebar() -> str:
        response = client.get(f"/admin/evaluation/runs/{run.run_id}/")
        assert response.status_code == 200
        html = response.content.decode()
        return html[html.index('id="nav-sidebar"') : html.index("</nav>", html.index('id="nav-sidebar"'))]

    first = sidebar()
    assert "/admin/evaluation/evaluationrun/" in first and "/admin/evaluation/persona/" not in first
    reader.user_permissions.add(Permission.objects.get(codename="view_persona"))
    assert "/admin/evaluation/persona/" in sidebar()
    boss = django_user_model.objects.create_user("boss", "b@example.com", "pw-boss-12345", is_staff=True)
    boss.is_superuser = True
    boss.save()
    client.force_login(boss)
    assert "/admin/auth/user/" in sidebar()
    client.force_login(reader)
    assert "/admin/auth/user/" not in sidebar()  # the superuser's sidebar is not the reader's
