"""The dataclasses cannot drift from openapi.json: the committed module is
what the generator makes of the document, and each class's fields, their
requiredness and enums are checked against the schemas directly (not
through the generator), so a schema that gains a field fails here."""

import copy
import dataclasses
import json
import os
import sys
import typing

import pytest

from paddock import types as t
from paddock._codec import decode, encode

ROOT = os.path.join(os.path.dirname(__file__), "..")
DOC_PATH = os.path.join(ROOT, "..", "..", "httpapi", "openapi.json")
sys.path.insert(0, ROOT)

import gen_types  # noqa: E402


def doc():
    with open(DOC_PATH, encoding="utf-8") as f:
        return json.load(f)


def test_the_committed_module_is_what_the_generator_makes():
    with open(os.path.join(ROOT, "src", "paddock", "types.py"), encoding="utf-8") as f:
        committed = f.read()
    assert committed == gen_types.generate(doc()), "run: python3 sdk/python/gen_types.py"


def resolve(d, schema):
    while "$ref" in schema:
        schema = d["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def mismatches(d, types_module):
    """What differs between the schemas of document d and the classes."""
    out = []
    for origin, cls in types_module.SCHEMAS.items():
        if origin.startswith("components.schemas."):
            schema = d["components"]["schemas"].get(origin.split(".", 2)[2])
        elif " " in origin:
            method, path = origin.split(" ", 1)
            op = d["paths"].get(path, {}).get(method.lower(), {})
            schema = ((op.get("requestBody") or {}).get("content", {}).get("application/json", {}).get("schema"))
        else:
            owner, prop = origin.split(".", 1)
            parent = [c for o, c in types_module.SCHEMAS.items() if c.__name__ == owner]
            parent_schema = schema_of(d, types_module, parent[0]) if parent else None
            schema = None
            if parent_schema:
                schema = resolve(d, parent_schema["properties"].get(prop, {}))
                if schema.get("type") == "array":
                    schema = resolve(d, schema.get("items", {}))
        if schema is None:
            out.append(f"{cls.__name__}: no schema {origin} in the document")
            continue
        out += compare(cls, schema)
    # Every component schema has its class.
    names = {c.__name__ for c in types_module.SCHEMAS.values()}
    for name in d["components"]["schemas"]:
        if name not in names:
            out.append(f"schema {name} has no class")
    return out


def schema_of(d, types_module, cls):
    for origin, c in types_module.SCHEMAS.items():
        if c is cls and origin.startswith("components.schemas."):
            return d["components"]["schemas"][origin.split(".", 2)[2]]
    return None


def compare(cls, schema):
    out = []
    fields = {f.metadata["json"]: f for f in dataclasses.fields(cls)}
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    for name in props.keys() - fields.keys():
        out.append(f"{cls.__name__} lacks the field {name}")
    for name in fields.keys() - props.keys():
        out.append(f"{cls.__name__}.{name} is in no schema")
    for name in props.keys() & fields.keys():
        f = fields[name]
        if bool(f.metadata.get("required")) != (name in required):
            out.append(f"{cls.__name__}.{name}: required is {name in required} in the schema")
        if (f.default is dataclasses.MISSING) != (name in required):
            out.append(f"{cls.__name__}.{name}: a default only when not required")
        p = props[name]
        enum = p.get("enum") or (p.get("items") or {}).get("enum")
        if (tuple(enum) if enum is not None else None) != f.metadata.get("enum"):
            out.append(f"{cls.__name__}.{name}: enum {enum} in the schema")
    return out


def test_every_class_matches_its_schema():
    assert mismatches(doc(), t) == []
    assert len([o for o in t.SCHEMAS if o.startswith("components.schemas.")]) == len(doc()["components"]["schemas"])


@pytest.mark.parametrize("change", ["new field", "now required", "new enum value", "new schema"])
def test_the_check_fails_when_a_schema_changes(change):
    d = copy.deepcopy(doc())
    s = d["components"]["schemas"]
    if change == "new field":
        s["Run"]["properties"]["color"] = {"type": "string"}
    elif change == "now required":
        s["Run"]["required"] = ["id"]
    elif change == "new enum value":
        s["Job"]["properties"]["state"]["enum"].append("paused")
    else:
        s["Brand"] = {"type": "object", "properties": {"x": {"type": "string"}}}
    assert mismatches(d, t), change
    assert gen_types.generate(d) != gen_types.generate(doc())


def test_unknown_fields_are_ignored_and_known_ones_typed():
    run = decode(t.Run, {"id": "r-1", "last_seq": 3, "review": "some-new-state", "from_the_future": {"x": 1},
                         "workspace": {"id": "w-1", "state": "ready", "new": True}})
    assert run.id == "r-1" and run.last_seq == 3 and run.review == "some-new-state"
    assert isinstance(run.workspace, t.Workspace) and run.workspace.state == "ready"
    assert not hasattr(run, "from_the_future")


def test_decode_refuses_what_it_cannot_read():
    from paddock.errors import DecodeError

    with pytest.raises(DecodeError):
        decode(t.Run, {"id": 42})
    with pytest.raises(DecodeError):
        decode(t.JobStatus, {})  # state is required
    with pytest.raises(DecodeError):
        decode(typing.List[t.Run], {"id": "x"})


def test_encode_leaves_out_what_is_not_set_and_renames_keywords():
    assert encode(t.CreateRunRequest(project="app")) == {"project": "app"}
    policy = t.ApprovalPolicy(approvals=2, from_=["role:reviewer"])
    assert encode(policy) == {"approvals": 2, "from": ["role:reviewer"]}
    assert decode(t.ApprovalPolicy, {"approvals": 2, "from": ["role:reviewer"]}) == policy
    with pytest.raises(TypeError):
        t.CreateRunRequest(project="app", colour="red")
    with pytest.raises(TypeError):
        t.StartJobBody()  # kind is required
