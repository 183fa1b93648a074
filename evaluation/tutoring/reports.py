"""Report artefacts (spec 001): one folder per run with eight files, and comparison reports.

Everything here is a pure function of a context dict (built by selectors from the database), so
the same report can be written again at any time from what is stored.
"""

import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from evaluation.providers.compat import plumbing_only
from evaluation.text.labels import label
from evaluation.tutoring.judge import format_transcript
from evaluation.tutoring.regression import Gate, counted, mean_ci
from evaluation.tutoring.rubric import SUGGESTED_FIXES

ARTIFACTS = (
    "config.json",
    "conversation.json",
    "conversation.md",
    "evaluation.json",
    "review.md",
    "problems.md",
    "run.log",
)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


_ORJSON = (
    orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
)


def _json(data: Any) -> str:
    """What `json.dumps(data, indent=2, ensure_ascii=False, default=str)` writes, from orjson: the
    standard library's encoder writes indented JSON in pure Python, and a run's conversation.json
    took a few ms of a worker's CPU. Dates and dataclasses go to `str` as they did; a float the
    standard library writes with an exponent may be written in another, equal form (1.25e-05 as
    0.0000125), and NaN or infinity as null (the standard library wrote NaN, which is not JSON).
    What orjson refuses and the standard library takes (an integer beyond 64 bits, nesting deeper
    than 254 levels: an external tutor's session state may hold either) is written by the standard
    library, so a report never fails where it did not."""
    try:
        return orjson.dumps(data, option=_ORJSON, default=str).decode() + "\n"
    except orjson.JSONEncodeError:
        return json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"


def bar(score: float, scale: int = 10) -> str:
    filled = int(round(score))
    return "█" * filled + "░" * (scale - filled)


def persona_header(persona: dict[str, Any] | None) -> list[str]:
    if not persona:
        return ["**Student:** (real session, no persona)", ""]
    return [
        f"**Student:** {persona['name']} (`{persona['persona_id']}`), grade {persona['grade']}, "
        f"correct-answer probability {persona['correct_answer_probability']:.0%}",
        f"> {persona.get('description', '')}",
        "",
    ]


ENDINGS = {
    "max_turns": "max turns reached",
    "is_complete": "the tutor marked the session complete",
    "tutor_stopped": "the tutor stopped answering",
    "tutor_unreachable": "the tutor became unreachable (an infrastructure failure: the run failed)",
}


def ending_lines(session: dict[str, Any] | None) -> list[str]:
    """How the conversation ended (simulated runs), e.g. the tutor stopped answering, and why."""
    ended_by = (session or {}).get("ended_by")
    if not ended_by:
        return []
    reason = (session or {}).get("end_reason")
    lines = [f"**Ended:** {ENDINGS.get(ended_by, ended_by)}" + (f" ({reason})" if reason else ""), ""]
    coverage = (session or {}).get("coverage")
    if coverage and coverage["cut_short"]:
        lines += [
            f"**Coverage:** judged on {coverage['answered']}/{coverage['planned']} turns (partial): comparisons "
            f"leave it out below {coverage['min_share']:.0%} of the planned turns",
            "",
        ]
    return lines


def models_lines(models: dict[str, Any] | None) -> list[str]:
    """Which model played each role: provider/model, temperature and seed."""
    if not models:
        return []
    cells = []
    for role, m in models.items():
        extra = [f"temperature {m['temperature']:g}"] if m.get("temperature") is not None else []
        if m.get("seed") is not None:
            extra.append(f"seed {m['seed']}" + ("" if m.get("seed_sent") else " (not sent: the vendor takes none)"))
        cells.append(f"{role} `{m.get('provider')}/{m.get('model')}`" + (f" ({', '.join(extra)})" if extra else ""))
    return ["**Models:** " + "; ".join(cells), ""]


