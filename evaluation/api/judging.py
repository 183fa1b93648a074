"""Judge validity: import conversations with their labels, judge them (or price it first), and the judge's
agreement with people."""

from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluation import limits
from evaluation.api.parsers import JSONParser
from evaluation.api.schema import field_error, operation
from evaluation.api.serializers import ForecastOutput, Output, QueryInput, forecast_body
from evaluation.errors import FieldProblem, InvalidInput, NotFound
from evaluation.judging import selectors, services

FORMATS = ["auto", "json", "jsonl", "text", "candidates", "bridge"]
MAP_LABELS_MAX_CHARS = 4_000
"""A label map in the query string: percent-encoded (up to 3 bytes a character) it stays inside the 16 KB
request line that uvicorn (h11) reads."""


class ImportQuery(QueryInput):
    # not `format`: DRF reads ?format= as a choice of renderer
    input_format = serializers.ChoiceField(choices=FORMATS, default="auto", help_text="The file's format.")
    rubric = serializers.SlugField(
        required=False, help_text="Read labels against this rubric (default: by record kind)."
    )
    # DRF's metaclass takes declared fields off the class, so this does not hide Field.source.
    source = serializers.CharField(  # type: ignore[assignment]
        required=False, default="", max_length=100, help_text="Default: the file name, else 'import'."
    )
    annotator = serializers.CharField(required=False, default="", max_length=150, help_text="Who made the labels.")
    file = serializers.CharField(
        required=False, default="", max_length=200, help_text="The file's name, for errors and the default source."
    )
    speaker_separator = serializers.CharField(required=False, default=":", max_length=10, trim_whitespace=False)
    transcript_separator = serializers.CharField(required=False, default="---", max_length=20)
    map_labels = serializers.CharField(
        required=False,
        default="",
        max_length=MAP_LABELS_MAX_CHARS,
        help_text='A label map, JSON or YAML: {"<dimension>" or "*": {"<other wording>": "<label of the scale>"}}. '
        "At most 4,000 characters, so that the URL fits a server's request line (16 KB, percent-encoded); a longer "
        "map goes as a file to `manage.py import_transcripts --map-labels` or the admin's upload.",
    )
    skip_invalid = serializers.BooleanField(
        required=False, default=False, help_text="Import the valid records; list the rejected ones with reasons."
    )


class RejectedOutput(Output):
    record = serializers.CharField(help_text="How the file names it: `record 3`, `line 7`, `transcript 2`.")
    problems = serializers.ListField(child=serializers.CharField())


class ImportOutput(Output):
    file = serializers.CharField()
    format = serializers.CharField(help_text="The format read (auto resolved).")
    rubrics = serializers.ListField(child=serializers.CharField(), help_text="Rubrics the labels were read against.")
    created = serializers.IntegerField()
    updated = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    items = serializers.IntegerField(help_text="Whole conversations or candidate responses in the file.")
    labels = serializers.IntegerField(help_text="Annotations written.")
    sources = serializers.ListField(child=serializers.CharField())
    merged = serializers.IntegerField(help_text="Records folded into an earlier one with the same id and dialogue.")
    rejected = RejectedOutput(many=True, help_text="Records set aside (skip_invalid), each with its reasons.")


