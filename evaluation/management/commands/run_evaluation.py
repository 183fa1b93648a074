"""CLI: simulate students against a tutor, judge the conversations and write the reports.

The reference tutor runs on a server of the command's own (uvicorn on a free port, for the batch),
unless the command is told which server to use: --server-url, --skip-server (the SERVER_URL setting),
or EVAL_SERVER_URL set in the environment. A server it is told to use must be this install's: one
that refuses this install's protocol key stops the command before any run starts.
"""

import argparse
import json
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluation.conf import setting
from evaluation.errors import Conflict, InvalidInput, NotFound
from evaluation.management.progress import RunProgress
from evaluation.models import Agent, Topic
from evaluation.providers import VENDORS, require_keys, resolve
from evaluation.runs.selectors import run_scores, run_status_counts
from evaluation.runs.services import BatchStopped
from evaluation.tutoring import selectors, services
from evaluation.tutoring.selectors import DIMENSIONS

INCONCLUSIVE_STATUS = 3
"""The exit status of a batch whose gate is inconclusive (0: pass; 1: regression, failure, or not compared)."""

SOURCES = {"override": "--provider", "database": "admin LLM config", "environment": "environment", "default": "default"}


class Command(BaseCommand):
    help = "Run tutor evaluations: simulated personas talk to a tutor, a judge scores them, reports are written."

    def add_arguments(self, parser):
        parser.add_argument("--topic-id", help="Topic id (default: the first approved topic)")
        parser.add_argument("--persona", default="average_student.json", help="Persona file or id, or 'all'")
        parser.add_argument("--runs-per-persona", type=int, default=1, help="Repeats per persona, for noise reduction")
        parser.add_argument(
            "--skip-server",
            action="store_true",
            help="Use the running server at EVAL_SERVER_URL instead of starting one (it must be this install's)",
        )
        parser.add_argument(
            "--server-url",
            default=None,
            help="Use the reference tutor's server at this URL instead of starting one (it must be this install's)",
        )
        parser.add_argument("--max-turns", type=int, default=20)
        parser.add_argument(
            "--grade", type=int, default=None, help="The simulated student's grade (default: the persona's own)"
        )
        parser.add_argument(
            "--provider",
            default=None,
            help="Provider for simulator and judge, e.g. offline, openai, anthropic/claude-sonnet-4-6",
        )
        parser.add_argument(
            "--seed", type=int, default=None, help="Seed: the same seed replays the same turn decisions"
        )
        parser.add_argument(
            "--target", default=None, help="Agent id of the tutor under test (default: the reference tutor)"
        )
        parser.add_argument("--workers", type=int, default=1, help="Runs at a time in this process")
        parser.add_argument("--turn-timeout", type=float, default=90.0)
        parser.add_argument(
            "--cost-limit", type=float, default=None, help="Stop a run when its estimated cost reaches this (USD)"
        )
        parser.add_argument(
            "--baseline",
            default=None,
            help="A comparison group (or run) id to check this batch against; regressions make the command fail",
        )
        parser.add_argument(
            "--regression-threshold",
            type=float,
            default=1.0,
            help="The drop that matters: the gate must be able to see it (else it is inconclusive)",
        )
        parser.add_argument(
            "--threshold",
            dest="regression_threshold",
            type=float,
            default=argparse.SUPPRESS,
            help="The same as --regression-threshold: the drop the gate (and --plan) must be able to see",
        )
        parser.add_argument(
            "--regression-rule",
            choices=["noise-aware", "fixed"],
            default="noise-aware",
            help="noise-aware (default): one t test per dimension of the batch mean's change, Holm over the "
            "dimensions at --alpha; inconclusive (exit status 3) when a drop of the threshold had less than --power "
            "power; fixed: any dimension whose batch mean dropped beyond the threshold",
        )
        parser.add_argument(
            "--alpha", type=float, default=0.05, help="The gate's false-alarm rate over all its dimensions"
        )
        parser.add_argument(
            "--power", type=float, default=0.8, help="The chance of seeing a drop of the threshold's size"
        )
        parser.add_argument(
            "--plan",
            action="store_true",
            help="Print how many runs per persona detect a drop of the threshold (from --baseline's repeats, or "
            "the latest comparable group's), what they cost and how long they take; start nothing",
        )
        parser.add_argument("--json", action="store_true", help="With --plan: print the plan as JSON")
        parser.add_argument(
            "--force-baseline",
            action="store_true",
            help="Compare with a baseline that does not match (judge, prompt, rubric, topic, personas, max turns) "
            "anyway; the comparison is labelled forced",
        )

        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Print the calls, tokens and price (direct and by batch) these runs would take, from their prompts' "
            "sizes and today's price table; create no run, start no server and send nothing",
        )

    stealth_options = ("own_server",)
    """own_server: a started ServerProcess of this install's, for a caller that started it earlier
    (the demo, while it prepares the database); the caller stops it."""

    def handle(self, *args, **opts):
        if opts["plan"]:
            self.print_plan(opts)
            return
        if opts["dry_run"]:
            self.print_forecast(opts)
            return
        with _signals_stop_the_batch():
            self.run_with_server(opts)

    def run_with_server(self, opts) -> None:
        told = self.told_server(opts)
        reference = self.needs_reference_server(opts["target"])
        given: services.ServerProcess | None = opts.get("own_server")
        # booting takes seconds: it goes on while the command checks its input
        own = given or (
            services.ServerProcess(services.own_server_env()).start() if told is None and reference else None
        )
        try:
            self.check_input(opts)
            url = told
            if own is not None:
                try:
                    url = own.wait()
                except services.TutorUnavailable as exc:
                    raise CommandError(f"the command's own tutor server did not start: {exc}") from exc
            elif told is not None and reference:
                try:
                    services.check_install(told)
                except services.ForeignServer as exc:
                    raise CommandError(str(exc)) from exc
            self.run_batch(opts, url, own_tutor=own is not None)
        finally:
            if own is not None and own is not given:
                own.stop()

    def print_forecast(self, opts) -> None:
        topic_id = opts["topic_id"] or Topic.objects.filter(approved=True).values_list("topic_id", flat=True).first()
        if not topic_id:
            raise CommandError("--topic-id: no approved topic is loaded; run manage.py load_catalog first")
        try:
            found = services.run_forecast(
                topic_id=topic_id,
                persona=opts["persona"],
                max_turns=opts["max_turns"],
                runs_per_persona=opts["runs_per_persona"],
                agent_id=opts["target"],
                provider=opts["provider"],
                grade=opts["grade"],
            )
        except (InvalidInput, NotFound) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"Dry run on topic {topic_id!r}: nothing was created or sent.")
        self.stdout.write(found.text())

    def print_plan(self, opts) -> None:
        """The planner: runs per persona for the threshold at --alpha and --power, their cost and time."""
        topic_id = opts["topic_id"] or Topic.objects.filter(approved=True).values_list("topic_id", flat=True).first()
        if not topic_id:
            raise CommandError("--topic-id: no approved topic is loaded; run manage.py load_catalog first")
        try:
            found = services.run_plan(
                topic_id=topic_id,
                persona=opts["persona"],
                max_turns=opts["max_turns"],
                agent_id=opts["target"],
                provider=opts["provider"],
                grade=opts["grade"],
                baseline=opts["baseline"],
                threshold=opts["regression_threshold"],
                alpha=opts["alpha"],
                power=opts["power"],
                workers=opts["workers"],
            )
        except (InvalidInput, NotFound) as exc:
            raise CommandError(str(exc)) from exc
        if opts["json"]:
            self.stdout.write(json.dumps(found, indent=2))
        else:
            self.stdout.write(found["text"])

    def told_server(self, opts) -> str | None:
        """The server the command was told to use, or None: start one of its own."""
        if opts.get("own_server"):
            return None
        if opts["server_url"]:
            return opts["server_url"].rstrip("/")
        if opts["skip_server"] or os.environ.get("EVAL_SERVER_URL"):
            return str(setting("SERVER_URL")).rstrip("/")
        return None

    def needs_reference_server(self, target: str | None) -> bool:
        if not target:
            return True
        agent = Agent.objects.filter(pk=target).first()
        return agent is None or agent.kind == Agent.Kind.REFERENCE

    def check_input(self, opts) -> None:
        """Refuse what would fail every run, before any is created (opts["topic_id"] gets its default)."""
        topic_id = opts["topic_id"] or Topic.objects.filter(approved=True).values_list("topic_id", flat=True).first()
        if not topic_id:
            raise CommandError("--topic-id: no approved topic is loaded; run manage.py load_catalog first")
        opts["topic_id"] = topic_id
        try:
            missing = require_keys(["simulator", "judge"], opts["provider"])
        except ValueError as exc:
            raise CommandError(f"--provider: {exc}") from exc
        if self.told_server(opts) is None and self.needs_reference_server(opts["target"]):
            missing += require_keys(["tutor"])  # the command's own server runs the reference tutor with these settings
        if missing:
            raise CommandError("missing API keys:\n  " + "\n  ".join(missing))

    def run_batch(self, opts, url: str | None, *, own_tutor: bool) -> None:
        self.stdout.write(self.providers_line(opts["provider"], url, own_tutor=own_tutor))
        topic_id = opts["topic_id"]
        try:
            runs = services.run_start(
                topic_id=topic_id,
                persona=opts["persona"],
                max_turns=opts["max_turns"],
                runs_per_persona=opts["runs_per_persona"],
                seed=opts["seed"],
                agent_id=opts["target"],
                provider=opts["provider"],
                turn_timeout=opts["turn_timeout"],
                cost_limit_usd=opts["cost_limit"],
                grade=opts["grade"],
                baseline=opts["baseline"],
                regression_threshold=opts["regression_threshold"],
                regression_rule=opts["regression_rule"],
                force_baseline=opts["force_baseline"],
                alpha=opts["alpha"],
                power=opts["power"],
                enqueue=False,
                started_by="cli",
                tutor_here=own_tutor,
            )
        except (InvalidInput, NotFound, Conflict) as exc:
            raise CommandError(str(exc)) from exc
        for warning in runs[0].config.get("catalog_warnings", []) if runs else []:
            self.stderr.write(f"warning: {warning}")
        self.stdout.write(f"Starting {len(runs)} run(s) on topic {topic_id!r} ({opts['workers']} at a time)...")
        labels = {
            r.run_id: (r.persona.persona_id if r.persona else r.run_id)
            + (f" r{r.repeat_index}" if r.group and r.repeat_index > 1 else "")
            for r in runs
        }
        try:
            with RunProgress(self.stdout, labels) as progress:
                done = services.runs_execute_here(
                    runs,
                    workers=opts["workers"],
                    server_url=url,
                    manage_server=False,
                    listener=progress,
                )
        except (KeyboardInterrupt, BatchStopped, BrokenPipeError) as exc:
            # runs_execute_here has cancelled the runs it had not ended; the caller stops the server
            ended = run_status_counts([r.pk for r in runs])
            counts = ", ".join(f"{n} {status}" for status, n in sorted(ended.items()))
            code = exc.returncode if isinstance(exc, BatchStopped) else 130 if isinstance(exc, KeyboardInterrupt) else 1
            why = str(exc) if isinstance(exc, BatchStopped) else "the batch was interrupted (SIGINT, Ctrl-C)"
            if isinstance(exc, BrokenPipeError):
                why = "the output pipe was closed"
            raise CommandError(f"stopped: {why}; its {len(runs)} run(s): {counts}", returncode=code) from exc
        self.print_table(done)
        problems = []
        failed = [r for r in done if r.status != "completed"]
        if failed:
            problems.append(f"{len(failed)} run(s) failed: " + "; ".join(f"{r.run_id}: {r.error}" for r in failed))
        inconclusive: list[str] = []
        if opts["baseline"]:
            problems += self.print_gates({r.group for r in done if r.group}, opts["baseline"], inconclusive)
        if problems:
            raise CommandError("\n".join(problems + inconclusive))
        if inconclusive:
            raise CommandError("\n".join(inconclusive), returncode=INCONCLUSIVE_STATUS)

    def providers_line(self, override: str | None, url: str | None, *, own_tutor: bool) -> str:
        """One line: the provider each role uses, where that choice comes from, and how to choose another;
        a vendor key that is set but unused (the default is offline, whatever keys are set) is named.
        The tutor's is known for the command's own server only: another server resolves its own."""
        roles = {role: resolve(role, override) for role in ("simulator", "judge")}
        if own_tutor:
            roles["tutor"] = resolve("tutor")
        specs = list(roles.values())
        by_label: dict[str, list[tuple[str, str]]] = {}
        for role, spec in roles.items():
            by_label.setdefault(spec.label, []).append((role, SOURCES.get(spec.source, spec.source)))
        groups = []
        for label, chosen in by_label.items():
            by_source: dict[str, list[str]] = {}
            for role, source in chosen:
                by_source.setdefault(source, []).append(role)
            parts = [f"{_and(names)} ({source})" for source, names in by_source.items()]
            groups.append(f"{label} for {', '.join(parts)}")
        line = ("Provider: " if len(groups) == 1 else "Providers: ") + "; ".join(groups)
        if url is not None and not own_tutor:
            line += f"; the tutor is the server at {url}"
        # a key is used when any role's vendor reads it (anthropic and anthropic-haiku share one)
        used = {VENDORS[s.provider].key_env for s in specs if s.provider in VENDORS}
        unused = [
            name
            for name, vendor in VENDORS.items()
            if vendor.key_env and os.environ.get(vendor.key_env) and vendor.key_env not in used
        ]
        if all(s.provider == "offline" for s in specs) and any(s.source == "default" for s in specs) and unused:
            key = VENDORS[unused[0]].key_env
            return (
                f"{line}. {key} is set, but no LLM is called unless a provider is chosen: "
                f"--provider {unused[0]}, or EVAL_LLM_PROVIDER={unused[0]} (simulator, judge and tutor)."
            )
        return (
            f"{line}. Choose another with --provider (simulator and judge), EVAL_LLM_PROVIDER (all three) "
            "or TUTOR_LLM_PROVIDER (the tutor); offline calls no LLM."
        )

    def print_gates(self, groups, baseline, inconclusive):
        """Print each group's gate against its baseline; returns why the command must fail (a regression, or
        nothing compared), empty when every gate passed or was inconclusive (added to `inconclusive`)."""
        problems = []
        for group in sorted(groups):
            gate = selectors.group_gate(group)
            if gate is None:
                problems.append(f"{group}: no baseline recorded")
                continue
            forced = " (FORCED: the baseline does not match)" if gate.forced else ""
            self.stdout.write(f"\nAgainst baseline {gate.baseline}{forced}: {gate.outcome.upper()}")
            for why in gate.mismatches:
                self.stdout.write(f"  forced: {why}")
            self.stdout.write(f"  {gate.reason}")
            self.stdout.write(f"  rule: {gate.family_rule}")
            for t in gate.tests:
                mark = "REGRESSION" if t in gate.regressions else "ok"
                self.stdout.write(f"  {t.dimension:<22}{mark:<11}{test_line(t)}")
            flagged = [v for v in gate.verdicts if v.flagged]
            if flagged:
                self.stdout.write(f"  diagnostics (decide nothing): {len(flagged)} persona row(s) beyond the threshold")
                for v in flagged:
                    self.stdout.write(f"    {v.persona_id:<22}{v.dimension:<22}{v.why}")
            for why in gate.left_out:
                self.stdout.write(f"  left out: {why}")
            for persona in gate.no_baseline:
                self.stdout.write(f"  no baseline for persona {persona}")
            if gate.outcome == "inconclusive":
                inconclusive.append(f"against {gate.baseline}: inconclusive: {gate.reason}")
            elif gate.outcome != "pass":
                problems.append(f"against {gate.baseline}: {gate.outcome}: {gate.reason}")
        if not groups:
            problems.append(f"no comparison with baseline {baseline}: no batch was checked")
        return problems

    def print_table(self, runs):
        header = (
            f"{'persona':<22}"
            + "".join(f"{d.short:>6}" for d in DIMENSIONS.values())
            + f"{'avg':>7}{'turns':>7}  status"
        )
        self.stdout.write("\n" + header)
        self.stdout.write("-" * len(header))
        for run in runs:
            scores = run_scores(run)
            cells = "".join(f"{scores[d]:>6g}" if d in scores else f"{'-':>6}" for d in DIMENSIONS)
            avg = f"{run.overall_score:>7.2f}" if run.overall_score is not None else f"{'-':>7}"
            name = run.persona.persona_id + (f" r{run.repeat_index}" if run.group and run.repeat_index > 1 else "")
            self.stdout.write(f"{name:<22}{cells}{avg}{run.turn:>7}  {run.status}")
        judge = runs[0].judge_label if runs else ""
        if judge.startswith("offline"):
            self.stdout.write(
                "\nScores come from the offline rule-based judge (no LLM); set a provider for an LLM judge."
            )
        self.stdout.write(
            f"\nReports: {Path(setting('RUNS_DIR'))}/<run_id>/ (review.md, problems.md, conversation.md, ...)"
        )
        groups = {r.group for r in runs if r.group}
        for group in groups:
            self.stdout.write(f"Comparison: {Path(setting('RUNS_DIR')) / group / 'comparison.md'}")


def test_line(t) -> str:
    """One dimension's test as the CLI prints it."""
    if t.mdd is None:
        return f"change {t.delta:+.2f}; no spread estimate"
    return (
        f"change {t.delta:+.2f} [{t.low:+.2f}, {t.high:+.2f}], SE {t.se:.2f}, df {t.df}, p {t.p_value:.2g}, "
        f"detects drops >= {t.mdd:.2f}" + (" (spread floored)" if t.floored else "")
    )


@contextmanager
def _signals_stop_the_batch() -> Iterator[None]:
    """SIGTERM (systemd's and docker's stop) and SIGHUP (a closed terminal) stop the batch as Ctrl-C does:
    the run in progress fails saying so, those not started are cancelled, the command's own server stops.
    Without a handler Python dies on the spot and leaves its runs queued and its server running. A second
    signal while the batch cleans up is ignored. Only the main thread can set handlers (tests call the
    command from others)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        raise BatchStopped(f"the batch was stopped by {signal.Signals(signum).name}", 128 + signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
