"""Every operation of openapi.json was sent by the clients of this
session (the observer records each request's method and path, and they
are matched to the document's path templates here, not by the client's
own idea of which operation it called), and every operation has its
method, named after its operationId."""

import json
import os
import re

import pytest

import paddock
from conftest import SENT

DOC_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "..", "httpapi", "openapi.json")


def operations():
    with open(DOC_PATH, encoding="utf-8") as f:
        doc = json.load(f)
    return [(m.upper(), p, op["operationId"]) for p, ops in doc["paths"].items() for m, op in ops.items()]


def snake(op_id):
    special = {"getOpenAPI": "get_openapi", "whoAmI": "who_am_i"}
    return special.get(op_id) or re.sub(r"(?<!^)(?=[A-Z])", "_", op_id).lower()


def template_of(method, path, ops):
    path = path.split("?", 1)[0]
    matches = []
    for m, tpl, _ in ops:
        rx = "^" + re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(tpl)) + "$"
        if m == method and re.match(rx, path):
            matches.append(tpl)
    # The most literal template wins, as in net/http's mux: /v1/runs/{id}/exec/stream over /v1/runs/{id}/exec/{x}.
    return min(matches, key=lambda tpl: tpl.count("{")) if matches else None


def test_every_operation_has_its_method():
    for _, _, op_id in operations():
        for cls in (paddock.Client, paddock.AsyncClient):
            assert callable(getattr(cls, snake(op_id), None)), f"{cls.__name__}.{snake(op_id)} for {op_id}"


def test_there_are_84_operations():
    assert len(operations()) == 84


def test_every_operation_was_sent(request):
    modules = {item.module.__name__ for item in request.session.items}
    needed = {"test_operations", "test_errors", "test_streams", "test_async", "test_mcp", "test_examples", "test_run"}
    if not needed <= modules:
        pytest.skip(f"only the whole suite sends every operation; this run left out {sorted(needed - modules)}")
    ops = operations()
    sent = {(m, template_of(m, p, ops)) for m, p in SENT}
    missing = [f"{m} {p} ({op})" for m, p, op in ops if (m, p) not in sent]
    assert not missing, "never sent:\n" + "\n".join(missing)
    assert (None not in {tpl for _, tpl in sent}), [p for m, p in SENT if template_of(m, p, ops) is None]


def test_the_clients_have_the_same_methods():
    def public(cls):
        return {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))}

    sync_only = {"close"}  # AsyncClient's is aclose
    async_only = {"aclose"}
    assert public(paddock.Client) - sync_only == public(paddock.AsyncClient) - async_only
