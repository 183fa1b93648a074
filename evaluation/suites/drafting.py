"""Skill drafting from evals (spec 003's meta-skill): write a SKILL.md from an EVAL.md, run the
suite against it, and refine the draft from the failures, for a bounded number of rounds.
Every round's draft and results are kept in its own folder; the best draft can then be placed as
the SKILL.md beside the eval (draft_write). The draft is tested in the suite's own place, so the
suite's tools and modules resolve as in any run."""

import hashlib
import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from evaluation.providers import Message, get_llm
from evaluation.suites.offline import DraftRule
from evaluation.suites.parser import EvalSuite, load_file
from evaluation.suites.runner import CaseResult, RunOptions, model_spec, run_case
from evaluation.suites.subjects import Subject, resolve_subject

AUTHOR = """You write SKILL.md files: concise instructions that teach an AI assistant a behaviour.
You are given an EVAL.md suite: each case has a Prompt and an Expect rubric. Write the SKILL.md
(markdown, no frontmatter) whose instructions make an assistant meet every rubric. Reply with the
SKILL.md text only."""


@dataclass
class Round:
    number: int
    folder: Path
    passed: int
    total: int
    judged_by: str = ""
    """Which judge gave the verdicts (runner.judge_description)."""

    @property
    def skill(self) -> Path:
        return self.folder / "SKILL.md"


def _cases_text(suite: EvalSuite) -> str:
    return "\n\n".join(f"## {c.name}\n### Prompt\n{c.prompt}\n### Expect\n{c.expect}" for c in suite.cases)


def _failures_text(results: list[CaseResult]) -> str:
    return "\n\n".join(r.failure_message() for r in results if not r.passed)


def _with_draft(suite: EvalSuite, draft: str) -> Subject:
    """What the suite tests, with the draft as its one skill: the suite stays where it is, so its
    tools:, module: and sidecar paths resolve as they do in a normal run."""
    body = {k: v for k, v in suite.frontmatter.items() if k not in ("skills", "agent")}
    subject = resolve_subject(EvalSuite(path=suite.path, frontmatter=body, cases=suite.cases))
    sources = {k: v for k, v in subject.sources.items() if not k.startswith("skill:")}
    sources["skill:draft"] = hashlib.sha256(draft.encode()).hexdigest()
    return replace(subject, skills=[(suite.folder.name, draft)], sources=sources)


def draft_skill(
    eval_path: Path, out: Path, *, rounds: int = 3, model: str | None = None, judge_model: str | None = None
) -> list[Round]:
    suite = load_file(eval_path)
    if not suite.cases:
        raise ValueError(f"{eval_path}: the suite has no cases to draft from")
    author = get_llm("suite_agent", override=model_spec(model))
    draft = ""
    history: list[Round] = []
    last_results: list[CaseResult] = []
    options = RunOptions(model=model, judge_model=judge_model)
    for number in range(1, rounds + 1):
        if number == 1:
            ask = f"Write the SKILL.md for this suite:\n\n{_cases_text(suite)}"
        else:
            ask = (
                f"This SKILL.md draft:\n\n{draft}\n\nfailed these cases of the suite:\n\n{_failures_text(last_results)}\n\n"
                f"The whole suite:\n\n{_cases_text(suite)}\n\nWrite an improved SKILL.md."
            )
        rule = DraftRule(tuple((c.prompt, c.expect) for c in suite.cases))
        draft = author.call([Message("system", AUTHOR), Message("user", ask)], offline=rule).text.strip()
        folder = out / f"round_{number}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "SKILL.md").write_text(draft + "\n", encoding="utf-8")
        subject = _with_draft(suite, draft + "\n")
        last_results = [run_case(suite, case, options, subject=subject) for case in suite.cases]
        passed = sum(r.passed for r in last_results)
        (folder / "results.json").write_text(
            json.dumps(
                {
                    "suite": str(eval_path),
                    "judge": last_results[0].judged_by if last_results else "",
                    "cases": [
                        {
                            "case": r.case,
                            "passed": r.passed,
                            "checks": [c.__dict__ for c in r.checks],
                            "warnings": r.warnings,
                            "transcript": r.transcript,
                        }
                        for r in last_results
                    ],
                },
                indent=1,
                default=str,
            )
        )
        judged_by = last_results[0].judged_by if last_results else ""
        history.append(Round(number, folder, passed, len(last_results), judged_by))
        if passed == len(last_results):
            break
    return history


def best_round(rounds: list[Round]) -> Round:
    """The draft to accept: the most cases passed, the earliest such round."""
    return max(rounds, key=lambda r: (r.passed, -r.number))


def draft_write(eval_path: Path, chosen: Round, out: Path) -> tuple[Path, Path | None]:
    """Place the chosen draft as the SKILL.md beside the eval; a SKILL.md already there is kept as
    out/previous_SKILL.md. Returns (the SKILL.md written, where the old one went or None). Raises
    ValueError when a SKILL.md there would not be loaded (the suite names skills: or agent:)."""
    suite = load_file(eval_path)
    named = [k for k in ("skills", "agent") if suite.frontmatter.get(k)]
    if named:
        raise ValueError(
            f"{eval_path}: the suite names {' and '.join(named)}: in its frontmatter, so a SKILL.md beside "
            "it would not be loaded; copy the draft where that names"
        )
    target = suite.folder / "SKILL.md"
    kept = None
    if target.exists():
        kept = out / "previous_SKILL.md"
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(target, kept)
    shutil.copyfile(chosen.skill, target)
    return target, kept