def usage_lines(usage: dict[str, Any] | None) -> list[str]:
    """What the run's calls used and cost: tokens (cache reads and writes apart), per role, and the cost,
    or which models have no price (never shown as free)."""
    if not usage or not usage.get("calls"):
        return []
    if usage.get("offline"):
        return [f"**Usage:** {usage['calls']:,} calls to the offline provider: no LLM was called, no cost", ""]
    cache = ""
    if usage.get("cached_input_tokens") or usage.get("cache_write_tokens"):
        cache = (
            f" ({usage['cached_input_tokens']:,} read from the prompt cache, "
            f"{usage['cache_write_tokens']:,} written to it)"
        )
    unpriced = ", ".join(usage.get("unpriced") or ())
    if unpriced:
        cost = f"estimated cost ${usage['cost_usd']:.4f} without the calls to {unpriced}: " if usage["cost_usd"] else ""
        cost += f"no price for model {unpriced}"
    else:
        cost = f"estimated cost ${usage['cost_usd']:.4f}"
    lines = [
        f"**Usage:** {usage['calls']:,} LLM calls · {usage['input_tokens']:,} input tokens{cache} · "
        f"{usage['output_tokens']:,} output tokens · {cost}",
    ]
    for role in usage.get("by_role") or ():
        lines.append(
            f"- {role['role']}: {role['calls']:,} calls, {role['input_tokens']:,} input tokens "
            f"({role['cached_input_tokens']:,} cache read, {role['cache_write_tokens']:,} cache write), "
            f"{role['output_tokens']:,} output tokens"
        )
    return [*lines, ""]


def write_run_reports(folder: Path, ctx: dict[str, Any]) -> list[Path]:
    """Write config, conversation (json + md), evaluation, review and problems; run.log is the runner's."""
    run, persona, messages, evaluation = ctx["run"], ctx.get("persona"), ctx["messages"], ctx.get("evaluation")
    _write(folder / "config.json", _json(ctx["config"]))
    _write(
        folder / "conversation.json",
        _json(
            {"run_id": run["run_id"], "session": ctx.get("session", {}), "config": ctx["config"], "messages": messages}
        ),
    )
    md = [f"# Conversation {run['run_id']}", "", *persona_header(persona)]
    if ctx.get("topic"):
        md += [f"**Topic:** {ctx['topic']['name']} (grade {ctx['topic']['grade']})", ""]
    md += models_lines(ctx["config"].get("llm")) + ending_lines(ctx.get("session"))
    for m in messages:
        md.append(f"**Message {m['turn']} · {m['role'].upper()}:** {m['content']}")
        decision = (m.get("metadata") or {}).get("turn_decision")
        if decision:
            extra = f"; mistake: {decision['mistake']}" if decision.get("mistake") else ""
            behaviours = f"; behaviours: {', '.join(decision['behaviors'])}" if decision.get("behaviors") else ""
            md.append(
                f"  _(simulator: {'correct' if decision['correct'] else 'incorrect'}, roll {decision['roll']:.3f} vs {decision['probability']}{extra}{behaviours})_"
            )
        md.append("")
    _write(folder / "conversation.md", "\n".join(md))
    written = [folder / name for name in ("config.json", "conversation.json", "conversation.md")]
    if evaluation:
        _write(folder / "evaluation.json", _json(evaluation))
        _write(folder / "review.md", review_markdown(ctx))
        _write(folder / "problems.md", problems_markdown(ctx))
        written += [folder / "evaluation.json", folder / "review.md", folder / "problems.md"]
    return written


def review_markdown(ctx: dict[str, Any]) -> str:
    run, evaluation = ctx["run"], ctx["evaluation"]
    lines = [f"# Review: {run['run_id']}", "", *persona_header(ctx.get("persona"))]
    lines += [
        f"**Judge:** {evaluation['judge']}"
        + (
            " (offline rule-based judge: scores come from measurable signals, not an LLM)"
            if evaluation.get("offline")
            else ""
        ),
        "",
        *([plumbing_only(evaluation["judge"]), ""] if plumbing_only(evaluation.get("judge") or "") else []),
        *models_lines(evaluation.get("models")),
        *ending_lines(ctx.get("session")),
        *usage_lines(ctx.get("usage")),
    ]
    fidelity = evaluation.get("simulator_fidelity")
    if fidelity and fidelity["strayed"]:
        lines += [
            "> **Warning: the simulated student strayed from its persona**, so low scores may be the student's "
            "doing, not the tutor's: " + "; ".join(fidelity["reasons"]) + ".",
            "",
        ]
    lines += realism_lines(evaluation.get("simulator_realism"))
    lines += ["## Scores", "", "| dimension | score | |", "|---|---|---|"]
    for name, score in evaluation["scores"].items():
        lines.append(f"| {name.replace('_', ' ')} | {score:g}/10 | `{bar(score)}` |")
    lines += [f"| **average** | **{evaluation['avg_score']:g}/10** | `{bar(evaluation['avg_score'])}` |", ""]
    lines += ["## Summary", "", evaluation["summary"], "", "## Analysis", ""]
    for name, text in evaluation["dimension_analysis"].items():
        lines += [f"### {name.replace('_', ' ').title()} ({evaluation['scores'].get(name, 0):g}/10)", "", text, ""]
    lines += fidelity_lines(fidelity)
    if evaluation["problems"]:
        lines += ["## Problems", ""]
        for p in evaluation["problems"]:
            lines += [
                f"{p['rank']}. **[{p['severity']}] {p['title']}** (messages {', '.join(map(str, p['turns']))}; {p['root_cause']})",
                f"   {p['description']}",
                f"   > {p['quote']}" + ("" if p["quote_found"] else "  _(quote not found in the transcript)_"),
                "",
            ]
    return "\n".join(lines)


