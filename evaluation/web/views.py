"""Dashboard and report pages (server-rendered, staff only). Thin: read selectors, call services."""

import json
from collections.abc import Callable
from datetime import datetime
from functools import wraps
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.views.decorators import staff_member_required
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from evaluation.conf import setting
from evaluation.drift import selectors as drift_selectors
from evaluation.errors import Conflict, InvalidInput, NotFound
from evaluation.judging import selectors as judging_selectors
from evaluation.models.runs import RunSource, RunStatus
from evaluation.runs import selectors as run_selectors
from evaluation.runs import services as run_services
from evaluation.suites import selectors as suite_selectors
from evaluation.templatetags.evaluation_extras import label
from evaluation.tutoring import selectors, services
from evaluation.tutoring.selectors import DOWNLOADABLE
from evaluation.web import queries
from evaluation.web.charts import grouped_bars, lines
from evaluation.web.markdown import render_markdown


def permission_needed(perm: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Staff who lack the model permission get 403 (after staff_member_required sent anonymous users to log in)."""

    def wrap(view: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(view)
        def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            if not request.user.has_perm(perm):
                raise PermissionDenied(f"this page needs the permission {perm!r}")
            return view(request, *args, **kwargs)

        return checked

    return wrap


def _page(request: HttpRequest, template: str, context: dict[str, Any], status: int = 200) -> HttpResponse:
    """Render a dashboard page inside the admin's frame (its header, navigation and site name)."""
    frame = admin.site.each_context(request)
    if frame.get("is_nav_sidebar_enabled") and hasattr(admin.site, "nav_sidebar"):
        frame["nav_sidebar"] = admin.site.nav_sidebar(request)
    return render(request, template, {**frame, **context}, status=status)


FILTER_WORDS = {
    "date_from": "From date",
    "date_to": "To date",
    "persona": "Persona",
    "topic": "Topic",
    "agent": "Agent",
    "kind": "Kind",
    "source": "Source",
    "status": "Status",
    "group": "Comparison",
    "page": "Page",
}
"""The filters' names as the page's form labels them, for the messages that refuse them."""


def _in_words(problem: str) -> str:
    """A refused filter's message as the page words it: "To date: ..." for "date_to: ..." (the API keeps the
    parameter's name; a person sees the form's label)."""
    key, sep, rest = problem.partition(": ")
    if not sep or key not in FILTER_WORDS:
        return problem
    for name, words in FILTER_WORDS.items():
        rest = rest.replace(f"({name} ", f"({words.lower()} ").replace(f"before {name} ", f"before {words.lower()} ")
    return f"{FILTER_WORDS[key]}: {rest}"


NO_RUNS = {key: "" for key in selectors.RUN_FILTERS} | {"status": "refused"}
"""Filters no run matches: what a list whose query parameters were refused shows."""


def _live_socket() -> bool:
    from django.conf import settings

    return bool(getattr(settings, "REDIS_URL", ""))


@staff_member_required
@permission_needed("evaluation.view_evaluationrun")
@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    run_services.runs_interrupt_stale_on_read()
    filters, refused = queries.run_filters(request.GET)
    for problem in refused:
        messages.error(request, _in_words(problem))
    page, cards = selectors.run_list_page(
        filters if not refused else NO_RUNS, request.GET.get("page") if not refused else 1
    )
    choices = selectors.start_form_choices()
    start_choice = request.session.get("start_choice", {})
    if "@" in start_choice.get("provider", ""):
        # A provider at a URL ('openai/model@http://...') is shown on the page right after its price or start,
        # so that Start starts what was priced, and then forgotten: a local or loopback server it names is
        # often gone by the next visit, and the form kept it silently.
        request.session["start_choice"] = {**start_choice, "provider": ""}
    sessions = [(s, len(s.full_conversation_log or s.conversation_history or [])) for s in choices.pop("sessions")]
    return _page(
        request,
        "evaluation/dashboard.html",
        {
            "title": "Evaluation runs",
            "page": page,
            "cards": cards,
            "filters": filters,
            "query": _filter_query(filters),
            **choices,
            "start_choice": start_choice,
            "start_forecast": request.session.pop("start_forecast", None),
            "sessions": [(s, n) for s, n in sessions if n],
            "sources": RunSource.choices,
            "statuses": RunStatus.choices,
            "live_socket": _live_socket(),
            "refused": bool(refused),
            "active_ids": [c.run.run_id for c in cards if c.run.is_active],
            **_problem_trends(filters if not refused else NO_RUNS),
        },
        status=400 if refused else 200,
    )


def _problem_trends(filters: dict[str, str]) -> dict[str, Any]:
    """The dashboard's problem trends: a line per root cause over the weeks, and a table per tutor, of the
    runs the list's filters select."""
    trends = run_selectors.problem_trends(within=selectors.runs_filtered(None, filters))
    most = max((n for counts in trends.by_week.values() for n in counts), default=0)
    series: dict[str, list[float | None]] = {
        label(c): [float(n) for n in counts] for c, counts in trends.by_week.items()
    }
    chart = ""
    if trends.weeks:
        chart = lines(
            series,
            trends.weeks,
            scale=float(max(3, most)),
            label="Problems per week by root cause",
            times=[datetime.fromisocalendar(int(w[:4]), int(w[6:]), 1) for w in trends.weeks],
        )
    causes = sorted({c for row in trends.by_tutor.values() for c in row})
    table = [(tutor, [trends.by_tutor[tutor].get(c, 0) for c in causes]) for tutor in trends.tutors]
    return {"trends": trends, "trend_chart": chart, "trend_causes": causes, "trend_table": table}


@staff_member_required
@permission_needed("evaluation.start_run")
@require_POST
def start(request: HttpRequest) -> HttpResponse:
    if request.POST.get("forget"):
        request.session.pop("start_choice", None)
        return redirect("evaluation-dashboard")
    try:
        if request.POST.get("mode") == "session":
            run = services.session_evaluation_start(
                user=request.user,
                session_id=request.POST.get("session_id", ""),
                provider=request.POST.get("provider") or None,
            )
            messages.success(request, f"Evaluating session: {run.run_id}")
            return redirect(reverse("evaluation-dashboard") + "?source=existing_session")
        chosen = request.POST.getlist("personas")
        # The form shows the same choices again after a start, a price or a refusal, and says so (the
        # dashboard shows a provider at a URL once only).
        request.session["start_choice"] = {
            "topic_id": request.POST.get("topic_id", ""),
            "personas": chosen,
            **{k: request.POST.get(k, "") for k in ("max_turns", "runs_per_persona", "target", "provider")},
            "at": timezone.localtime().strftime("%H:%M"),
        }
        personas = chosen or ["all"]
        if request.POST.get("price"):
            # "Price it": the calls, tokens and cost of this start, shown on the form; nothing is created or sent.
            found = services.run_forecast(
                topic_id=request.POST.get("topic_id", ""),
                persona=personas,
                max_turns=int(request.POST.get("max_turns") or 20),
                runs_per_persona=int(request.POST.get("runs_per_persona") or 1),
                agent_id=request.POST.get("target") or None,
                provider=request.POST.get("provider") or None,
            )
            # and the gate's planner: the runs per persona that see a drop of the threshold, their cost and time
            plan = services.run_plan(
                topic_id=request.POST.get("topic_id", ""),
                persona=personas,
                max_turns=int(request.POST.get("max_turns") or 20),
                agent_id=request.POST.get("target") or None,
                provider=request.POST.get("provider") or None,
                baseline=request.POST.get("baseline", "").strip() or None,
            )
            request.session["start_forecast"] = found.text().splitlines() + [
                f"Gate plan: {line}" for line in plan["text"].splitlines()
            ]
            return redirect("evaluation-dashboard")
        runs = services.run_start(
            user=request.user,
            topic_id=request.POST.get("topic_id", ""),
            persona=personas,
            max_turns=int(request.POST.get("max_turns") or 20),
            runs_per_persona=int(request.POST.get("runs_per_persona") or 1),
            agent_id=request.POST.get("target") or None,
            provider=request.POST.get("provider") or None,
            baseline=request.POST.get("baseline", "").strip() or None,
            regression_rule=request.POST.get("regression_rule") or "noise-aware",
            force_baseline=request.POST.get("force_baseline") == "on",
            started_by="dashboard",
        )
    except (InvalidInput, NotFound, Conflict, ValueError) as exc:
        messages.error(request, f"{'Not priced' if request.POST.get('price') else 'Not started'}: {exc}")
        return redirect("evaluation-dashboard")
    messages.success(request, f"Started {len(runs)} run(s): " + ", ".join(r.run_id for r in runs))
    for warning in runs[0].config.get("catalog_warnings", []):
        messages.warning(request, warning)
    if runs[0].config.get("baseline"):
        # the batch's gate against its baseline is on its comparison page
        return redirect("evaluation-comparison", group=runs[0].group)
    return redirect("evaluation-dashboard")


@staff_member_required
@permission_needed("evaluation.view_evaluationrun")
@require_GET
def runs_status(request: HttpRequest) -> JsonResponse:
    ids, refused = queries.run_ids(request.GET)
    if refused:
        return JsonResponse({"error": "; ".join(refused)}, status=400)
    return JsonResponse({"runs": run_selectors.runs_by_ids(ids)})


def _run_or_404(run_id: str):
    run_services.runs_interrupt_stale_on_read()
    try:
        return run_selectors.run_lookup(run_id)
    except NotFound as exc:
        raise Http404(str(exc)) from None


def _message_rows(items):
    return [
        {
            "turn": m.turn,
            "role": m.role,
            "html": render_markdown(m.content),
            "decision": (m.metadata or {}).get("turn_decision"),
        }
        for m in items
    ]


def _run_title(run: Any) -> str:
    """A tutor run as people name it: its persona (or the stored session it evaluated) and its topic; the id is in
    the crumbs."""
    who = label(run.persona) if run.persona_id else "Stored session"
    return f"{who} · {label(run.topic)}" if run.topic_id else f"{who} · run {run.run_id}"


@staff_member_required
@permission_needed("evaluation.view_evaluationrun")
@require_GET
def run_report(request: HttpRequest, run_id: str) -> HttpResponse:
    run = _run_or_404(run_id)
    evaluation = selectors.run_evaluation(run)
    files = selectors.run_files(run)
    return _page(
        request,
        "evaluation/report.html",
        {
            "title": _run_title(run),
            "run": run,
            "evaluation": evaluation,
            "scores": list(evaluation["scores"].items()) if evaluation else [],
            "transcript": _message_rows(selectors.conversation(run)),
            "files": files,
            "usage": run_selectors.run_usage(run),
            "live_socket": _live_socket(),
            "labels": judging_selectors.run_labels(run, request.user) if evaluation else None,
            "coverage": selectors.run_coverage(run),
            "min_coverage": setting("MIN_COVERAGE"),
        },
    )


@staff_member_required
@permission_needed("evaluation.view_evaluationrun")
@require_GET
def run_live(request: HttpRequest, run_id: str) -> JsonResponse:
    """The run's status, the messages after message ?after=N (for the growing transcript) and its usage so
    far (the usage line as the page renders it: the meter is saved with each turn, like the messages)."""
    run = _run_or_404(run_id)
    after = request.GET.get("after") or "0"
    if not after.isdecimal() or len(after) > 9:  # a message number: digits only, no sign, no exponent
        return JsonResponse({"error": f"after: {after[:40]!r} is not a message number (0 or more)"}, status=400)
    rows = _message_rows(selectors.conversation(run).filter(turn__gt=int(after)))
    usage = render_to_string("evaluation/_usage.html", {"usage": run_selectors.run_usage(run)})
    return JsonResponse({"status": run_selectors.run_status(run), "messages": rows, "usage_html": usage})


@staff_member_required
@permission_needed("evaluation.view_evaluationrun")
@require_GET
def run_artifact(request: HttpRequest, run_id: str, name: str) -> FileResponse:
    run = _run_or_404(run_id)
    if name not in DOWNLOADABLE or not run.artifacts_dir:
        raise Http404(f"no file {name!r} for run {run.run_id}")
    path = Path(run.artifacts_dir) / name
    if not path.is_file():
        raise Http404(f"no file {name!r} for run {run.run_id}")
    return FileResponse(path.open("rb"), as_attachment=True, filename=f"{run.run_id}_{name}")


@staff_member_required
@permission_needed("evaluation.retry_run")
@require_POST
def run_retry(request: HttpRequest, run_id: str) -> HttpResponse:
    run = _run_or_404(run_id)
    try:
        services.run_retry_evaluation_start(run=run, user=request.user)
        messages.success(request, f"Re-evaluating {run.run_id}.")
    except (InvalidInput, Conflict) as exc:
        messages.error(request, f"Not re-evaluated: {exc}")
    return redirect("evaluation-run-report", run_id=run.run_id)


@staff_member_required
@permission_needed("evaluation.cancel_run")
@require_POST
def run_cancel(request: HttpRequest, run_id: str) -> HttpResponse:
    """Cancel a queued or running run (the run kernel's cancel, as the API's); back to the page it was asked
    from (the dashboard or the run's page)."""
    run = _run_or_404(run_id)
    try:
        run_services.run_cancel(run, user=request.user)
        messages.success(request, f"Cancelled {run.run_id}.")
    except Conflict as exc:
        messages.error(request, f"Not cancelled: {exc}")
    back = request.POST.get("next", "")
    if back and url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=False):
        return redirect(back)
    return redirect("evaluation-run-report", run_id=run.run_id)


