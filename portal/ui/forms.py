"""The portal's forms.  They only check the shape of the input; the action functions
(broker/admintools/actions/, broker/security/...) decide whether a change is allowed."""

from __future__ import annotations

from django import forms
from django.contrib.auth.forms import AuthenticationForm

from broker.loglevels import RECORD_LEVELS
from broker.protocol.types import DestState
from portal.auth import is_administrator

from .access import NOT_ADMIN

# --------------------------------------------------------------------------------------
# Login
# --------------------------------------------------------------------------------------


class AdminLoginForm(AuthenticationForm):
    """The login form: right password is not enough, the user must be an administrator."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "Wrong user name or password (or the user is inactive).",
        "not_admin": NOT_ADMIN,
    }

    def confirm_login_allowed(self, user) -> None:
        super().confirm_login_allowed(user)
        if not is_administrator(user):
            raise forms.ValidationError(
                self.error_messages["not_admin"].format(user=user.get_username()),
                code="not_admin",
            )


# --------------------------------------------------------------------------------------
# Destinations
# --------------------------------------------------------------------------------------

BOOL_CHOICES = [("", "(unchanged / default)"), ("true", "true"), ("false", "false")]


def attribute_specs(kind: str | None = None):
    """The destination attributes the forms offer (broker/protocol/dest_attributes.py), those of
    queues (``kind`` "q") or topics ("t") only when given."""
    from broker.protocol.dest_attributes import DESTINATION_ATTRIBUTES

    if kind is None:
        return list(DESTINATION_ATTRIBUTES)
    return [a for a in DESTINATION_ATTRIBUTES if a.applies(kind == "t")]


def _attribute_field(attr) -> forms.Field:
    from broker.protocol import dest_attributes as A

    help_text = attr.doc
    if attr.applies_to:
        help_text = f"({attr.applies_to}s only) {help_text}"
    if attr.type == A.CHOICE:
        return forms.ChoiceField(
            choices=[("", "(unchanged / default)")] + [(c, c) for c in attr.choices],
            required=False,
            label=attr.name,
            help_text=help_text,
        )
    if attr.type == A.BOOL:
        return forms.ChoiceField(
            choices=BOOL_CHOICES, required=False, label=attr.name, help_text=help_text
        )
    if attr.type == A.STRING:
        return forms.CharField(
            required=False,
            label=attr.name,
            help_text=help_text,
            max_length=2000,
            widget=forms.TextInput(attrs={"size": 50}),
        )
    return forms.CharField(
        required=False,
        label=attr.name,
        help_text=help_text,
        max_length=40,
        widget=forms.TextInput(attrs={"size": 14}),
    )


def _display(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


class DestinationAttributesForm(forms.Form):
    """One field per destination attribute; an empty field means "leave as is" (or, when
    creating, the broker's default).  The action converts and checks the values."""

    def __init__(
        self, *args, current: dict | None = None, kind: str | None = None, **kwargs
    ) -> None:
        initial = {k: _display(v) for k, v in (current or {}).items()}
        kwargs.setdefault("initial", initial)
        super().__init__(*args, **kwargs)
        self._attribute_names = [a.name for a in attribute_specs(kind)]
        for attr in attribute_specs(kind):
            self.fields[attr.name] = _attribute_field(attr)

    def attribute_fields(self):
        return [self[name] for name in self._attribute_names]

    def clean(self):
        """Every attribute the broker would refuse, each beside its own field, rather than
        the action's first refusal alone (the action checks again)."""
        from broker.protocol.dest_attributes import convert_each

        data = super().clean()
        given = {
            name: value.strip()
            for name in self._attribute_names
            if isinstance(value := data.get(name), str) and value.strip()
        }
        _, errors = convert_each(given, self._is_topic(data))
        for name, message in errors.items():
            self.add_error(name, message)
        return data

    def _is_topic(self, data: dict) -> bool | None:
        return None

    def attributes(self, changed_only: bool = False) -> dict[str, str]:
        """The attributes given (or, with ``changed_only``, those that differ from now)."""
        out = {}
        for name in self._attribute_names:
            value = (self.cleaned_data.get(name) or "").strip()
            if not value:
                continue
            if changed_only and value == _display(self.initial.get(name)).strip():
                continue
            out[name] = value
        return out


class DestinationCreateForm(DestinationAttributesForm):
    kind = forms.ChoiceField(label="Type", choices=[("q", "Queue"), ("t", "Topic")], initial="q")
    name = forms.CharField(
        label="Name",
        max_length=255,
        help_text="Letters, digits, _ and $ (and . between words); topics may use * and > wildcards.",
    )

    def clean_name(self) -> str:
        from broker.protocol.dest_attributes import destination_name_problem

        name = self.cleaned_data["name"].strip()
        problem = destination_name_problem(name)
        if problem:
            raise forms.ValidationError(problem)
        return name

    def _is_topic(self, data: dict) -> bool | None:
        kind = data.get("kind")
        return None if kind not in ("q", "t") else kind == "t"


class PauseDestinationForm(forms.Form):
    what = forms.ChoiceField(
        label="Pause",
        choices=[
            ("all", "producers and consumers"),
            ("producers", "producers"),
            ("consumers", "consumers"),
        ],
        initial="all",
    )


# --------------------------------------------------------------------------------------
# Broker and services
# --------------------------------------------------------------------------------------


class BrokerPropertiesForm(forms.Form):
    properties = forms.CharField(
        label="Properties to change",
        widget=forms.Textarea(attrs={"rows": 5, "cols": 60, "placeholder": "imq.log.level=INFO"}),
        help_text="One name=value per line. The broker refuses properties it cannot change while running.",
    )

    def clean_properties(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for n, line in enumerate(self.cleaned_data["properties"].splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if "=" not in line:
                raise forms.ValidationError(f"line {n}: expected name=value, got {line!r}")
            name, value = line.split("=", 1)
            if not name.strip():
                raise forms.ValidationError(f"line {n}: the property name is empty")
            out[name.strip()] = value.strip()
        if not out:
            raise forms.ValidationError("give at least one name=value line")
        return out


class ServiceUpdateForm(forms.Form):
    port = forms.IntegerField(
        label="Port",
        required=False,
        min_value=0,
        max_value=65535,
        help_text="0: chosen by the system.",
    )
    max_threads = forms.IntegerField(
        label="Maximum connections",
        required=False,
        min_value=1,
        help_text="OpenMQ's maxThreads: connections the service accepts at most.",
    )
    min_threads = forms.IntegerField(label="Minimum threads", required=False, min_value=0)


# --------------------------------------------------------------------------------------
# Users, groups and access control rules
# --------------------------------------------------------------------------------------


def _group_list(text: str) -> list[str]:
    return [g.strip() for g in (text or "").replace(";", ",").split(",") if g.strip()]


class UserCreateForm(forms.Form):
    username = forms.CharField(label="User name", max_length=150)
    password = forms.CharField(label="Password", widget=forms.PasswordInput(render_value=False))
    groups = forms.CharField(
        label="Groups",
        initial="user",
        required=False,
        help_text="Comma-separated; members of admin administer the broker and use this portal.",
    )
    active = forms.BooleanField(label="Active", required=False, initial=True)

    def clean_groups(self) -> list[str]:
        return _group_list(self.cleaned_data.get("groups", ""))


class UserUpdateForm(forms.Form):
    password = forms.CharField(
        label="New password",
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Leave empty to keep the password.",
    )
    groups = forms.CharField(label="Groups", required=False, help_text="Comma-separated.")
    active = forms.BooleanField(label="Active", required=False)

    def clean_groups(self) -> list[str]:
        return _group_list(self.cleaned_data.get("groups", ""))


class GroupCreateForm(forms.Form):
    name = forms.CharField(label="Group name", max_length=100)
    description = forms.CharField(label="Description", required=False, max_length=500)


class RuleForm(forms.Form):
    key = forms.CharField(
        label="Rule",
        max_length=400,
        help_text="e.g. queue.orders.consume.allow.group, connection.NORMAL.deny.user, topic.create.allow.user",
        widget=forms.TextInput(attrs={"size": 50}),
    )
    value = forms.CharField(
        label="Users or groups",
        required=False,
        max_length=4000,
        help_text="Comma-separated names; * means everybody.",
        widget=forms.TextInput(attrs={"size": 50}),
    )
    instance = forms.CharField(
        label="Broker instance",
        required=False,
        max_length=255,
        help_text="Empty: the rule is for every broker.",
    )


class RulesImportForm(forms.Form):
    text = forms.CharField(
        label="accesscontrol.properties",
        widget=forms.Textarea(attrs={"rows": 12, "cols": 80}),
    )
    replace = forms.BooleanField(
        label="Replace all rules (otherwise merge)", required=False, initial=False
    )


# --------------------------------------------------------------------------------------
# Log records
# --------------------------------------------------------------------------------------

LEVELS = list(RECORD_LEVELS)


class LogFilterForm(forms.Form):
    level = forms.ChoiceField(
        label="Minimum level",
        required=False,
        choices=[("", "any")] + [(lv, lv) for lv in LEVELS],
    )
    since = forms.DateTimeField(
        label="Since",
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        input_formats=[
            "%Y-%m-%dT%H:%M",
            "%Y-%m-%dT%H:%M:%S",
            "%Y-%m-%d %H:%M:%S",
            "%Y-%m-%d %H:%M",
            "%Y-%m-%d",
        ],
    )
    until = forms.DateTimeField(
        label="Until",
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        input_formats=[
            "%Y-%m-%dT%H:%M",
            "%Y-%m-%dT%H:%M:%S",
            "%Y-%m-%d %H:%M:%S",
            "%Y-%m-%d %H:%M",
            "%Y-%m-%d",
        ],
    )
    text = forms.CharField(label="Text", required=False, max_length=200)


class DestinationFilterForm(forms.Form):
    type = forms.ChoiceField(
        label="Type", required=False, choices=[("", "any"), ("q", "queues"), ("t", "topics")]
    )
    name = forms.CharField(label="Name contains", required=False, max_length=255)
    state = forms.ChoiceField(
        label="State",
        required=False,
        choices=[("", "any")] + [(s.name, s.name.lower().replace("_", " ")) for s in DestState],
    )
    temporary = forms.BooleanField(label="Show temporary", required=False)