def realism_lines(realism: dict[str, Any] | None) -> list[str]:
    """review.md's warning when the persona's simulated students are unlike real ones (the realism card)."""
    if not realism or not realism.get("unrealistic"):
        return []
    return [
        f"> **Warning: these simulated students are unrealistic** against real students ({realism['reference']}, "
        f"over {realism['runs']} runs of {realism['simulator']}): " + "; ".join(realism["notes"]) + ". A tutor's "
        "scores against them may not carry over to real students (manage.py realism shows the card).",
        "",
    ]


def _pct(rate: dict[str, Any]) -> str:
    if rate["rate"] is None:
        return "no checked turns"
    return f"{rate['rate']:.0%} ({rate['k']}/{rate['n']}; 95% CI {rate['low']:.0%}-{rate['high']:.0%})"


def fidelity_lines(fidelity: dict[str, Any] | None) -> list[str]:
    """The simulator's fidelity section of review.md."""
    if not fidelity:
        return []
    lines = [
        "## Simulator fidelity",
        "",
        f"- verdict: {'**strayed**' if fidelity['strayed'] else 'followed its decisions'}",
        f"- target correct rate: {fidelity['target']:.0%}",
        f"- decided correct (the seeded rolls): {_pct(fidelity['decided'])}",
        f"- realised correct (answers checked against the tutor's question): {_pct(fidelity['realised'])}"
        + (f"; {fidelity['unchecked_answers']} answer(s) not checkable" if fidelity["unchecked_answers"] else ""),
        f"- answers contradicting their turn decision: {len(fidelity['contradictions'])}",
    ]
    for c in fidelity["contradictions"]:
        told = "correctly" if c["decided_correct"] else "incorrectly"
        where = f" (message {c['message']})" if c.get("message") else ""
        lines.append(
            f'  - turn {c["turn"]}{where}: told to answer {told}, wrote "{c["answer"]}" (answer: {c["expected"]})'
        )
    for b in fidelity["behaviours"]:
        seen = (
            f"shown {b['shown']} of {b['requested']}" if b["checked"] else f"requested {b['requested']}, not checkable"
        )
        lines.append(f"- behaviour {b['name'].replace('_', ' ')}: {seen}")
    return [*lines, ""]


def problems_markdown(ctx: dict[str, Any]) -> str:
    run, problems = ctx["run"], ctx["evaluation"]["problems"]
    lines = [f"# Problems: {run['run_id']}", "", *persona_header(ctx.get("persona"))]
    if not problems:
        return "\n".join(lines + ["No problems identified."]) + "\n"
    lines += ["## Overview", "", "| # | severity | root cause | title | messages |", "|---|---|---|---|---|"]
    for p in problems:
        lines.append(
            f"| {p['rank']} | {p['severity']} | {p['root_cause']} | {p['title']} | {', '.join(map(str, p['turns']))} |"
        )
    counts = Counter(p["root_cause"] for p in problems)
    lines += ["", "## Root cause distribution", "", "| root cause | count |", "|---|---|"]
    lines += [f"| {cause} | {n} |" for cause, n in counts.most_common()]
    lines += ["", "## Details", ""]
    for p in problems:
        lines += [
            f"### {p['rank']}. {p['title']}",
            "",
            f"- severity: {p['severity']}",
            f"- root cause: {p['root_cause']}",
            f"- messages: {', '.join(map(str, p['turns']))}",
            "",
            p["description"],
            "",
            f"> {p['quote']}",
            "",
        ]
        if not p["quote_found"]:
            lines += ["_Warning: this quote does not occur in the transcript._", ""]
    lines += ["## Suggested fixes", ""]
    lines += [f"- **{cause}**: {SUGGESTED_FIXES.get(cause, SUGGESTED_FIXES['other'])}" for cause in counts]
    return "\n".join(lines) + "\n"


