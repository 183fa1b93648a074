"""The admin site: its index groups models by what staff do there, and leaves internal tables out of it.

Installed as the default admin site (`EvaluationAdminConfig` in INSTALLED_APPS), the documented way to
change `admin.site`. Hidden models keep their pages (a run's messages, a set's propositions are edited
inline or reached from their parent); a model in no group is listed under "Other", never lost.
"""

import threading
from typing import Any

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.template.loader import render_to_string
from django.urls import get_script_prefix, reverse
from django.utils.safestring import SafeString
from django.utils.translation import get_language

GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Catalogue",
        ("evaluation.Persona", "evaluation.Topic", "evaluation.Agent", "evaluation.LLMConfig", "evaluation.ModelPrice"),
    ),
    (
        "Runs and reports",
        (
            "evaluation.EvaluationRun",
            "evaluation.CompletedRun",
            "evaluation.FailedRun",
            "evaluation.TutoringSession",
            "evaluation.BaselineGate",
        ),
    ),
    (
        "Drift",
        (
            "evaluation.PropositionSet",
            "evaluation.Baseline",
            "evaluation.DriftRun",
            "evaluation.PropositionScore",
            "evaluation.CorrectionLog",
            "evaluation.AgentMessage",
        ),
    ),
    ("Suites", ("evaluation.Suite", "evaluation.SuiteRun", "evaluation.CacheEntry")),
    (
        "Access",
        (
            "auth.User",
            "auth.Group",
            "authtoken.TokenProxy",
            "evaluation.EndpointCredential",
            "axes.AccessAttempt",
            "axes.AccessFailureLog",
        ),
    ),
    (
        "Background work",
        (
            "django_q.Schedule",
            "django_q.Failure",
            "django_q.Success",
            "evaluation.ProviderBatch",
            "evaluation.RateLimitBudget",
        ),
    ),
    (
        "Judging",
        (
            "evaluation.JudgeConfiguration",
            "evaluation.Transcript",
            "evaluation.Annotation",
            "evaluation.Item",
            "evaluation.JudgeScore",
            "evaluation.Rubric",
            "evaluation.RubricVersion",
            "evaluation.RubricDimension",
            "evaluation.CanarySet",
            "evaluation.LabelQueue",
            "evaluation.QueueItem",
            "evaluation.QueueLabel",
            "evaluation.Adjudication",
        ),
    ),
)
"""Index sections in order, each with its models in order ("app_label.ObjectName")."""

HIDDEN = frozenset(
    {
        "evaluation.RunMessage",  # inline on a run
        "evaluation.RunEvent",  # inline on a run
        "evaluation.DimensionScore",  # inline on a run
        "evaluation.Problem",  # inline on a run
        "evaluation.Proposition",  # inline on its proposition set
        "evaluation.AgentEvaluationConfig",  # inline on its agent
        "evaluation.Case",  # read from its suite
        "evaluation.CaseResult",  # inline on a suite run
        "django_q.OrmQ",  # the ORM broker's queue
        "axes.AccessLog",  # every login, kept for audits
    }
)
"""Internal tables: registered (their pages open), but not listed on the index."""

PAGES: tuple[tuple[str, str, str, str | None, str], ...] = (
    (
        "Dashboard",
        "evaluation-dashboard",
        "",
        "evaluation.view_evaluationrun",
        "Start runs, follow them live, read reports and comparisons.",
    ),
    (
        "Charts",
        "evaluation-charts",
        "",
        "evaluation.view_evaluationrun",
        "Scores over time, per tutor and per persona.",
    ),
    (
        "Judge cards",
        "evaluation-judging",
        "",
        "evaluation.view_judgescore",
        "How far each judge agrees with people; import labelled conversations.",
    ),
    (
        "Persona drift",
        "evaluation-drift-index",
        "",
        "evaluation.view_evaluationrun",
        "Each character agent's drift scores, baseline and corrections.",
    ),
    (
        "Suite runs",
        "evaluation-dashboard",
        "?source=suite",
        "evaluation.view_evaluationrun",
        "EVAL.md suites: pass rates per case and repeat.",
    ),
    ("API docs", "api-docs", "", None, "The REST API, to try in the browser (Swagger UI)."),
    ("API reference", "api-redoc", "", None, "The same API as one readable page (ReDoc)."),
)
"""The site's own pages (name, URL name, query, permission or None, what is there), linked from the admin
index and the navigation sidebar of every page, so each page is one click from every other."""


