"""Filters of the database lists (django-filter): users, groups, access rules, log records.

Each FilterSet validates its query parameters (a bad value is a 400) and hands the clean
values to the action that builds the queryset, so the portal's pages and the REST API
filter the same way.
"""

from __future__ import annotations

import django_filters

from broker.admintools import security_actions
from broker.admintools.actions.log import log_records
from broker.models import AccessRule, BrokerGroup, BrokerUser, LogRecord

from .serializers import LOG_LEVELS


class ActionFilterSet(django_filters.FilterSet):
    """A FilterSet whose filtering is one action call with the cleaned values."""

    def action(self, **values):  # pragma: no cover - overridden
        raise NotImplementedError

    def filter_queryset(self, queryset):
        values = {k: v for k, v in self.form.cleaned_data.items() if v not in (None, "")}
        return self.action(**values)


class UserFilter(ActionFilterSet):
    search = django_filters.CharFilter(
        label="Only users whose name contains this text.", max_length=150
    )
    group = django_filters.CharFilter(label="Only members of this group.", max_length=100)
    active = django_filters.BooleanFilter(label="Only enabled (true) or disabled (false) users.")

    class Meta:
        model = BrokerUser
        fields: list[str] = []

    def action(self, **values):
        return security_actions.users_queryset(**values)


class GroupFilter(ActionFilterSet):
    search = django_filters.CharFilter(
        label="Only groups whose name contains this text.", max_length=100
    )

    class Meta:
        model = BrokerGroup
        fields: list[str] = []

    def action(self, **values):
        return security_actions.groups_queryset(**values)


class RuleFilter(ActionFilterSet):
    instance = django_filters.CharFilter(
        label="Only the rules of this broker instance (empty value: the rules for every broker).",
        max_length=255,
    )
    search = django_filters.CharFilter(
        label="Only rules whose key or value contains this text.", max_length=400
    )

    class Meta:
        model = AccessRule
        fields: list[str] = []

    def filter_queryset(self, queryset):
        values = {k: v for k, v in self.form.cleaned_data.items() if v not in (None, "")}
        if "instance" in self.data:  # ?instance= (empty) asks for the all-brokers rules
            values["instance"] = self.form.cleaned_data.get("instance") or ""
        return security_actions.rules_queryset(**values)


class LogRecordFilter(ActionFilterSet):
    level = django_filters.ChoiceFilter(
        choices=[(lv, lv) for lv in LOG_LEVELS],
        label="Minimum level: this level and the more severe ones.",
    )
    since = django_filters.IsoDateTimeFilter(label="Records at or after this time (ISO 8601).")
    until = django_filters.IsoDateTimeFilter(label="Records at or before this time (ISO 8601).")
    search = django_filters.CharFilter(
        label="Only records whose message contains this text.", max_length=1000
    )
    instance = django_filters.CharFilter(
        label="Only records of this broker instance.", max_length=255
    )

    class Meta:
        model = LogRecord
        fields: list[str] = []

    def action(self, search=None, **values):
        return log_records(text=search, **values)
