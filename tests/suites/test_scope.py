"""Suite files stay inside the suite folders, and a suite imports Python only from allowed packages."""

import json
import os
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluation.models import EvaluationRun, Suite
from evaluation.suites import load_file
from evaluation.suites.parser import SuiteError
from evaluation.suites.subjects import resolve_subject

from .test_runner_and_cache import responder

ROOT = Path(__file__).resolve().parents[2]
CASE = "## c\n### Prompt\np\n### Expect\ne\n"


@pytest.fixture
def folders(settings, tmp_path):
    """One suite folder (tmp_path/suites) and, beside it, a folder that is not one."""
    inside, outside = tmp_path / "suites", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    settings.EVALUATION = {**settings.EVALUATION, "SUITE_DIRS": [inside], "SUITE_TOOL_PACKAGES": []}
    return inside, outside


def test_a_suite_file_outside_the_suite_folders_is_refused(folders):
    inside, outside = folders
    (outside / "EVAL.md").write_text(CASE)
    with pytest.raises(SuiteError) as error:
        load_file(outside / "EVAL.md")
    message = str(error.value)
    assert message.startswith(f"{outside / 'EVAL.md'}: ") and "is outside the suite folders" in message
    assert str(inside) in message and "EVALUATION['SUITE_DIRS'] (EVAL_SUITE_DIRS)" in message
    (inside / "EVAL.md").write_text(CASE)
    assert [c.name for c in load_file(inside / "EVAL.md").cases] == ["c"]


def test_a_symlink_out_of_a_suite_folder_is_refused_by_where_it_resolves(folders):
    inside, outside = folders
    (outside / "secret.md").write_text(CASE)
    (inside / "leak.eval.md").symlink_to(outside / "secret.md")
    with pytest.raises(SuiteError, match=r"leak.eval.md \(it resolves to .*elsewhere/secret.md\) is outside"):
        load_file(inside / "leak.eval.md")
    # the same for a SKILL.md beside a suite that points out of the folder
    (outside / "SKILL.md").write_text("the secret skill")
    (inside / "SKILL.md").symlink_to(outside / "SKILL.md")
    (inside / "EVAL.md").write_text(CASE)
    with pytest.raises(SuiteError, match=r"EVAL.md: SKILL.md: .*SKILL.md \(it resolves to .*elsewhere/SKILL.md\)"):
        resolve_subject(load_file(inside / "EVAL.md"))


@pytest.mark.parametrize(
    "frontmatter, key",
    [
        ("skills: ../elsewhere/leaky", "skills"),
        ("agent: ../elsewhere/agent", "agent"),
        ("tools: ../elsewhere/tools.py:add", "tools"),
        ("module: ../elsewhere/tools.py", "module"),
    ],
)
def test_what_a_suite_names_must_lie_in_a_suite_folder_too(folders, frontmatter, key):
    inside, outside = folders
    (outside / "leaky").mkdir()
    (outside / "leaky" / "SKILL.md").write_text("secret")
    (outside / "agent").mkdir()
    (outside / "agent" / "AGENT.md").write_text("secret")
    ran = outside / "ran.txt"
    (outside / "tools.py").write_text(f"open({str(ran)!r}, 'w').close()\ndef add(a: int) -> int:\n    return a\n")
    (inside / "EVAL.md").write_text(f"---\n{frontmatter}\n---\n{CASE}")
    with pytest.raises(SuiteError) as error:
        resolve_subject(load_file(inside / "EVAL.md"))
    assert str(error.value).startswith(f"{inside / 'EVAL.md'}: {key}: ") and "outside the suite folders" in str(
        error.value
    )
    assert not ran.exists()  # refused before its code ran


