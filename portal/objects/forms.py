"""Forms of the administered objects pages."""

from __future__ import annotations

from django import forms

from .attributes import TYPES

TYPE_CHOICES = [(code, f"{t.label} ({code})") for code, t in TYPES.items()]
FACTORY_CHOICES = [
    ("", "none: the database only"),
    ("com.sun.jndi.ldap.LdapCtxFactory", "LDAP (com.sun.jndi.ldap.LdapCtxFactory)"),
    (
        "com.sun.jndi.fscontext.RefFSContextFactory",
        "File system (com.sun.jndi.fscontext.RefFSContextFactory)",
    ),
]
ATTRS_HELP = "One name=value a line, e.g. imqAddressList=mq://broker:7676/jms"


def parse_lines(text: str) -> dict[str, str]:
    """``name=value`` lines (blank lines and ``#`` comments skipped)."""
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise forms.ValidationError(f"line {number}: expected name=value, not {line!r}")
        out[name.strip()] = value.strip()
    return out


class AttributesField(forms.CharField):
    widget = forms.Textarea(attrs={"rows": 8, "cols": 70})

    def clean(self, value):
        return parse_lines(super().clean(value) or "")


class ObjectCreateForm(forms.Form):
    store = forms.ChoiceField(label="Object store")
    obj_type = forms.ChoiceField(label="Type", choices=TYPE_CHOICES)
    lookup_name = forms.CharField(
        label="Lookup name",
        max_length=500,
        help_text="In an LDAP store: cn=NAME",
        widget=forms.TextInput(attrs={"size": 40}),
    )
    read_only = forms.BooleanField(label="Read-only", required=False)
    attributes = AttributesField(label="Attributes", required=False, help_text=ATTRS_HELP)

    def __init__(self, *args, stores: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["store"].choices = [(s, s) for s in stores]


class ObjectUpdateForm(forms.Form):
    read_only = forms.BooleanField(label="Read-only", required=False)
    attributes = AttributesField(
        label="Attributes",
        required=False,
        help_text=ATTRS_HELP + ". Replaces the attributes set; the rest take OpenMQ's defaults.",
    )


class StoreCreateForm(forms.Form):
    name = forms.CharField(label="Name", max_length=200)
    factory = forms.ChoiceField(label="Initial context factory", choices=FACTORY_CHOICES)
    url = forms.CharField(
        label="Provider URL",
        max_length=1000,
        required=False,
        help_text="ldap://host:389/ou=jndi,dc=example,dc=com or file:///a/directory",
        widget=forms.TextInput(attrs={"size": 50}),
    )
    principal = forms.CharField(label="Principal", max_length=500, required=False)
    credentials = forms.CharField(
        label="Credentials",
        max_length=500,
        required=False,
        widget=forms.PasswordInput(render_value=False),
    )

    def properties(self) -> dict[str, str]:
        d = self.cleaned_data
        props = {
            "java.naming.factory.initial": d["factory"],
            "java.naming.provider.url": d["url"],
        }
        if d["principal"]:
            props["java.naming.security.authentication"] = "simple"
            props["java.naming.security.principal"] = d["principal"]
            props["java.naming.security.credentials"] = d["credentials"]
        return {k: v for k, v in props.items() if v}
