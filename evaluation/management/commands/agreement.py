"""Print the judge's agreement with people, between people and with itself, per dimension, for a rubric."""

import argparse
import json

from django.core.management.base import BaseCommand, CommandError

from evaluation.errors import NotFound
from evaluation.judging import selectors, services


def render(table) -> str:
    lines = [
        f"Judge {table.configuration}",
        f"rubric {table.rubric} v{table.rubric_version}: {table.items} items judged, {table.repeats} repeat(s); "
        "95% bootstrap intervals over items",
        "",
        f"{'dimension':<24} {'kappa (QWK)':<24} {'rho':<24} {'exact':<10} {'within 1':<10} "
        f"{'people alpha':<24} {'self alpha':<24} human ceiling (alternative annotator test)",
    ]
    for row in table.rows:
        jvh = row.judge_vs_humans
        ceiling = _ceiling(row.ceiling)
        lines.append(
            f"{row.dimension:<24} {str(jvh.kappa):<24} {str(jvh.rho):<24} "
            f"{_rate(jvh.exact):<10} {_rate(jvh.within_one):<10} "
            f"{str(row.humans) if row.humans else '- (1 annotator)':<24} "
            f"{str(row.self_consistency) if row.self_consistency else '- (1 repeat)':<24} {ceiling}"
        )
    lines += ["", "Human ceiling, per dimension and annotator left out:"]
    for row in table.rows:
        lines.append(f"  {row.dimension}: {row.ceiling.detail}")
        for a in row.ceiling.annotators:
            p = "no p-value" if a.p is None else f"p={a.p:.4f}"
            lines.append(
                f"    {a.annotator:<20} {a.instances:>5} instances  rho_f={a.rho_f:.2f}  rho_h={a.rho_h:.2f}  {p:<14} "
                + ("wins (BY-rejected)" if a.rejected else "no win")
            )
    if table.canary:
        lines += ["", f"Canary {table.canary.canary!r} ({table.canary.items} items), against {table.canary.previous}:"]
        for shift in table.canary.shifts:
            lines.append(f"  {shift.dimension:<22} kappa {shift.before.kappa} -> {shift.after.kappa}")
    return "\n".join(lines)


def render_probes(table) -> str:
    """The judge card's bias probes (a probes.ProbeTable): per dimension its findings, else that there is none,
    and why any probe could not run."""
    if table.tested:
        head = (
            f"Bias probes (judge minus people, in levels, on the items with both): {table.tested} p-value"
            f"{'s' if table.tested != 1 else ''} adjusted together by Benjamini-Yekutieli; a finding needs an "
            f"adjusted p of {table.q:g} or less"
        )
    else:
        head = "Bias probes (judge minus people, in levels, on the items with both): no probe could run"
    lines = [head]
    dimensions = list(dict.fromkeys(p.dimension for p in table.probes))
    for dimension in dimensions:
        rows = [p for p in table.probes if p.dimension == dimension]
        found = [p for p in rows if p.finding]
        for p in found:
            lines.append(f"  {dimension}, {p.probe}: {p.detail} (n={p.n}, p {p.p:.2g}, adjusted {p.p_adjusted:.2g})")
        if not found:
            ran = sum(1 for p in rows if not p.reason)
            lines.append(f"  {dimension}: no finding ({ran} of {len(rows)} probes ran)")
        lines += [f"    {p.probe} could not run: {p.reason}" for p in rows if p.reason]
    return "\n".join(lines)


def _ceiling(ceiling) -> str:
    if ceiling.winning_rate is None:
        return ceiling.verdict
    return (
        f"{ceiling.verdict}: omega={ceiling.winning_rate:.2f} rho={ceiling.advantage_probability:.2f} "
        f"eps={ceiling.epsilon:g} ({ceiling.annotators_tested} annotators, {ceiling.alignment})"
    )


def _epsilon(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (0 <= value < 1):
        raise argparse.ArgumentTypeError(
            f"must be from 0 to below 1 (0.2 experts, 0.15 skilled, 0.1 crowd), not {text}"
        )
    return value


def _rate(estimate) -> str:
    return "-" if estimate.value is None else f"{estimate.value:.0%}"


class Command(BaseCommand):
    help = "Agreement of each judge configuration of a rubric with people (and people with each other), per dimension."

    def add_arguments(self, parser):
        parser.add_argument("--rubric", required=True)
        parser.add_argument("--configuration", type=int, default=None, help="One configuration's id (default: all)")
        parser.add_argument("--json", action="store_true", help="The numbers as JSON, as the API returns them")
        parser.add_argument(
            "--epsilon",
            type=_epsilon,
            default=None,
            help="The alternative annotator test's epsilon: 0.2 against experts, 0.15 skilled annotators, 0.1 crowd "
            "workers (default: the ALT_TEST_EPSILON setting)",
        )

    def handle(self, *args, **opts):
        try:
            services.rubric_get(opts["rubric"])
        except NotFound as exc:
            raise CommandError(str(exc)) from None
        configurations = selectors.configurations(opts["rubric"])
        if opts["configuration"] is not None:
            configurations = [c for c in configurations if c.pk == opts["configuration"]]
        if not configurations:
            raise CommandError(f"nothing judged with rubric {opts['rubric']!r} yet: run judge_imported first")
        tables = [selectors.agreement_table(c, epsilon=opts["epsilon"]) for c in configurations]
        probes = [selectors.bias_probes(c) for c in configurations]
        if opts["json"]:
            data = [{**selectors.table_as_dict(t), "probes": p.as_dict()} for t, p in zip(tables, probes, strict=True)]
            self.stdout.write(json.dumps(data, indent=2))
            return
        self.stdout.write(
            "\n\n".join(f"{render(t)}\n\n{render_probes(p)}" for t, p in zip(tables, probes, strict=True))
        )