class ImportView(APIView):
    required_permission = "evaluation.add_transcript"

    @operation(
        operation_id="judging_import",
        tag="judging",
        summary="Import conversations with their human labels",
        description="The body is the file: JSON or JSON lines transcripts `{id, messages: [{role, content}], metadata, "
        "labels}`, candidate-response sets `{conversation_id, conversation_history, anno_llm_responses}`, or plain "
        "text with `Tutor:` / `Student:` lines. All or nothing: any problem, named by record, field and line, stores "
        "nothing; with `skip_invalid=true` the valid records are stored and `rejected` lists the others with their "
        "reasons. Records repeating an id with the same dialogue are one conversation. Idempotent on (source, id). The body is read as bytes whatever its content type, so a text file may go as `text/plain`. Bodies over DATA_UPLOAD_MAX_MEMORY_SIZE: use `manage.py import_transcripts`.",
        request={
            "application/json": OpenApiTypes.OBJECT,
            "application/x-ndjson": OpenApiTypes.STR,
        },
        parameters=[ImportQuery],
        ok={201: ImportOutput},
        invalid="A record is not valid (`fields` names it: `record 3 (id 'x').labels.pacing`), or a query parameter is not.",
        not_found="The rubric does not exist.",
        body=True,
    )
    def post(self, request: Request) -> Response:
        query = ImportQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        options = dict(query.validated_data)
        options["label_map"] = options.pop("map_labels")
        report = services.transcripts_import(request.body, format=options.pop("input_format"), **options)
        return Response(ImportOutput(report.as_dict()).data, status=status.HTTP_201_CREATED)


class AgreementQuery(QueryInput):
    rubric = serializers.SlugField(help_text="A rubric slug, e.g. tutor-response.")
    configuration = serializers.IntegerField(required=False, min_value=1, help_text="One judge configuration's id.")


class AgreementView(APIView):
    required_permission = "evaluation.view_judgescore"

    @operation(
        operation_id="judging_agreement",
        tag="judging",
        summary="The judge cards' numbers: agreement per judge configuration and dimension",
        description="For each judge configuration of the rubric (newest first): per dimension, the judge against "
        "people (quadratic-weighted Cohen's kappa, Spearman's rho, exact and within-one agreement), people against "
        "each other and the judge against its repeats (Krippendorff's alpha, ordinal), each with a 95% bootstrap "
        "interval and n; the human ceiling (alternative-annotator test); the confusion matrix; the largest "
        "disagreements; and the change on the canary set against the previous configuration. Each table is read against "
        "the rubric version its configuration judged under (`rubric_version`, with each dimension's `scale` and "
        "`levels` as they were then): labels count where the dimension means the same under that version, and values "
        "of two scales never share a table. `versions` lists every recorded version of the rubric, newest first, with "
        "its scales, the dimensions it changed, its labels and its configurations.\n\n"
        "Each configuration's `probes` are the judge card's bias probes: per dimension, whether the judge's gap to "
        "people (judge minus people, in levels, on the items with both) grows with the words judged (`length`, OLS "
        "slope per word), differs by source (`source`, one-way ANOVA F; null where F is infinite) or grows with the "
        "turn (`position`, OLS slope per turn), each with its p-value and `p_adjusted`, all `tested` p-values "
        "adjusted together by Benjamini-Yekutieli; `finding` is true where `p_adjusted` is at most `q`, and `detail` "
        "says the direction and size. A probe that cannot run has null numbers and a `reason`, and is never a "
        "finding.",
        parameters=[AgreementQuery],
        ok={200: OpenApiTypes.OBJECT},
        invalid="The rubric is missing, or a parameter is not valid.",
        not_found="The rubric or the configuration does not exist.",
    )
    def get(self, request: Request) -> Response:
        query = AgreementQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        rubric = services.rubric_get(query.validated_data["rubric"])
        configurations = selectors.configurations(query.validated_data["rubric"])
        wanted = query.validated_data.get("configuration")
        if wanted is not None:
            configurations = [c for c in configurations if c.pk == wanted]
            if not configurations:
                raise NotFound(f"no judge configuration {wanted} of rubric {query.validated_data['rubric']!r}")
        tables = [
            {**selectors.table_as_dict(selectors.agreement_table(c)), "probes": selectors.bias_probes(c).as_dict()}
            for c in configurations
        ]
        return Response(
            {
                "rubric": query.validated_data["rubric"],
                "current_version": rubric.version,
                "versions": [v.as_dict() for v in selectors.rubric_versions(rubric)],
                "configurations": tables,
            }
        )


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "price_it",
            summary="The price of judging every candidate response 3 times with GPT-5.2 (dry run)",
            value={"rubric": "tutor-response", "provider": "openai/gpt-5.2", "repeats": 3, "dry_run": True},
            request_only=True,
        ),
        OpenApiExample(
            "judge_by_batch",
            summary="Judge the items not yet judged, through the vendor's batch API",
            value={"rubric": "tutor-response", "provider": "anthropic/claude-opus-4-6", "batch": True},
            request_only=True,
        ),
        OpenApiExample(
            "judge_again",
            summary="Judge every item again with the configured judge",
            value={"rubric": "tutor-session", "again": True},
            request_only=True,
        ),
    ]
)
class JudgingJobInput(serializers.Serializer):
    rubric = serializers.SlugField(max_length=100, help_text="A rubric slug, e.g. tutor-response.")
    provider = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        max_length=300,
        help_text="The judge: offline, openai/gpt-5.2, anthropic/claude-opus-4-6, ... (default: the rubric_judge "
        "role's LLM config).",
    )
    repeats = serializers.IntegerField(
        required=False, default=1, min_value=1, max_value=20, help_text="Judge each item k times."
    )
    batch = limits.BooleanField(
        required=False,
        default=False,
        help_text="Send the calls through the vendor's batch API (cheaper, slower); false follows the judge's LLM "
        "config.",
    )
    dry_run = limits.BooleanField(
        required=False,
        default=False,
        help_text="Answer 200 with the calls, tokens and price (direct and by batch) and start nothing: nothing "
        "is queued, judged or sent.",
    )
    again = limits.BooleanField(
        required=False, default=False, help_text="Judge items already judged under the same configuration too."
    )


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "queued",
            summary="A job queued on a worker",
            value={
                "task": "judging-tutor-response-3f2a9c1b7d4e",
                "rubric": "tutor-response",
                "provider": "openai/gpt-5.2",
                "repeats": 3,
                "batch": False,
                "again": False,
                "items": 1200,
            },
            response_only=True,
            status_codes=["202"],
        )
    ]
)
class JudgingJobOutput(Output):
    """A judging job queued on a worker."""

    task = serializers.CharField(help_text="The worker task's name; its result is the job's report.")
    rubric = serializers.CharField()
    provider = serializers.CharField(help_text="The judge, as resolved when the job was queued.")
    repeats = serializers.IntegerField()
    batch = serializers.BooleanField()
    again = serializers.BooleanField()
    items = serializers.IntegerField(
        help_text="Items of the rubric's unit now; those already judged are skipped unless `again`."
    )


