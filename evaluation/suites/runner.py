"""Run EVAL.md cases: a fresh agent per case, the completion check, then the verdict judge."""

import time
from dataclasses import dataclass, field
from typing import Any

from evaluation.providers import LLM, Meter, ProviderError, get_llm
from evaluation.providers.registry import ProviderSpec, resolve, resolve_without_db
from evaluation.suites.agent import Transcript, run_agent
from evaluation.suites.cache import PassCache, fingerprint
from evaluation.suites.judge import judge_transcript
from evaluation.suites.parser import EvalCase, EvalSuite
from evaluation.suites.repeats import CaseSummary, summarize
from evaluation.suites.subjects import Subject, resolve_subject


@dataclass
class RunOptions:
    model: str | None = None
    """Provider for the agent ('openai/gpt-5.2', 'anthropic:claude-sonnet-4-6'); wins over frontmatter."""
    judge_model: str | None = None
    judge: bool = True
    cache: PassCache | None = None
    timeout: float = 120.0
    use_db: bool = True
    """Read role configuration from the database (off inside pytest items, which have none)."""
    repeats: int = 1
    """Times each case runs; above 1 a case passes only when all repeats do (pass^k), and the cache
    is neither read nor written (a cached pass would stand in for every repeat)."""


@dataclass
class Check:
    name: str
    passed: bool
    detail: str = ""


@dataclass
class CaseResult:
    suite: str
    case: str
    checks: list[Check] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    transcript: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    duration_ms: float = 0.0
    cached: bool = False
    fingerprint: str = ""
    agent_model: str = ""
    """The agent's provider/model as it ran (or as named, when it could not be built)."""
    judge_model: str = ""
    """The judge's provider/model; empty when the judge was off."""
    repeat: int = 1
    """Which repeat of the case this is (1 to RunOptions.repeats)."""

    @property
    def judged_by(self) -> str:
        """Which judge gave the verdict, in words a report can print."""
        return judge_description(self.judge_model)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    def failure_message(self) -> str:
        repeat = f" (repeat {self.repeat})" if self.repeat > 1 else ""
        lines = [f"{self.suite}: {self.case}{repeat}"]
        lines += [f"  FAILED {c.name}: {c.detail}" for c in self.checks if not c.passed]
        lines.append(f"  agent: {self.agent_model}; judge: {self.judged_by}")
        t = self.transcript
        if t:
            lines += ["  --- transcript ---", f"  prompt: {t.get('prompt', '')}"]
            for call in t.get("tool_calls", []):
                lines.append(f"  tool {call['name']}({call['arguments']}) -> {call.get('result', call.get('error'))}")
            lines.append(f"  response: {t.get('response', '')}")
        return "\n".join(lines)


def model_spec(value: str | None) -> ProviderSpec | None:
    """A model named by the run or the frontmatter ('provider:model' or 'provider/model'), if any."""
    return ProviderSpec.parse(value) if value else None


CLI_JUDGE_HINT = "pass --judge-model for an LLM judge"
PYTEST_JUDGE_HINT = "pass --eval-judge-model for an LLM judge"
WEB_JUDGE_HINT = "name a judge model when starting the run, or set the Suite Judge role's LLM config in the admin"


def judge_description(label: str, hint: str = CLI_JUDGE_HINT) -> str:
    """'offline rule-based judge (no judge model set: <hint>)', 'openai/gpt-5.2', or 'off'. The hint
    says how to get an LLM judge where the reader is: a flag on the command line, a field or the
    role's LLM config on the web and the API."""
    if not label:
        return "off (completion check only)"
    if label.split("/")[0] == "offline":
        return f"offline rule-based judge (no judge model set: {hint})"
    return label


def _build(role: str, choice: str | None, options: RunOptions, meter: Meter) -> tuple[LLM | None, str]:
    """(the role's LLM, "") or (None, why it could not be built): an unknown provider, a missing key."""
    try:
        spec = model_spec(choice) or (resolve(role) if options.use_db else resolve_without_db(role))
        llm = get_llm(role, override=spec, meter=meter)
    except (ValueError, ProviderError) as exc:
        return None, str(exc)
    llm.timeout = options.timeout
    return llm, ""


def model_check(role: str, choice: str, options: RunOptions) -> None:
    """Raise (ValueError or ProviderError, naming the key) when a model named for a whole run cannot
    be built: that is the run's mistake, for every case alike, so the run fails before it starts."""
    _, problem = _build(role, choice, options, Meter())
    if problem:
        raise ProviderError(f"{role}: {problem}")