def test_dotted_modules_only_from_allowed_packages(folders, settings):
    inside, _ = folders
    (inside / "EVAL.md").write_text(f"---\ntools: os:system\n---\n{CASE}")
    with pytest.raises(SuiteError) as error:
        resolve_subject(load_file(inside / "EVAL.md"))
    assert str(error.value) == (
        f"{inside / 'EVAL.md'}: tools: the module 'os' is not in an allowed package (allowed: none); add its "
        "package to EVALUATION['SUITE_TOOL_PACKAGES'] (EVAL_SUITE_TOOL_PACKAGES), or name a .py file inside a suite folder"
    )
    (inside / "EVAL.md").write_text(f"---\nskills: tests.suites.annotated_tools\n---\n{CASE}")
    with pytest.raises(SuiteError, match="skills: the module 'tests.suites.annotated_tools' is not in an allowed"):
        resolve_subject(load_file(inside / "EVAL.md"))
    # a package prefix is not a package: `tests.suitesX` is not inside `tests.suites`
    settings.EVALUATION = {**settings.EVALUATION, "SUITE_TOOL_PACKAGES": ["tests.suites"]}
    (inside / "EVAL.md").write_text(f"---\ntools: tests.suitesX:f\n---\n{CASE}")
    with pytest.raises(SuiteError, match="not in an allowed package"):
        resolve_subject(load_file(inside / "EVAL.md"))
    (inside / "EVAL.md").write_text(f"---\ntools: tests.suites.annotated_tools:plan_route\n---\n{CASE}")
    assert [t.name for t in resolve_subject(load_file(inside / "EVAL.md")).tools] == ["plan_route"]


def test_a_module_that_fails_to_import_names_the_file_key_and_reason(folders):
    inside, _ = folders
    (inside / "tools.py").write_text("raise RuntimeError('no database here')\n")
    (inside / "EVAL.md").write_text(f"---\ntools: tools.py:add\n---\n{CASE}")
    with pytest.raises(SuiteError) as error:
        resolve_subject(load_file(inside / "EVAL.md"))
    assert str(error.value) == f"{inside / 'EVAL.md'}: tools: cannot import tools.py (RuntimeError: no database here)"


def test_the_settings_name_both_lists_and_the_docs_describe_them():
    from django.conf import settings as django_settings

    assert "SUITE_TOOL_PACKAGES" in django_settings.EVALUATION
    docs = (ROOT / "docs" / "limits.md").read_text() + (ROOT / "README.md").read_text()
    for name in ("SUITE_DIRS", "EVAL_SUITE_DIRS", "SUITE_TOOL_PACKAGES", "EVAL_SUITE_TOOL_PACKAGES"):
        assert name in docs, name


@pytest.mark.django_db
def test_a_suite_run_never_reads_a_file_outside_the_suite_folders(
    folders, staff_client, q_sync, loopback, django_capture_on_commit_callbacks
):
    """The finding: a suite's stored path pointed anywhere and the run put that file in a prompt."""
    inside, outside = folders
    (outside / "EVAL.md").write_text("## leak\n### Prompt\nTOP-SECRET-LINE\n### Expect\ne\n")
    suite = Suite.objects.create(path=str(outside / "EVAL.md"), name="leak")
    loopback.responder = responder()
    model = f"openai/m@{loopback.openai_url}"
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            f"/api/suites/{suite.pk}/run",
            json.dumps({"model": model, "judge_model": model}),
            content_type="application/json",
        )
    assert response.status_code == 202
    run = EvaluationRun.objects.get(kind="suite")
    assert run.status == "failed" and "is outside the suite folders" in run.error and "EVAL.md" in run.error
    assert loopback.count() == 0 and not any("TOP-SECRET-LINE" in json.dumps(r.body) for r in loopback.requests)


@pytest.mark.django_db
def test_the_admin_refuses_a_suite_path_outside_the_suite_folders(folders, admin_client):
    inside, outside = folders
    (outside / "EVAL.md").write_text(CASE)
    (inside / "EVAL.md").write_text(CASE)
    call_command("discover_suites", str(inside), stdout=StringIO())
    suite = Suite.objects.get()
    form = {"path": str(outside / "EVAL.md"), "name": "x", "frontmatter": "{}"}
    form |= {"cases-TOTAL_FORMS": "0", "cases-INITIAL_FORMS": "0"}
    page = admin_client.post(f"/admin/evaluation/suite/{suite.pk}/change/", form)
    assert page.status_code == 200 and "is outside the suite folders" in page.content.decode()
    suite.refresh_from_db()
    assert suite.path != str(outside / "EVAL.md")


@pytest.mark.django_db
def test_discovery_reports_a_symlinked_suite_that_leaves_the_folder_and_stores_the_others(folders):
    inside, outside = folders
    (outside / "x.md").write_text(CASE)
    os.symlink(outside / "x.md", inside / "x.eval.md")
    (inside / "EVAL.md").write_text(CASE)
    err = StringIO()
    with pytest.raises(Exception, match="1 suite file"):
        call_command("discover_suites", str(inside), stdout=StringIO(), stderr=err)
    assert "x.eval.md (it resolves to" in err.getvalue() and "is outside the suite folders" in err.getvalue()
    assert [s.name for s in Suite.objects.all()] == ["suites"]