class JudgingJobsView(APIView):
    required_permission = "evaluation.add_transcript"
    parser_classes = [JSONParser]

    @operation(
        operation_id="judging_jobs_create",
        tag="judging",
        summary="Judge a rubric's imported items on a worker, or price it first (dry_run)",
        description="Queues `manage.py judge_imported` on a worker: every imported item of the rubric's unit is "
        "judged `repeats` times (the canary set first; items already judged under the same configuration are "
        "skipped unless `again`), and the task's result is its report: items judged and failed, calls, tokens "
        "(cache reads and writes apart) and cost. With `batch: true` the worker sends one provider batch and a "
        "polling task stores the scores when it ends. A job runs for at most EVAL_TASK_TIMEOUT (1 h by default); "
        "the scores it stored stay, so a job cut short is finished by queuing it again (without `again`), or "
        "sent by batch.\n\n"
        "With `dry_run: true` the answer is 200 with the price before anything is sent: one call per item and "
        "repeat, each the rubric's prompt and the item's own text, sized and priced at today's price table (low: "
        "typical replies; high: every reply at the judge's max_tokens), direct and by batch. Nothing is queued, "
        "judged or sent.",
        request=JudgingJobInput,
        ok={202: JudgingJobOutput, 200: ForecastOutput},
        invalid="A field is not valid: an unknown rubric, repeats out of range, an unknown provider, or a provider "
        "whose API key (OPENAI_API_KEY, ANTHROPIC_API_KEY) is not set.",
        body=True,
        invalid_example=field_error("repeats", "Ensure this value is greater than or equal to 1."),
    )
    def post(self, request: Request) -> Response:
        body = JudgingJobInput(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        if data["dry_run"]:
            try:
                rubric = services.rubric_get(data["rubric"])
            except NotFound as exc:
                raise InvalidInput([FieldProblem("rubric", str(exc))]) from None
            found = selectors.judging_forecast(
                rubric=rubric, provider=data["provider"] or None, repeats=data["repeats"]
            )
            return Response(forecast_body(found), status=status.HTTP_200_OK)
        job = services.transcripts_judge_later(
            rubric=data["rubric"],
            provider=data["provider"] or None,
            repeats=data["repeats"],
            batch=data["batch"],
            again=data["again"],
        )
        return Response(JudgingJobOutput(job.as_dict()).data, status=status.HTTP_202_ACCEPTED)


class EstimatesQuery(QueryInput):
    rubric = serializers.SlugField(help_text="A rubric slug, e.g. tutor-response.")
    configuration = serializers.IntegerField(
        required=False, min_value=1, help_text="One judge configuration's id (default: the newest)."
    )
    # DRF's metaclass takes declared fields off the class, so this does not hide Field.source.
    source = serializers.CharField(  # type: ignore[assignment]
        required=False, max_length=100, help_text="Only items of this transcript source."
    )
    candidate = serializers.CharField(required=False, max_length=100, help_text="Only candidates of this name.")
    group = serializers.CharField(required=False, max_length=120, help_text="Only conversations of this run group.")
    labelled = serializers.IntegerField(
        required=False, min_value=0, max_value=10_000_000, help_text="Keep the people's labels of this many items."
    )
    seed = serializers.IntegerField(required=False, default=0, min_value=0, max_value=2**32 - 1)
    compare = serializers.CharField(
        required=False,
        max_length=250,
        validators=[RegexValidator(r"^[^,]*[^,\s][^,]*,[^,]*[^,\s][^,]*$", "two names separated by a comma, A,B")],
        help_text="Two groups `A,B`: the corrected difference A minus B between them instead (grouped by `by`).",
    )
    by = serializers.ChoiceField(
        choices=list(selectors.GROUPINGS),
        default="source",
        help_text="What `compare` names: sources, candidates or run groups.",
    )

    def validate_compare(self, value: str) -> list[str]:
        names = [name.strip() for name in value.split(",")]
        if len(names) != 2 or not all(names):
            raise serializers.ValidationError("two names separated by a comma, A,B")
        if names[0] == names[1]:
            raise serializers.ValidationError(f"compares {names[0]!r} with itself: name two different groups")
        return names

    budget = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Also `budget`: per dimension, the corrected interval's width by labelled items and what to label "
        "next (not with `compare`).",
    )


