#!/usr/bin/env python3
"""Generate src/paddock/types.py from the daemon's OpenAPI document.

    python3 gen_types.py [OPENAPI] [OUT]

(defaults: ../../httpapi/openapi.json and src/paddock/types.py beside this
script). The output is committed; tests/test_types.py regenerates it and
fails if the two differ, so the dataclasses cannot drift from the API.

What it writes: one standard-library dataclass per schema of
components.schemas, one per object an operation takes inline as its body
(<OperationId>Body), and one per object nested in either (Parent + Field).
Each field's metadata holds its JSON name, whether the schema requires it
and its enum, which the codec and the tests read. Dates stay RFC 3339
strings and bytes stay base64 strings: as the wire has them.
"""

import json
import keyword
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def pascal(s):
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^A-Za-z0-9]+", s) if p)


def pyname(json_name):
    """A field's Python name: its JSON name, with a _ after a keyword
    (from is from_). Builtins such as type and id stay: a dataclass field
    shadows nothing."""
    n = re.sub(r"[^A-Za-z0-9_]", "_", json_name)
    return n + "_" if keyword.iskeyword(n) else n


class Gen:
    def __init__(self, doc):
        self.doc = doc
        self.schemas = doc["components"]["schemas"]
        self.classes = []  # (name, schema, origin), in the order written
        self.seen = set()

    def ref_name(self, ref):
        return ref.rsplit("/", 1)[-1]

    def add(self, name, schema, origin):
        if name in self.seen:
            raise SystemExit(f"two classes named {name}")
        self.seen.add(name)
        self.classes.append((name, schema, origin))

    def is_class(self, schema):
        return schema.get("type") == "object" and "properties" in schema

    def annotation(self, schema, owner, prop):
        """The type of a field, naming (and queueing) nested classes."""
        if "$ref" in schema:
            name = self.ref_name(schema["$ref"])
            target = self.schemas[name]
            if self.is_class(target):
                return f'"{name}"'
            return self.annotation(target, name, "")
        t = schema.get("type")
        if "enum" in schema and t == "string":
            return "Literal[" + ", ".join(json.dumps(v) for v in schema["enum"]) + "]"
        if t == "string":
            return "str"
        if t == "integer":
            return "int"
        if t == "number":
            return "float"
        if t == "boolean":
            return "bool"
        if t == "array":
            return f"List[{self.annotation(schema.get('items', {}), owner, prop)}]"
        if t == "object":
            if self.is_class(schema):
                name = owner + pascal(prop)
                self.add(name, schema, f"{owner}.{prop}")
                return f'"{name}"'
            ap = schema.get("additionalProperties")
            if isinstance(ap, dict) and ap:
                return f"Dict[str, {self.annotation(ap, owner, prop)}]"
            return "Dict[str, Any]"
        return "Any"

    def run(self):
        for name, schema in self.schemas.items():
            if self.is_class(schema):
                self.add(name, schema, f"components.schemas.{name}")
        for path, ops in self.doc["paths"].items():
            for method, op in ops.items():
                body = (op.get("requestBody") or {}).get("content", {}).get("application/json", {}).get("schema")
                if body and self.is_class(body):
                    self.add(pascal(op["operationId"]) + "Body", body, f"{method.upper()} {path}")
        out = [HEADER]
        i = 0
        while i < len(self.classes):  # nested classes are appended as met
            out.append(self.render(*self.classes[i]))
            i += 1
        out.append("SCHEMAS: Dict[str, type] = {\n")
        for name, _, origin in self.classes:
            out.append(f"    {json.dumps(origin)}: {name},\n")
        out.append("}\n")
        return "".join(out)

    def render(self, name, schema, origin):
        required = set(schema.get("required", []))
        lines = ["", "", "@dataclass(kw_only=True)", f"class {name}:"]
        doc = schema.get("description", "").strip()
        lines.append(f'    """{origin}' + (": " + doc.replace('"""', "'''").replace("\\", "\\\\") if doc else "") + '"""')
        lines.append("")
        props = schema["properties"]
        order = [p for p in props if p in required] + [p for p in props if p not in required]
        for p in order:
            sub = props[p]
            ann = self.annotation(sub, name, p)
            meta = {"json": p}
            if p in required:
                meta["required"] = True
            enum = sub.get("enum") or (sub.get("items") or {}).get("enum")
            if enum is not None:
                meta["enum"] = tuple(enum)
            m = "{" + ", ".join(f"{json.dumps(k)}: {v!r}" for k, v in meta.items()) + "}"
            if p in required:
                lines.append(f"    {pyname(p)}: {ann} = field(metadata={m})")
            else:
                lines.append(f"    {pyname(p)}: Optional[{ann}] = field(default=None, metadata={m})")
        return "\n".join(lines) + "\n"


HEADER = '''"""The types of paddock's API, as standard-library dataclasses.

Generated by sdk/python/gen_types.py from httpapi/openapi.json: do not
edit; run the script again (a test fails if this file and the document
differ). Every field is keyword-only; a field the schema does not require
defaults to None and is left out of a request when it is None. Answers are
decoded leniently: a field this version does not know is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Optional

__all__ = []  # filled below: every class
'''


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "httpapi", "openapi.json")
    dst = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "src", "paddock", "types.py")
    with open(src, encoding="utf-8") as f:
        text = generate(json.load(f))
    with open(dst, "w", encoding="utf-8") as f:
        f.write(text)


def generate(doc):
    text = Gen(doc).run()
    return text + "\n__all__ += [c.__name__ for c in SCHEMAS.values()]\n"


if __name__ == "__main__":
    main()
