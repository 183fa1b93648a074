"""Labelling queues: make one, add items, assign people, take the next item, submit labels, settle
disagreements, read progress and agreement, export the labels. For teams whose annotators label in their own
tools. An annotator sees only the queues they are on and their items; a queue's owner sees everything."""

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluation.api.parsers import JSONParser
from evaluation.api.schema import body_example, operation, path_parameter
from evaluation.judging import selectors, services

QUEUE_ID = path_parameter("queue_id", "A labelling queue's id.", int, example=1)
NO_QUEUE = "No queue with this id that the caller owns, labels or adjudicates."
LABELS = serializers.DictField(
    child=serializers.CharField(max_length=100, allow_blank=True),
    help_text='Per dimension, the level: {"Tutor_Tone": "Encouraging", "Coherence": "Yes"}.',
)


def _owner(queue: Any, user: Any) -> None:
    if selectors.queue_role(queue, user) != "owner":
        raise PermissionDenied("only the queue's owner may change it")


@extend_schema_serializer(
    examples=[
        body_example(
            "label_next",
            "Label next's 20 picks, two people each, blind",
            {
                "name": "tone check",
                "rubric": "tutor-response",
                "origin": "label-next",
                "count": 20,
                "annotators": ["alice", "bob"],
                "adjudicators": ["carol"],
            },
        )
    ]
)
class QueueInput(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    rubric = serializers.SlugField(max_length=100, help_text="A rubric slug, e.g. tutor-response.")
    origin = serializers.ChoiceField(
        choices=["label-next", "filter", "random", "job", "items"],
        default="items",
        help_text="Where the items come from: label next's picks for the configuration (to narrow its corrected "
        "interval most), a filter (source, candidate, group), a random sample, the items a judge configuration "
        "scored (job), or `items`.",
    )
    items = serializers.ListField(
        child=serializers.IntegerField(min_value=1), required=False, default=list, max_length=5000
    )
    count = serializers.IntegerField(required=False, min_value=1, max_value=5000, allow_null=True, default=None)
    seed = serializers.IntegerField(required=False, min_value=0, max_value=2**32 - 1, default=0)
    configuration = serializers.IntegerField(
        required=False, min_value=1, allow_null=True, default=None, help_text="Default: the rubric's newest."
    )
    # DRF's metaclass takes declared fields off the class, so this does not hide Field.source.
    source = serializers.CharField(required=False, max_length=100, allow_null=True, default=None)  # type: ignore[assignment]
    candidate = serializers.CharField(required=False, max_length=100, allow_null=True, default=None)
    group = serializers.CharField(required=False, max_length=120, allow_null=True, default=None)
    annotators = serializers.ListField(
        child=serializers.CharField(max_length=150), required=False, default=list, max_length=200
    )
    adjudicators = serializers.ListField(
        child=serializers.CharField(max_length=150), required=False, default=list, max_length=200
    )
    labels_per_item = serializers.IntegerField(required=False, min_value=1, max_value=10, default=2)
    blind = serializers.BooleanField(required=False, default=True)
    claim_seconds = serializers.IntegerField(required=False, min_value=30, max_value=86_400, default=600)


class QueueOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    rubric = serializers.CharField()
    rubric_version = serializers.IntegerField()
    items = serializers.IntegerField()
    labels_per_item = serializers.IntegerField()
    blind = serializers.BooleanField()
    owner = serializers.CharField(allow_null=True)
    origin = serializers.CharField(help_text="What the items were chosen by.")


def _queue_body(queue: Any) -> dict[str, Any]:
    return {
        "id": queue.pk,
        "name": queue.name,
        "rubric": queue.rubric.slug,
        "rubric_version": queue.rubric_version.number,
        "items": queue.entries.count(),
        "labels_per_item": queue.labels_per_item,
        "blind": queue.blind,
        "owner": queue.owner.get_username() if queue.owner else None,
        "origin": queue.origin_detail or queue.origin,
    }


class QueuesView(APIView):
    parser_classes = [JSONParser]

    @property
    def required_permission(self) -> str:
        return "evaluation.add_labelqueue" if self.request.method == "POST" else "evaluation.view_labelqueue"

    @operation(
        operation_id="judging_queues_list",
        tag="judging",
        summary="The labelling queues the caller owns, labels or adjudicates",
        description="Newest first. A superuser sees every queue.",
        ok={200: QueueOutput(many=True)},
    )
    def get(self, request: Request) -> Response:
        return Response([_queue_body(q) for q in selectors.queues_for(request.user)])

    @operation(
        operation_id="judging_queues_create",
        tag="judging",
        summary="Make a labelling queue",
        description="The caller owns it. Items come from `origin`; the people named (user names) label them, "
        "each item by `labels_per_item` different people; blind queues hide the judge's scores and other people's "
        "labels from each person until their own labels for the item are in. The widths of the corrected intervals "
        "now are kept, for the queue's progress to compare with.",
        request=QueueInput,
        ok={201: QueueOutput},
        invalid="A field is not valid: an unknown rubric, user or configuration, items not of the rubric's unit, "
        "a filter with nothing to filter by.",
        body=True,
    )
    def post(self, request: Request) -> Response:
        body = QueueInput(data=request.data)
        body.is_valid(raise_exception=True)
        queue = services.queue_create(owner=request.user, **body.validated_data)
        return Response(_queue_body(queue), status=status.HTTP_201_CREATED)


class QueueView(APIView):
    required_permission = "evaluation.view_labelqueue"

    @operation(
        operation_id="judging_queues_retrieve",
        tag="judging",
        summary="A queue's progress and the agreement between its people",
        description="`people`: per person, items labelled and skipped, items still open to them and the median "
        "seconds a label took. `agreement`: per dimension, on items with two or more labels, Krippendorff's alpha "
        "(ordinal) between people with its 95% bootstrap interval and n, as on the judge card, from raw labels "
        "only; the share of those items where everyone agreed. `widths`: each dimension's corrected interval "
        "width when the queue was made and now (the people's value of an item: `people_value`). `disagreements` "
        "(the owner and adjudicators only): each item where people differ, their labels and any adjudication.",
        parameters=[QUEUE_ID],
        ok={200: OpenApiTypes.OBJECT},
        not_found=NO_QUEUE,
        not_found_example="no queue 999 of yours",
    )
    def get(self, request: Request, queue_id: int) -> Response:
        queue = selectors.queue_get(queue_id, request.user)
        role = selectors.queue_role(queue, request.user)
        report = selectors.queue_report(queue)
        return Response({**_queue_body(queue), "role": role, **report.as_dict(owner=role in ("owner", "adjudicator"))})


@extend_schema_serializer(examples=[body_example("items", "Three judged items to label", {"items": [12, 13, 14]})])
class ItemsInput(serializers.Serializer):
    items = serializers.ListField(child=serializers.IntegerField(min_value=1), min_length=1, max_length=5000)


class QueueItemsView(APIView):
    required_permission = "evaluation.add_labelqueue"
    parser_classes = [JSONParser]

    @operation(
        operation_id="judging_queues_items_add",
        tag="judging",
        summary="Add items to a queue (its owner)",
        description="Items already in the queue are left as they are; `added` counts the new ones.",
        parameters=[QUEUE_ID],
        request=ItemsInput,
        ok={200: OpenApiTypes.OBJECT},
        invalid="An id names no item of the rubric's unit.",
        not_found=NO_QUEUE,
        not_found_example="no queue 999 of yours",
        body=True,
    )
    def post(self, request: Request, queue_id: int) -> Response:
        queue = selectors.queue_get(queue_id, request.user)
        _owner(queue, request.user)
        body = ItemsInput(data=request.data)
        body.is_valid(raise_exception=True)
        added = services.queue_items_add(queue=queue, items=body.validated_data["items"])
        return Response({"added": added, "items": queue.entries.count()})


@extend_schema_serializer(
    examples=[
        body_example(
            "people", "Two annotators and an adjudicator", {"annotators": ["alice", "bob"], "adjudicators": ["carol"]}
        )
    ]
)
class PeopleInput(serializers.Serializer):
    annotators = serializers.ListField(
        child=serializers.CharField(max_length=150), required=False, allow_null=True, default=None, max_length=200
    )
    adjudicators = serializers.ListField(
        child=serializers.CharField(max_length=150), required=False, allow_null=True, default=None, max_length=200
    )


class QueuePeopleView(APIView):
    required_permission = "evaluation.add_labelqueue"
    parser_classes = [JSONParser]

    @operation(
        operation_id="judging_queues_people_set",
        tag="judging",
        summary="Assign the people of a queue (its owner)",
        description="Each list given replaces the one there (user names); a list left out stays.",
        parameters=[QUEUE_ID],
        request=PeopleInput,
        ok={200: OpenApiTypes.OBJECT},
        invalid="A user name names nobody.",
        not_found=NO_QUEUE,
        not_found_example="no queue 999 of yours",
        body=True,
    )
    def post(self, request: Request, queue_id: int) -> Response:
        queue = selectors.queue_get(queue_id, request.user)
        _owner(queue, request.user)
        body = PeopleInput(data=request.data)
        body.is_valid(raise_exception=True)
        services.queue_people_set(queue=queue, **body.validated_data)
        return Response(
            {
                "annotators": sorted(u.get_username() for u in queue.annotators.all()),
                "adjudicators": sorted(u.get_username() for u in queue.adjudicators.all()),
            }
        )


class QueueNextView(APIView):
    required_permission = "evaluation.add_annotation"

    @operation(
        operation_id="judging_queues_next",
        tag="judging",
        summary="The next item for the caller to label (claims it)",
        description="The item the caller holds, else the next free one, claimed for the queue's `claim_seconds`: "
        "nobody else is given it meanwhile, and after that it may go to someone else. The conversation (or the "
        "candidate response and its dialogue), each dimension with its levels and their meanings. In a blind "
        "queue `judge` and `others` stay empty until the caller's own labels are in. Where nothing is free for "
        "the caller now (every item labelled or skipped by them, complete, or held by others), `item` is null "
        "and `reason` says which.",
        parameters=[QUEUE_ID],
        request=None,
        ok={200: OpenApiTypes.OBJECT},
        not_found=NO_QUEUE,
        not_found_example="no queue 999 of yours to label",
    )
    def post(self, request: Request, queue_id: int) -> Response:
        queue = selectors.queue_get(queue_id, request.user)
        entry = services.queue_claim(queue=queue, user=request.user)
        if entry is None:
            report = selectors.queue_progress(queue)
            mine = report.person(request.user.get_username())
            if report.complete == report.items:
                reason = "every item has the labels it needs"
            elif mine is not None and mine.remaining == 0:
                reason = "you labelled or skipped every item open to you"
            else:
                reason = "every open item is held by someone else now: ask again in a minute"
            return Response({"item": None, "reason": reason})
        return Response(selectors.queue_item_view(queue, entry, request.user))


@extend_schema_serializer(
    examples=[body_example("labels", "Every dimension's level", {"item": 12, "labels": {"Tutor_Tone": "Neutral"}})]
)
class SubmitInput(serializers.Serializer):
    item = serializers.IntegerField(min_value=1)
    labels = LABELS
    comment = serializers.CharField(required=False, default="", allow_blank=True, max_length=5000)
    skip = serializers.BooleanField(required=False, default=False, help_text="Skip the item (no labels).")


class QueueLabelsView(APIView):
    parser_classes = [JSONParser]

    @property
    def required_permission(self) -> str:
        return "evaluation.add_annotation" if self.request.method == "POST" else "evaluation.view_labelqueue"

    @operation(
        operation_id="judging_queues_labels_submit",
        tag="judging",
        summary="Submit the caller's labels of one item (every dimension), or skip it",
        description="Allowed while the caller holds the item, or where they labelled it before (changing their "
        "labels). The labels count at once in the judge card's agreement, corrected estimates and label budget.",
        parameters=[QUEUE_ID],
        request=SubmitInput,
        ok={200: OpenApiTypes.OBJECT},
        invalid="A dimension is missing or unknown, or a level is not on its scale (`fields` names it).",
        not_found=NO_QUEUE,
        not_found_example="no queue 999 of yours to label",
        conflict="The claim lapsed and the item went to someone else, or it has all the labels it needs.",
        conflict_example="item 12 is being labelled by someone else: take the next item",
        body=True,
    )
    def post(self, request: Request, queue_id: int) -> Response:
        queue = selectors.queue_get(queue_id, request.user)
        body = SubmitInput(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        turn = services.queue_submit(
            queue=queue,
            user=request.user,
            item_id=data["item"],
            values=data["labels"],
            comment=data["comment"],
            skip=data["skip"],
        )
        return Response(
            {"item": data["item"], "skipped": turn.skipped, "seconds": turn.seconds, "submitted": not turn.skipped}
        )

    @operation(
        operation_id="judging_queues_labels_export",
        tag="judging",
        summary="Every label of a queue's items (the owner and adjudicators)",
        description="One row per label: item, dimension, `kind` (`label`, a person's raw label, or `adjudication`, "
        "the final label stored apart), annotator, value, rubric and its version, when, the seconds it took, the "
        "comment, and the item's adjudicated value and adjudicator where set.",
        parameters=[QUEUE_ID],
        ok={200: OpenApiTypes.OBJECT},
        not_found=NO_QUEUE,
        not_found_example="no queue 999 of yours",
    )
    def get(self, request: Request, queue_id: int) -> Response:
        queue = selectors.queue_get(queue_id, request.user)
        if selectors.queue_role(queue, request.user) not in ("owner", "adjudicator"):
            raise PermissionDenied("the export is for the queue's owner and adjudicators")
        return Response({"fields": list(selectors.EXPORT_FIELDS), "rows": selectors.queue_export_rows(queue)})


@extend_schema_serializer(
    examples=[
        body_example(
            "settle", "The final level of each dimension", {"item": 12, "labels": {"Tutor_Tone": "Encouraging"}}
        )
    ]
)
class AdjudicateInput(serializers.Serializer):
    item = serializers.IntegerField(min_value=1)
    labels = LABELS


class QueueAdjudicationsView(APIView):
    required_permission = "evaluation.add_annotation"
    parser_classes = [JSONParser]

    @operation(
        operation_id="judging_queues_adjudicate",
        tag="judging",
        summary="Settle an item's labels (an adjudicator who did not label it, or the owner)",
        description="The final level per dimension, stored apart from the raw labels (which stay). Every figure "
        "then uses it as the people's value of the item against the judge, and says so.",
        parameters=[QUEUE_ID],
        request=AdjudicateInput,
        ok={200: OpenApiTypes.OBJECT},
        invalid="A dimension is unknown or a level is not on its scale.",
        not_found=NO_QUEUE,
        not_found_example="no queue 999 of yours to adjudicate",
        conflict="The caller labelled the item: a third person settles it.",
        conflict_example="you labelled this item: a third person (or the queue's owner) settles it",
        body=True,
    )
    def post(self, request: Request, queue_id: int) -> Response:
        queue = selectors.queue_get(queue_id, request.user)
        body = AdjudicateInput(data=request.data)
        body.is_valid(raise_exception=True)
        written = services.queue_adjudicate(
            queue=queue, user=request.user, item_id=body.validated_data["item"], values=body.validated_data["labels"]
        )
        return Response({"item": body.validated_data["item"], "adjudicated": written})