def _estimate(found: selectors.MeanEstimate) -> dict[str, Any]:
    return {**found.as_dict(), "n": found.n, "method": found.method, "reason": found.reason or None, "lam": found.lam}


class EstimatesView(APIView):
    required_permission = "evaluation.view_judgescore"

    @operation(
        operation_id="judging_estimates",
        tag="judging",
        summary="Corrected estimates: the judge's mean, the people's and the prediction-powered one",
        description="Per dimension of the rubric, within one judge configuration (the newest by default) and the "
        "selected items: `judge_only`, the judge's mean over every judged item with its CLT 95% interval (biased by "
        "whatever the judge gets wrong); `people_only`, the people's mean over the labelled items with its CLT "
        "interval and n; `corrected`, the prediction-powered estimate with its 95% interval and `method`: stratified "
        "by the judge's level where each level holds two labels (StratPPI, Fisch et al. 2024; `lam` null), else PPI++ "
        "(power-tuned; Angelopoulos et al. 2023, 2024; `lam` its tuning parameter); `all_people`, the people's mean over every judged "
        "item where every one has labels, else null. A numeric scale's estimand is `mean`, a categorical scale's "
        "`share:<label>` for each label, the first label of the scale first. Where there is not enough data (fewer "
        "than 2 labelled items) a value is null and `reason` says why. `labelled` keeps the people's labels of that "
        "many items only (drawn with `seed`), to show what a labelling budget buys.\n\n"
        "With `compare=A,B` (and `by`: `source`, `candidate` or `group`, a run group) it answers instead the corrected "
        "difference A minus B per estimand: `a` and `b`, each group's corrected estimate, and `difference`, their "
        "difference with its 95% interval (two independent corrected estimates, variances added), beside "
        "`judge_only_difference`, the judge's own; `groups` gives each group's judged and labelled items. A group "
        "with no judged items is refused (400, naming it), and so is `compare` beside `source`, `candidate` or `group`; "
        "one with fewer than 2 labelled items gives null values and a `reason`.\n\n"
        "Each estimate's `method` names its procedure and its caveats after a `; `: few labels (n<30), a share "
        "whose labelled values are all equal (given the Wilson score interval of k of n, never one of no width), "
        "clipping to the scale. A mean whose labelled values are all equal has a `value`, null `low` and `high`, "
        "and a `reason`.\n\n"
        "With `budget=true` it adds `budget`: per dimension, its estimand with the widest corrected interval, "
        "`points` (the corrected interval's median width with `labelled` items, its 10th-90th percentiles "
        "`corrected_low`, `corrected_high`, and the people-only width, over seeded subsamples) and `label_next` "
        "(the item ids to label next).",
        parameters=[EstimatesQuery],
        ok={200: OpenApiTypes.OBJECT},
        invalid="The rubric is missing, or a parameter is not valid.",
        not_found="The rubric or the configuration does not exist, or nothing was judged with it.",
    )
    def get(self, request: Request) -> Response:
        query = EstimatesQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        if "compare" in data:
            return self.compare(data)
        table = selectors.estimate_table(
            data["rubric"],
            configuration=data.get("configuration"),
            selection=selectors.Selection(
                source=data.get("source"), candidate=data.get("candidate"), group=data.get("group")
            ),
            labelled=data.get("labelled"),
            seed=data["seed"],
        )
        body = table.as_dict()
        for row, shown in zip(table.rows, body["dimensions"], strict=True):  # type: ignore[call-overload]
            shown["corrected"] |= {
                "n": row.corrected.n,
                "lam": row.corrected.lam,
                "unlabelled": row.corrected.unlabelled,
            }
            for key in ("judge_only", "people_only", "corrected"):
                found = getattr(row, key)
                shown[key] |= {"method": found.method, "reason": found.reason or None}
            shown["judge_only"]["n"] = row.judge_only.n
        if data["budget"]:
            body["budget"] = [b.as_dict() for b in selectors.estimate_budget(table, seed=data["seed"])]
        return Response(
            {
                **body,
                "rubric_version": table.rubric_version,
                "configuration": table.configuration,
                "configuration_id": table.configuration_id,
                "selection": table.selection,
                "items": table.items,
                "labelled": table.labelled,
            }
        )

    def compare(self, data: dict[str, Any]) -> Response:
        by, (a, b) = data["by"], data["compare"]
        first, second, rows = selectors.estimate_compare(
            data["rubric"],
            by,
            a,
            b,
            configuration=data.get("configuration"),
            labelled=data.get("labelled"),
            seed=data["seed"],
            selection=selectors.Selection(
                source=data.get("source"), candidate=data.get("candidate"), group=data.get("group")
            ),
            budget=data["budget"],
        )
        return Response(
            {
                "rubric": first.rubric,
                "rubric_version": first.rubric_version,
                "configuration": first.configuration,
                "configuration_id": first.configuration_id,
                "by": by,
                "a": a,
                "b": b,
                "groups": [
                    {"name": name, "items": table.items, "labelled": table.labelled}
                    for name, table in ((a, first), (b, second))
                ],
                "dimensions": [
                    {
                        "name": row.dimension,
                        "estimand": row.estimand,
                        "a": _estimate(row.a),
                        "b": _estimate(row.b),
                        "difference": _estimate(row.corrected),
                        "judge_only_difference": _estimate(row.judge_only),
                    }
                    for row in rows
                ],
            }
        )