@staff_member_required
@permission_needed("evaluation.start_run")
@require_POST
def run_again(request: HttpRequest, run_id: str) -> HttpResponse:
    """Simulate and evaluate again with the same persona, topic, target and settings (a new seed)."""
    run = _run_or_404(run_id)
    try:
        if run.source == RunSource.EXISTING_SESSION:
            new = services.session_evaluation_start(
                user=request.user, session_id=str(run.source_session_id), provider=run.config.get("provider") or None
            )
        else:
            new = services.run_start(
                user=request.user,
                topic_id=run.topic.topic_id if run.topic else "",
                persona=run.persona.persona_id if run.persona else "",
                max_turns=run.max_turns,
                agent_id=run.agent_id,
                provider=run.config.get("provider") or None,
                started_by="dashboard",
            )[0]
    except (InvalidInput, NotFound, Conflict) as exc:
        messages.error(request, f"Not started: {exc}")
        return redirect("evaluation-run-report", run_id=run.run_id)
    messages.success(request, f"Started {new.run_id}.")
    return redirect("evaluation-run-report", run_id=new.run_id)


def _labelled(
    series: dict[str, dict[str, float]], dimensions: list[str], names: dict[str, str] | None = None
) -> tuple[dict[str, dict[str, float]], list[str]]:
    """A chart's series and dimensions as people read them: personas by name, dimensions as words."""
    names = names or {}

    def series_name(key: str) -> str:
        first, sep, rest = key.partition(" · ")  # "<persona> · <judge>" when judges differ
        return (names.get(first) or first) + sep + rest

    return (
        {series_name(key): {label(d): v for d, v in values.items()} for key, values in series.items()},
        [label(d) for d in dimensions],
    )