def write_error(folder: Path, when: str, error: str, traceback_text: str) -> Path:
    path = folder / "error.txt"
    _write(path, f"time: {when}\nerror: {error}\n\n{traceback_text}")
    return path


def comparison_data(runs: list[dict[str, Any]], *, min_coverage: float) -> dict[str, Any]:
    """Per persona: every run's scores, the mean and spread per dimension (from the data's own dimensions),
    over the runs that count: scored, and judged on at least `min_coverage` of their planned turns (the
    others are listed in "left_out" with their coverage)."""
    by_persona: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_persona.setdefault(r["persona_id"] or "session", []).append(r)
    personas = {}
    for persona_id, items in sorted(by_persona.items()):
        scored = [r for r in items if counted(r, min_coverage)]
        dims = (
            sorted(
                {d for r in scored for d in r["scores"]},
                key=lambda d: list(scored[0]["scores"]).index(d) if d in scored[0]["scores"] else 99,
            )
            if scored
            else []
        )
        means = {d: round(statistics.fmean([r["scores"][d] for r in scored if d in r["scores"]]), 2) for d in dims}
        spread = {d: round(statistics.pstdev([r["scores"][d] for r in scored if d in r["scores"]]), 2) for d in dims}
        avgs = [r["avg_score"] for r in scored if r.get("avg_score") is not None]
        personas[persona_id] = {
            "runs": items,
            "mean_scores": means,
            "spread": spread,
            "ci": {d: mean_ci([r["scores"][d] for r in scored if d in r["scores"]]) for d in dims},
            "n": {d: sum(1 for r in scored if d in r["scores"]) for d in dims},
            "avg_n": len(avgs),
            "avg_score": round(statistics.fmean(avgs), 2) if avgs else None,
            "avg_spread": round(statistics.pstdev(avgs), 2) if avgs else None,
            "avg_ci": mean_ci(avgs),
        }
    causes = Counter(c for r in runs for c in r.get("root_causes", []))
    left_out = [
        {"run_id": r["run_id"], "turns_answered": r.get("turns_answered"), "max_turns": r.get("max_turns")}
        for r in runs
        if r.get("scores") and not counted(r, min_coverage)
    ]
    return {
        "personas": personas,
        "root_causes": dict(causes.most_common()),
        "run_count": len(runs),
        "left_out": left_out,
        "min_coverage": min_coverage,
    }


def group_judges(runs: list[dict[str, Any]]) -> list[str]:
    """The judges that scored a group's runs, in name order (runs never judged name none)."""
    return sorted({r["judge"] for r in runs if r.get("judge")})


