"""Re-judge finished tutor runs (their stored conversations, not simulated again), directly or by batch."""

from django.core.management.base import BaseCommand, CommandError

from evaluation.errors import Conflict, InvalidInput, NotFound
from evaluation.providers import ProviderError
from evaluation.runs import selectors as run_selectors
from evaluation.tutoring import services


class Command(BaseCommand):
    help = (
        "Queue a re-evaluation of finished tutor runs (--run, or every run of --group). With --batch the judge's "
        "calls go through its vendor's batch API as one batch (cheaper, slower); each run waits on it. With "
        "--here the runs are executed in this process instead of by the workers."
    )

    def add_arguments(self, parser):
        parser.add_argument("--run", action="append", default=[], dest="runs", help="A run id (repeatable)")
        parser.add_argument("--group", default="", help="Every run of this group")
        parser.add_argument("--batch", action="store_true", help="Judge through the provider's batch API")
        parser.add_argument("--here", action="store_true", help="Execute the runs in this process and wait")

    def handle(self, *args, **opts):
        run_ids = list(opts["runs"])
        if opts["group"]:
            run_ids += [r.run_id for r in run_selectors.run_list(group=opts["group"], kind="tutor")]
        if not run_ids:
            raise CommandError("name runs with --run RUN_ID or --group GROUP")
        try:
            if opts["batch"]:
                stored = services.runs_retry_evaluation_by_batch(run_ids=run_ids)
                for row in stored:
                    self.stdout.write(f"{row.vendor} batch for {row.total} run(s) stored; the runs wait on it")
            else:
                for run_id in run_ids:
                    services.run_retry_evaluation_start(run=run_selectors.run_lookup(run_id, kind="tutor"))
        except (InvalidInput, NotFound, Conflict, ProviderError) as exc:
            raise CommandError(str(exc)) from None
        if not opts["here"]:
            self.stdout.write(f"Queued {len(run_ids)} run(s) for re-evaluation")
            return
        action = services.BATCH_ACTION if opts["batch"] else "evaluate"
        failed = []
        for run_id in run_ids:
            run = run_selectors.run_lookup(run_id)
            services.run_execute(run.pk, run.attempt, action)
            ended = run_selectors.run_lookup(run_id)
            self.stdout.write(f"{run_id}: {ended.status} {ended.detail}".rstrip())
            if ended.status != "completed":
                failed.append(run_id)
        if failed:
            raise CommandError(f"{len(failed)} run(s) did not complete: {', '.join(failed)}")