def _dimension_key(key: str) -> str:
    """A time series' name, "<dimension>" or "<dimension> · <judge>", with the dimension as words."""
    first, sep, rest = key.partition(" · ")
    return label(first) + sep + rest


@staff_member_required
@permission_needed("evaluation.view_evaluationrun")
@require_GET
def comparison(request: HttpRequest, group: str) -> HttpResponse:
    ctx = selectors.comparison_context(group)
    if ctx is None:
        raise Http404(f"no comparison {group!r}")
    names = {p.persona_id: p.name for p in selectors.persona_list()}
    for row in ctx["rows"]:
        row["persona_name"] = names.get(row["persona_id"]) or label(row["persona_id"])
    ctx["persona_names"] = names
    # A group none of whose runs was judged (every run failed) has no chart and no root causes to show:
    # an empty chart with its legend, and "No problems identified", said what was never looked at.
    ctx["judged"] = any(row.get("avg") is not None for row in ctx["rows"])
    ctx["chart"] = grouped_bars(*_labelled(ctx["series"], ctx["dimensions"], names)) if ctx["judged"] else ""
    topic_ids = {r.get("topic") for row in ctx["rows"] for r in row["runs"] if isinstance(r, dict)} - {None, ""}
    topics = sorted(t.name for t in selectors.topic_list().filter(topic_id__in=topic_ids))
    # the CLI's group ids already say "comparison_..."
    name = group if group.startswith("comparison") else f"comparison {group}"
    ctx["title"] = (f"{', '.join(topics)}: " if topics else "") + name
    ctx["root_causes_json"] = json.dumps(ctx["root_causes"])
    total = sum(ctx["root_causes"].values()) or 1
    ctx["root_cause_rows"] = [(c, n, round(100 * n / total)) for c, n in ctx["root_causes"].items()]
    # Where people labelled runs of the group: the corrected estimates, from the judging room's reads.
    ctx["label_estimates"] = judging_selectors.comparison_estimates(
        group, ctx["baseline"]["id"] if ctx["baseline"] else None
    )
    return _page(request, "evaluation/comparison.html", ctx)


