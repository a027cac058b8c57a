"""The REST API against its own OpenAPI schema.

* the schema drf-spectacular generates validates (``manage.py spectacular --validate
  --fail-on-warn``);
* schemathesis generates requests from it for every operation and sends them, in
  process through the WSGI application, as an administrator, to a real broker of the
  test's own: no answer may be a server error, and every answer must be what the schema
  says (status code, content type, body).

Bounded: a few examples per operation, no shrinking.  The operations that end the broker
(shutdown, restart) or could cut the portal's own admin connection (destroying
connections) are left out so the run keeps its broker.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hsettings
from hypothesis.errors import Unsatisfiable
from rest_framework.test import APIClient
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from broker.admintools import security_actions

from .manage_fork import run_manage

EXAMPLES = 8

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
SKIP = [
    ("POST", "/api/broker/shutdown/"),
    ("POST", "/api/broker/restart/"),
    ("DELETE", "/api/connections/{id}/"),
    ("DELETE", "/api/token/"),  # would log the run out
]


def negatable(operation: dict) -> bool:
    """Whether an operation has something a request can get wrong: a body, a query
    parameter or a path parameter more constrained than any string."""
    if operation.get("requestBody"):
        return True
    for param in operation.get("parameters", []):
        if param.get("in") == "query":
            return True
        if param.get("in") == "path" and set(param.get("schema", {})) - {"type", "description"}:
            return True
    return False


def test_schema_validates():
    r = run_manage(
        ["spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null"], timeout=120
    )
    assert r.returncode == 0, r.stderr


@pytest.mark.django_db
def test_schemathesis_finds_no_server_error(own_broker, settings, tmp_path):
    b = own_broker()
    settings.IMQ_BROKER_HOST = b.host
    settings.IMQ_BROKER_PORT = b.portmapper_port
    settings.IMQ_VARHOME = tmp_path / "portal-var"
    # The broker has a database of its own: the portal logs in as its admin/admin.
    settings.IMQ_ADMIN_USER, settings.IMQ_ADMIN_PASSWORD = "admin", "admin"
    security_actions.create_user("setup", "root", "root-pw", ["admin"])
    r = APIClient().post("/api/token/", {"username": "root", "password": "root-pw"}, format="json")
    headers = {"Authorization": f"Token {r.json()['token']}"}

    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        op = result.ok()
        if (op.method.upper(), op.path) in SKIP:
            continue
        operations += 1
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            if mode == GenerationMode.NEGATIVE and not negatable(op.definition.raw):
                continue  # only free strings in its path: no invalid request to make

            @given(case=op.as_strategy(generation_mode=mode))
            @hsettings(
                max_examples=EXAMPLES,
                deadline=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
                database=None,
                derandomize=True,
            )
            def run(case):
                case.call_and_validate(headers=headers, checks=CHECKS)

            try:
                run()
            except Unsatisfiable:  # nothing in this operation to make invalid
                pass
            except (Exception, BaseExceptionGroup) as exc:  # every operation's failures
                text = str(exc)
                if len(text) > 3000:
                    text = text[:3000] + " ..."
                failures.append(f"{op.method.upper()} {op.path} ({mode.value}): {text}")
    assert operations > 50
    assert b.proc.poll() is None, "the broker died"
    assert not failures, "\n\n".join(failures)
