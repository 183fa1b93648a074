"""The dashboard's query parameters are checked as the API's are: a value the page cannot read gets a 400
page naming the parameter (as the form labels it) and the reason, showing no runs, instead of being silently
ignored."""

import pytest

from evaluation.models import EvaluationRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def a_run(catalog):
    return EvaluationRun.objects.create(run_id="run_listed", kind="tutor", status="completed", stage="completed")


BAD_QUERIES = [
    # the dates as the form labels them ("Date_to: ..." read as a typo)
    ("date_to=2026-13-45", "To date: &#x27;2026-13-45&#x27; is not a date (YYYY-MM-DD)"),
    ("date_from=yesterday", "From date: &#x27;yesterday&#x27; is not a date"),
    ("date_from=2026-02-02&date_to=2026-01-01", "To date: 2026-01-01 is before from date (2026-02-02)"),
    ("status=lost", "status: &#x27;lost&#x27; is not one of"),
    ("source=elsewhere", "source: &#x27;elsewhere&#x27; is not one of"),
    ("persona=" + "p" * 65, "persona: is 65 characters: an id has at most 64"),
    ("page=abc", "page: &#x27;abc&#x27; is not a page number"),
    ("status=failed&status=completed", "status: given 2 times; send it once"),
]
PAGES = ["/admin/evaluation/", "/admin/evaluation/charts/"]


@pytest.mark.parametrize(
    ("path", "query", "reason"),
    # the charts page is not paged: `page` is the dashboard's alone
    [
        (path, q, r)
        for path in PAGES
        for q, r in BAD_QUERIES
        if not (path.endswith("charts/") and q.startswith("page="))
    ],
)
def test_an_unreadable_parameter_is_a_400_page_naming_it(staff_client, a_run, path, query, reason):
    response = staff_client.get(f"{path}?{query}")
    html = response.content.decode()
    assert response.status_code == 400 and reason.lower() in html.lower()  # the admin capitalises a message
    assert "run_listed" not in html


def test_blank_filters_as_the_form_sends_them_still_list_every_run(staff_client, a_run):
    query = "source=&persona=&topic=&status=&date_from=&date_to="
    response = staff_client.get(f"/admin/evaluation/?{query}")
    assert response.status_code == 200 and "run_listed" in response.content.decode()
    response = staff_client.get("/admin/evaluation/?date_from=2020-01-01&date_to=2999-12-31&status=completed&page=1")
    assert response.status_code == 200 and "run_listed" in response.content.decode()


def test_the_live_status_poll_bounds_its_ids(staff_client, a_run):
    assert staff_client.get("/admin/evaluation/runs/status.json?ids=run_listed").json()["runs"]
    response = staff_client.get("/admin/evaluation/runs/status.json?ids=" + ",".join(["r"] * 101))
    assert response.status_code == 400 and "at most 100" in response.json()["error"]
    response = staff_client.get("/admin/evaluation/runs/status.json?ids=" + "r" * 121)
    assert response.status_code == 400 and "at most 120" in response.json()["error"]
