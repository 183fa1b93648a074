"""EVAL.md suites (spec 003): suites, their cases, case results and the pass cache."""

from pathlib import PurePosixPath

from django.db import models

from evaluation.models.runs import EvaluationRun


class Suite(models.Model):
    """An EVAL.md file found on disk."""

    path = models.CharField(max_length=500, unique=True)
    name = models.CharField(max_length=200)
    frontmatter = models.JSONField(default=dict, blank=True)
    discovered_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["path"]

    def __str__(self) -> str:
        return self.name


class Case(models.Model):
    """One `## ` case of a suite: a prompt and the rubric it is judged against."""

    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="cases")
    name = models.CharField(max_length=300)
    prompt = models.TextField()
    expect = models.TextField()
    line = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["suite", "line"]
        constraints = [models.UniqueConstraint(fields=["suite", "name"], name="case_unique_in_suite")]

    def __str__(self) -> str:
        return self.name


class SuiteRun(models.Model):
    """Which suite a suite run ran, and with which models."""

    run = models.OneToOneField(EvaluationRun, on_delete=models.CASCADE, primary_key=True, related_name="suite_run")
    suite = models.ForeignKey(Suite, null=True, on_delete=models.SET_NULL, related_name="runs")
    suite_path = models.CharField(max_length=500, help_text="The suite's path when the run started.")
    model = models.CharField(max_length=300, blank=True, help_text="Agent model override.")
    judge_model = models.CharField(max_length=300, blank=True)
    judge = models.BooleanField(default=True)
    repeats = models.PositiveSmallIntegerField(default=1, help_text="Times each case is run (pass^k needs all k).")

    class Meta:
        verbose_name = "suite run"

    def __str__(self) -> str:
        return f"suite {self.name}"

    @property
    def name(self) -> str:
        """The suite as people name it: its folder ("greeter"), folder and stem for a named suite file
        ("fractions/tools" for skills/fractions/tools.eval.md), a module's stem for a module's own suite."""
        path = PurePosixPath(self.suite_path.split("::", 1)[0])
        file = path.name
        if file.upper() == "EVAL.MD":
            return path.parent.name or file
        if file.lower().endswith(".eval.md"):
            stem = file[: -len(".eval.md")]
            return f"{path.parent.name}/{stem}" if path.parent.name else stem
        return path.stem or self.suite_path


class CaseResult(models.Model):
    """What one case did in one suite run."""

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="case_results")
    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="results")
    passed = models.BooleanField()
    cached = models.BooleanField(default=False)
    checks = models.JSONField(default=list, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    transcript = models.JSONField(default=dict, blank=True)
    usage = models.JSONField(default=dict, blank=True)
    duration_ms = models.FloatField(default=0.0)
    fingerprint = models.CharField(max_length=64, blank=True)
    agent_model = models.CharField(max_length=300, blank=True, help_text="The agent's provider/model as it ran.")
    judge_model = models.CharField(
        max_length=300, blank=True, help_text="The judge's provider/model as it ran; empty when the judge was off."
    )
    repeat = models.PositiveSmallIntegerField(default=1, help_text="Which of the run's repeats (1 to k).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "case", "repeat"]

    def __str__(self) -> str:
        return f"{self.case}: {'pass' if self.passed else 'fail'}"


class CacheEntry(models.Model):
    """A recorded pass for one scope fingerprint; failures are never stored."""

    fingerprint = models.CharField(max_length=64, unique=True)
    case_name = models.CharField(max_length=300)
    suite_path = models.CharField(max_length=500)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "cache entries"

    def __str__(self) -> str:
        return f"{self.case_name} ({self.fingerprint[:12]})"