@staff_member_required
@permission_needed("evaluation.view_evaluationrun")
@require_GET
def suite_run(request: HttpRequest, run_id: str) -> HttpResponse:
    run = _run_or_404(run_id)
    if run.kind != "suite":
        raise Http404(f"{run_id!r} is not a suite run")
    results = suite_selectors.suite_results(run)
    cases = suite_selectors.suite_case_summaries(results)
    return _page(
        request,
        "evaluation/suite_run.html",
        {
            "title": f"Suite {run.suite_run.name} · {timezone.localtime(run.created_at):%Y-%m-%d %H:%M}",
            "run": run,
            "results": results,
            "cases": cases,
            "passed": sum(c["pass_k"] for c in cases),
            "judged_by": next((r["judged_by"] for r in results if r["judged_by"]), ""),
            "agent_model": next((r["agent_model"] for r in results if r["agent_model"]), ""),
        },
    )


@staff_member_required
@permission_needed("evaluation.view_evaluationrun")
@require_GET
def drift_index(request: HttpRequest) -> HttpResponse:
    return _page(
        request, "evaluation/drift_index.html", {"title": "Persona drift", "rows": drift_selectors.drift_index()}
    )


@staff_member_required
@permission_needed("evaluation.view_evaluationrun")
@require_GET
def drift_agent(request: HttpRequest, agent_id: str) -> HttpResponse:
    ctx = drift_selectors.drift_context(agent_id)
    if ctx is None:
        raise Http404(f"no agent {agent_id!r}")
    # the legend names a line as the table's header does ("Adherence", "Adherence · <judge>"), not by its id
    ctx["chart"] = (
        lines({_dimension_key(k): v for k, v in ctx["series"].items()}, ctx["labels"], times=ctx["moments"])
        if ctx["table"]
        else ""
    )
    ctx["title"] = f"Persona drift: {ctx['agent'].display_name}"
    return _page(request, "evaluation/drift_agent.html", ctx)


