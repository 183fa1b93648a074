"""Skill drafting from evals (spec 003's meta-skill): write a SKILL.md from an EVAL.md, run the
suite against it, and refine the draft from the failures, for a bounded number of rounds.
Every round's draft and results are kept in its own folder."""

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from evaluation.providers import Message, get_llm
from evaluation.suites.offline import DraftRule
from evaluation.suites.parser import EvalSuite, load_file, parse_suite
from evaluation.suites.runner import CaseResult, RunOptions, model_spec, run_suite

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


def _cases_text(suite: EvalSuite) -> str:
    return "\n\n".join(f"## {c.name}\n### Prompt\n{c.prompt}\n### Expect\n{c.expect}" for c in suite.cases)


def _failures_text(results: list[CaseResult]) -> str:
    return "\n\n".join(r.failure_message() for r in results if not r.passed)


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
        # The draft is tested as a colocated skill: the suite's cases without its own `skills:`.
        body = {k: v for k, v in suite.frontmatter.items() if k not in ("skills", "agent", "module")}
        trial = parse_suite(_cases_text(suite), str(folder / "EVAL.md"))
        trial.frontmatter = body
        shutil.copyfile(eval_path, folder / "ORIGINAL_EVAL.md")
        (folder / "EVAL.md").write_text(_cases_text(suite) + "\n", encoding="utf-8")
        last_results = run_suite(trial, RunOptions(model=model, judge_model=judge_model))
        passed = sum(r.passed for r in last_results)
        (folder / "results.json").write_text(
            json.dumps(
                [
                    {
                        "case": r.case,
                        "passed": r.passed,
                        "checks": [c.__dict__ for c in r.checks],
                        "warnings": r.warnings,
                        "transcript": r.transcript,
                    }
                    for r in last_results
                ],
                indent=1,
                default=str,
            )
        )
        history.append(Round(number, folder, passed, len(last_results)))
        if passed == len(last_results):
            break
    return history