def run_case(
    suite: EvalSuite,
    case: EvalCase,
    options: RunOptions | None = None,
    *,
    subject: Subject | None = None,
    repeat: int = 1,
) -> CaseResult:
    """One case: a fresh agent (the run's model, else the suite's, else the agent's own, else the
    role's), the completion check, then the judge. A model that cannot be built fails this case's
    completion (or judge) check, never the caller."""
    options = options or RunOptions()
    started = time.perf_counter()
    subject = subject or resolve_subject(suite)
    meter = Meter()
    pinned = options.model or suite.frontmatter.get("model")
    agent_choice = pinned or subject.model
    agent_llm, agent_problem = _build("suite_agent", agent_choice, options, meter)
    judge_llm, judge_problem = (
        _build("suite_judge", options.judge_model, options, meter) if options.judge else (None, "")
    )
    agent_label = agent_llm.label if agent_llm else str(agent_choice or "suite_agent role")
    judge_label = (
        (judge_llm.label if judge_llm else str(options.judge_model or "suite_judge role")) if options.judge else ""
    )
    key = fingerprint(suite, case, subject, agent_model=agent_label, judge_model=judge_label, judge=options.judge)
    result = CaseResult(
        suite=suite.label,
        case=case.name,
        fingerprint=key,
        agent_model=agent_label,
        judge_model=judge_label,
        repeat=repeat,
    )
    cache = options.cache if options.repeats == 1 else None
    buildable = agent_llm is not None and not judge_problem
    if buildable and cache is not None and cache.is_pass(key):
        result.cached = True
        result.checks = (
            [Check("completion", True, "cached pass"), Check("judge", True, "cached pass")]
            if options.judge
            else [Check("completion", True, "cached pass")]
        )
        result.duration_ms = (time.perf_counter() - started) * 1000
        return result
    transcript = Transcript(prompt=case.prompt, system="")
    if agent_llm is None:
        result.checks.append(Check("completion", False, f"the agent could not be built: {agent_problem}"))
    else:
        sub_llms: dict[str, LLM] = {}

        def llm_for(sub: Subject) -> LLM:
            # A sub-agent keeps its own model unless the run or the suite pins one for every agent.
            if pinned or not sub.model or agent_llm is None:
                return agent_llm  # type: ignore[return-value]
            if sub.model not in sub_llms:
                llm, problem = _build("suite_agent", sub.model, options, meter)
                if llm is None:
                    raise ProviderError(f"the sub-agent's model {sub.model!r} could not be built: {problem}")
                sub_llms[sub.model] = llm
            return sub_llms[sub.model]

        try:
            transcript = run_agent(agent_llm, subject, case.prompt, suite.frontmatter.get("system"), llm_for=llm_for)
            completed = bool(transcript.response)
            result.checks.append(
                Check(
                    "completion", completed, "the agent answered" if completed else "the agent gave an empty response"
                )
            )
        except (ProviderError, TimeoutError) as exc:
            result.checks.append(Check("completion", False, f"the agent did not complete: {exc}"))
    result.transcript = transcript.as_dict()
    if result.checks[0].passed and options.judge:
        if judge_llm is None:
            result.checks.append(Check("judge", False, f"the judge could not be built: {judge_problem}"))
        else:
            try:
                verdict = judge_transcript(judge_llm, transcript, case.expect)
                result.checks.append(Check("judge", verdict.passed, verdict.reason))
                if verdict.warning:
                    result.warnings.append(verdict.warning)
            except ProviderError as exc:
                result.checks.append(Check("judge", False, f"the judge did not answer: {exc}"))
    result.usage = meter.as_dict()
    result.duration_ms = (time.perf_counter() - started) * 1000
    if result.passed and cache is not None:
        cache.record_pass(key, case=case.name, suite=suite.path)
    return result


def run_suite(suite: EvalSuite, options: RunOptions | None = None) -> list[CaseResult]:
    """Every case, options.repeats times each (case by case: all repeats of one, then the next)."""
    options = options or RunOptions()
    subject = resolve_subject(suite)
    return [
        run_case(suite, case, options, subject=subject, repeat=n)
        for case in suite.cases
        for n in range(1, options.repeats + 1)
    ]


def summaries(results: list[CaseResult]) -> list[CaseSummary]:
    """pass^k and the pass rate with its interval, per case, in the order the cases ran."""
    grouped: dict[tuple[str, str], list[CaseResult]] = {}
    for result in results:
        grouped.setdefault((result.suite, result.case), []).append(result)
    return [summarize(suite, case, group) for (suite, case), group in grouped.items()]