def _filter_query(filters: dict[str, str]) -> str:
    """The list's filters as a query string (blank ones left out), for its pages, charts and exports."""
    return urlencode({key: value for key, value in filters.items() if value})


@staff_member_required
@permission_needed("evaluation.view_evaluationrun")
@require_GET
def charts(request: HttpRequest) -> HttpResponse:
    """Scores of the runs the list's filters select: per dimension over time, per tutor version, per persona."""
    filters, refused = queries.run_filters(request.GET, paged=False)
    for problem in refused:
        messages.error(request, _in_words(problem))
    trends = selectors.score_trends(filters if not refused else NO_RUNS)
    has_data = bool(trends.runs)
    return _page(
        request,
        "evaluation/charts.html",
        {
            "title": "Score charts",
            "trends": trends,
            "filters": filters,
            "query": _filter_query(filters),
            "over_time": lines(
                {_dimension_key(k): v for k, v in trends.over_time.items()},
                trends.times,
                scale=10.0,
                label="Scores per dimension over time",
                times=trends.moments,
            )
            if has_data
            else "",
            "by_tutor": grouped_bars(*_labelled(trends.by_tutor, trends.dimensions), label="Scores per tutor version")
            if has_data
            else "",
            "by_persona": grouped_bars(
                *_labelled(
                    trends.by_persona, trends.dimensions, {p.persona_id: p.name for p in selectors.persona_list()}
                ),
                label="Scores per persona",
            )
            if has_data
            else "",
        },
        status=400 if refused else 200,
    )