class EvaluationAdminSite(admin.AdminSite):
    site_header = "Agent evaluation"
    site_title = "Agent evaluation"
    index_title = "What staff do here"

    def __init__(self, name: str = "admin") -> None:
        super().__init__(name)
        self._app_lists: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        self._sidebars: dict[tuple[Any, ...], SafeString] = {}
        self._pages: dict[tuple[Any, ...], list[dict[str, str]]] = {}
        self._kept_lock = threading.Lock()

    KEPT = 256
    """Permission sets (and languages) whose sections and sidebar are kept; all are dropped beyond it."""

    def get_app_list(self, request: Any, app_label: str | None = None) -> list[dict[str, Any]]:
        """The index's sections. Every admin page builds them for its navigation sidebar, and building
        them takes a permission check and two URL reversals per model (a sixth of a report page), so
        they are built once per set of permissions and kept: what a user may see depends on nothing
        else (no ModelAdmin here decides by anything but permissions). A change of a user's
        permissions changes the key, so it shows on the next page. Read-only for callers."""
        if app_label is not None:  # one app's own index page keeps Django's layout
            return super().get_app_list(request, app_label)
        key = self._permission_key(request)
        cached = self._app_lists.get(key)
        if cached is None:
            cached = self._sections(request)
            self._keep(self._app_lists, key, cached)
        return cached

    def each_context(self, request: Any) -> dict[str, Any]:
        """Every admin page's context, with the site's own pages for the index and the sidebar."""
        context = super().each_context(request)
        context["site_pages"] = self.site_pages(request)
        return context

    def site_pages(self, request: Any) -> list[dict[str, str]]:
        """The site's pages this user may open (none for anyone who is not active staff), in PAGES' order."""
        user = request.user
        if not (user.is_active and user.is_staff):
            return []
        key = self._permission_key(request)
        pages = self._pages.get(key)
        if pages is None:
            pages = [
                {"name": name, "url": reverse(url_name) + query, "description": description}
                for name, url_name, query, perm, description in PAGES
                if perm is None or user.has_perm(perm)
            ]
            self._keep(self._pages, key, pages)
        return pages

    def nav_sidebar(self, request: Any) -> SafeString:
        """The navigation sidebar of a page that is no model's page (the dashboard and reports), rendered
        once per set of permissions and language: no entry in it is marked as the current one."""
        key = (*self._permission_key(request), get_language())
        html = self._sidebars.get(key)
        if html is None:
            html = render_to_string(
                "admin/nav_sidebar.html",
                {"available_apps": self.get_app_list(request), "site_pages": self.site_pages(request)},
            )
            self._keep(self._sidebars, key, html)
        return html

    @staticmethod
    def _permission_key(request: Any) -> tuple[Any, ...]:
        user = request.user
        perms = ("superuser",) if user.is_active and user.is_superuser else tuple(sorted(user.get_all_permissions()))
        return (get_script_prefix(), perms)

    def _keep(self, kept: dict[Any, Any], key: Any, value: Any) -> None:
        with self._kept_lock:
            if len(kept) >= self.KEPT:
                kept.clear()
            kept[key] = value

    def _sections(self, request: Any) -> list[dict[str, Any]]:
        models: dict[str, dict[str, Any]] = {}
        for app in self._build_app_dict(request).values():
            for model in app["models"]:
                models[f"{app['app_label']}.{model['object_name']}"] = model
        sections = []
        placed = set(HIDDEN)
        for name, members in GROUPS:
            placed.update(members)
            sections.append((name, [models[m] for m in members if m in models]))
        sections.append(("Other", sorted((m for k, m in models.items() if k not in placed), key=lambda m: m["name"])))
        return [
            {
                "name": name,
                "app_label": name.lower().replace(" ", "-"),
                "app_url": entries[0]["admin_url"],
                "has_module_perms": True,
                "models": entries,
            }
            for name, entries in sections
            if entries
        ]


class EvaluationAdminConfig(AdminConfig):
    """django.contrib.admin with EvaluationAdminSite as `admin.site`."""

    default_site = "evaluation.adminsite.EvaluationAdminSite"