def runs_by_judge(runs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """A group's runs in parts that may be averaged together: with more than one judge, one part per judge
    (runs never judged under ""), since scores of different judges are never averaged; with one judge (or
    none), every run in one part under its name."""
    judges = group_judges(runs)
    split = len(judges) > 1
    parts: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        parts.setdefault((r.get("judge") or "") if split else (judges[0] if judges else ""), []).append(r)
    return parts


def judge_row_key(persona_id: str, judge: str) -> str:
    """A persona's row (or chart series) for one judge when a group has several: "<persona> · <judge>"."""
    return f"{persona_id} · {judge or 'not judged'}"


def _judge_order(persona_id: str, judge: str) -> tuple[str, bool, str]:
    """A persona's rows stay together, its judges in name order, runs never judged last."""
    return persona_id, judge == "", judge


MIN_RUNS_FOR_INTERVAL = 3
"""Fewer runs than this give no interval worth drawing (at n=2 the t interval is 12.7 spreads wide)."""
SCORE_RANGE = (0.0, 10.0)


def shown_interval(
    ci: tuple[float | None, float | None] | list[Any], n: int, *, least: int = MIN_RUNS_FOR_INTERVAL
) -> tuple[float | None, float | None]:
    """The mean's interval as pages and reports show it: none below `least` runs, and clipped to the
    score's range (a score cannot be below 0 or above 10, whatever the t interval says)."""
    low, high = ci
    if low is None or high is None or n < least:
        return None, None
    return max(SCORE_RANGE[0], low), min(SCORE_RANGE[1], high)


def _mean_cell(
    mean: float, ci: tuple[float | None, float | None] | list[Any], n: int, *, least: int = MIN_RUNS_FOR_INTERVAL
) -> str:
    low, high = shown_interval(ci, n, least=least)
    return f"{mean:g}" + (f" [{low:g}, {high:g}]" if low is not None else "")


def _by_judge(runs: list[dict[str, Any]], *, min_coverage: float) -> dict[str, Any]:
    """comparison_data's "personas" with a row per persona and judge, keyed "<persona> · <judge>", each naming
    its persona_id and judge: a group scored by several judges is never averaged across them."""
    rows = [
        (persona_id, judge, p)
        for judge, part in runs_by_judge(runs).items()
        for persona_id, p in comparison_data(part, min_coverage=min_coverage)["personas"].items()
    ]
    rows.sort(key=lambda row: _judge_order(row[0], row[1]))
    return {judge_row_key(pid, judge): {"persona_id": pid, "judge": judge, **p} for pid, judge, p in rows}


def write_comparison(
    folder: Path,
    group: str,
    runs: list[dict[str, Any]],
    *,
    min_coverage: float,
    gate: Gate | None = None,
    realism: list[dict[str, Any]] | None = None,
    names: dict[str, str] | None = None,
) -> dict[str, Any]:
    """comparison.json and comparison.md, with the group's gate against its baseline when it has one.

    comparison.md calls personas by their names (`names`, persona id -> name; the id where none is given),
    root causes by their words, and names the judge (and says when it is the offline rule-based one).

    With one judge, "personas" is keyed by persona id. With several, runs of different judges are never
    averaged: "judges" names them, "split_by_judge" is true, and "personas" has a row per persona and judge,
    keyed "<persona> · <judge>" (each row also names its "persona_id" and "judge"); the Markdown table has a
    judge column."""
    data = {"group": group, **comparison_data(runs, min_coverage=min_coverage)}
    judges = group_judges(runs)
    split = len(judges) > 1
    if split:
        data["personas"] = _by_judge(runs, min_coverage=min_coverage)
        data["judges"] = judges
        data["split_by_judge"] = True
    if gate:
        data["gate"] = gate.as_dict()
    _write(folder / "comparison.json", _json(data))
    dims: list[str] = []
    for p in data["personas"].values():
        dims += [d for d in p["mean_scores"] if d not in dims]
    repeats = max((len(p["runs"]) for p in data["personas"].values()), default=1)
    per = "per persona and judge" if split else "per persona"
    lines = [
        f"# Comparison {group}",
        "",
        f"{data['run_count']} runs"
        + (
            f", up to {repeats} {per}: mean [95% confidence interval] n=runs (intervals within 0-10, "
            f"none below {MIN_RUNS_FOR_INTERVAL} runs; spreads in comparison.json)"
            if repeats > 1
            else ""
        ),
        "",
    ]
    if split:
        lines += [
            f"Scored by {len(judges)} judges ({', '.join(judges)}): each persona has a row per judge; "
            "scores of different judges are not averaged.",
            "",
        ]
    else:
        lines += [f"Judged by {_judge_words(judges[0])}." if judges else "No run was judged.", ""]
    persona_names = names or {}

    def persona(persona_id: str) -> str:
        return persona_names.get(persona_id) or persona_id

    # the row's name: the persona, and with several judges the judge in a column of its own
    row_names = {
        key: [persona(p["persona_id"]), p["judge"] or "not judged"] if split else [persona(key)]
        for key, p in data["personas"].items()
    }
    heading = ["persona", "judge"] if split else ["persona"]
    lines += _row([*heading, *(d.replace("_", " ") for d in dims), "average"])
    lines.append("|---" * (len(dims) + len(heading) + 1) + "|")
    for key, p in data["personas"].items():
        cells = [
            f"{_mean_cell(p['mean_scores'][d], p['ci'][d], p['n'][d])} n={p['n'][d]}" if d in p["mean_scores"] else "-"
            for d in dims
        ]
        avg = (
            "failed"
            if p["avg_score"] is None
            else f"{_mean_cell(p['avg_score'], p['avg_ci'], p['avg_n'])} n={p['avg_n']}"
        )
        lines += _row([*row_names[key], *cells, avg])
    if data["left_out"]:
        lines += ["", f"Left out (judged on less than {min_coverage:.0%} of the planned turns):"]
        lines += [f"- {r['run_id']}: {r['turns_answered']}/{r['max_turns']} turns" for r in data["left_out"]]
    if repeats > 1:
        lines += ["", "## Runs", ""]
        for key, p in data["personas"].items():
            lines += [f"### {' · '.join(row_names[key])}", ""]
            lines += _row(["run", "status", "turns", *(d.replace("_", " ") for d in dims), "average"])
            lines.append("|---" * (len(dims) + 4) + "|")
            for r in p["runs"]:
                scores = r.get("scores") or {}
                cells = [f"{scores[d]:g}" if d in scores else "-" for d in dims]
                avg = f"{r['avg_score']:g}" if r.get("avg_score") is not None else "-"
                turns = f"{r['turns_answered']}/{r['max_turns']}" if r.get("turns_answered") is not None else "-"
                lines += _row([r["run_id"], r["status"], turns, *cells, avg])
            lines.append("")
    if gate:
        lines += gate_lines(gate)
    if realism:
        data["realism"] = realism
        lines += [
            "",
            "> **The verdict stands, but it rests on simulated students unlike real ones:** "
            + "; ".join(f"{persona(r['persona_id'])} ({r['simulator']}): {'; '.join(r['notes'])}" for r in realism)
            + " (manage.py realism shows the cards).",
        ]
    lines += ["", "## Root causes", "", "| root cause | count |", "|---|---|"]
    lines += [f"| {label(c)} | {n} |" for c, n in data["root_causes"].items()] or ["| (none) | 0 |"]
    _write(folder / "comparison.md", "\n".join(lines) + "\n")
    return data


def _judge_words(judge: str) -> str:
    """A judge as a sentence names it: the offline rules said to be rules, not a model's judgement."""
    if judge.startswith("offline/"):
        return f"{judge} (the offline rule-based judge: measurable signals, not a model's judgement)"
    return judge


def _row(cells: list[str]) -> list[str]:
    """One Markdown table row: as many cells as its separator, whatever is empty."""
    return ["| " + " | ".join(cells) + " |"]


def gate_lines(gate: Gate) -> list[str]:
    """The gate as Markdown: the outcome first, the rule, the dimension tests that decided it, then the
    per-persona diagnostics and what was left out."""
    lines = [
        "",
        f"## Against baseline {gate.baseline}" + (" (FORCED: the baseline does not match)" if gate.forced else ""),
        "",
        f"Rule: {gate.family_rule}.",
    ]
    lines += [f"- forced: {m}" for m in gate.mismatches]
    lines += ["", f"**{gate.outcome.upper()}**: {gate.reason}.", ""]
    if gate.tests:
        lines += [
            "| dimension | change [interval] | SE | df | one-sided p | detects drops of | verdict |",
            "|---|---|---|---|---|---|---|",
        ]
        dropped = gate.regressions
        for t in gate.tests:
            mark = "**regression**" if t in dropped else "ok"
            if t.mdd is None:
                lines.append(
                    f"| {t.dimension.replace('_', ' ')} | {t.delta:+.2f} | - | 0 | - | - | no spread estimate |"
                )
                continue
            lines.append(
                f"| {t.dimension.replace('_', ' ')} | {t.delta:+.2f} [{t.low:+.2f}, {t.high:+.2f}] | {t.se:.2f}"
                + (" (floored)" if t.floored else "")
                + f" | {t.df} | {t.p_value:.2g} | {t.mdd:.2f} | {mark} |"
            )
        lines += [
            "",
            f"Intervals are the change's two-sided {1 - 2 * gate.alpha / len(gate.tests):.1%} intervals "
            "(the one-sided test's level on each side); a change is a difference and may lie anywhere in -10..10.",
            "",
        ]
    if gate.verdicts:
        lines += [
            "Per persona (diagnostics: they decide nothing):",
            "",
            "| persona | dimension | baseline | mean [95% CI] | n | drop | beyond the threshold |",
            "|---|---|---|---|---|---|---|",
        ]
        for v in gate.verdicts:
            mark = "yes" if v.flagged else "no"
            lines.append(
                f"| {v.persona_id} | {v.dimension.replace('_', ' ')} | {v.baseline:g} | "
                f"{_mean_cell(v.mean, (v.low, v.high), v.n, least=2)} | {v.n} | {v.drop:g} | {mark}: {v.why} |"
            )
    lines += [f"- left out: {why}" for why in gate.left_out]
    lines += [f"- no baseline for persona {p}" for p in gate.no_baseline]
    return lines


__all__ = ["ARTIFACTS", "format_transcript", "write_comparison", "write_error", "write_run_reports"]
