"""Print the judge's agreement with people, between people and with itself, per dimension, for a rubric."""

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
        f"{'people alpha':<24} {'self alpha':<24} human ceiling",
    ]
    for row in table.rows:
        jvh = row.judge_vs_humans
        ceiling = row.ceiling.verdict
        if row.ceiling.items_needed and row.ceiling.verdict != "can stand in for a rater":
            ceiling += f" (needs {row.ceiling.items_needed} items x {row.ceiling.annotators + row.ceiling.annotators_needed} annotators)"
        lines.append(
            f"{row.dimension:<24} {str(jvh.kappa):<24} {str(jvh.rho):<24} "
            f"{_rate(jvh.exact):<10} {_rate(jvh.within_one):<10} "
            f"{str(row.humans) if row.humans else '- (1 annotator)':<24} "
            f"{str(row.self_consistency) if row.self_consistency else '- (1 repeat)':<24} {ceiling}"
        )
    if table.canary:
        lines += ["", f"Canary {table.canary.canary!r} ({table.canary.items} items), against {table.canary.previous}:"]
        for shift in table.canary.shifts:
            lines.append(f"  {shift.dimension:<22} kappa {shift.before.kappa} -> {shift.after.kappa}")
    return "\n".join(lines)


def _rate(estimate) -> str:
    return "-" if estimate.value is None else f"{estimate.value:.0%}"


class Command(BaseCommand):
    help = "Agreement of each judge configuration of a rubric with people (and people with each other), per dimension."

    def add_arguments(self, parser):
        parser.add_argument("--rubric", required=True)
        parser.add_argument("--configuration", type=int, default=None, help="One configuration's id (default: all)")
        parser.add_argument("--json", action="store_true", help="The numbers as JSON, as the API returns them")

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
        tables = [selectors.agreement_table(c) for c in configurations]
        if opts["json"]:
            self.stdout.write(json.dumps([selectors.table_as_dict(t) for t in tables], indent=2))
            return
        self.stdout.write("\n\n".join(render(t) for t in tables))
