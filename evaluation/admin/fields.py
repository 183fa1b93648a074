"""Admin form fields that refuse what no column can hold, naming the field (docs/limits.md)."""

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import models
from django.forms.fields import InvalidJSONInput, JSONString

from evaluation import limits
from evaluation.errors import InvalidInput


class CheckedJSONField(forms.JSONField):
    """Django's JSON form field, reading the text as every other JSON door does (limits.json_loads): a lone
    surrogate, a NUL, an integer longer than Python converts or NaN is a form error naming where it is,
    not a 500 when the record is saved."""

    def to_python(self, value: Any) -> Any:
        if not (
            self.disabled or value in self.empty_values or isinstance(value, list | dict | int | float | JSONString)
        ):
            try:
                limits.json_loads(str(value), field="", where="")
            except InvalidInput as exc:
                raise ValidationError(str(exc), code="invalid") from None
        return super().to_python(value)

    def bound_data(self, data: Any, initial: Any) -> Any:
        """The form shown again with the text as typed: the parsed value of a refused text cannot be shown."""
        if not self.disabled and isinstance(data, str) and data not in self.empty_values:
            try:
                limits.json_loads(data, field="", where="")
            except InvalidInput:
                return InvalidJSONInput(data)
        return super().bound_data(data, initial)


CHECKED_JSON: "dict[type[models.Field[Any, Any]], dict[str, Any]]" = {
    models.JSONField: {"form_class": CheckedJSONField}
}


def check_json_fields(site: admin.AdminSite) -> None:
    """Give every model admin of this app registered on `site` (and its inlines) CheckedJSONField for its
    JSON columns."""
    for model_admin in site._registry.values():
        if not type(model_admin).__module__.startswith("evaluation."):
            continue
        # the instance's own copy: ModelAdmin.__init__ has merged the class's overrides with Django's defaults
        setattr(model_admin, "formfield_overrides", {**model_admin.formfield_overrides, **CHECKED_JSON})  # noqa: B010
        for inline in model_admin.inlines:
            inline.formfield_overrides = {**inline.formfield_overrides, **CHECKED_JSON}
