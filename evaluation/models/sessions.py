"""Sessions of the built-in reference tutor, as its session protocol stores them."""

import uuid

from django.db import models

from evaluation.models.catalog import Topic


class TutoringSession(models.Model):
    """One tutoring conversation with the reference tutor (real students or eval students)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    topic = models.ForeignKey(Topic, on_delete=models.PROTECT, related_name="sessions")
    user = models.CharField(max_length=100, default="eval-student")
    is_complete = models.BooleanField(default=False)
    full_conversation_log = models.JSONField(default=list, blank=True)
    conversation_history = models.JSONField(default=list, blank=True)
    state = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Session {self.id} ({self.topic.topic_id})"
