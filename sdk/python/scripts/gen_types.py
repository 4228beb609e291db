"""Writes sandlot/types.py, the TypedDicts of the API's bodies, from
api/openapi.json: python3 scripts/gen_types.py [OUT]. go test ./e2e/sdk
fails while the committed file differs from what this makes."""

from __future__ import annotations

import json
import keyword
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]

# The schemas the SDK's signatures use: every tool's arguments and result,
# and the other bodies it returns.
EXTRA = ["Context", "ContextList", "FileInfo", "FileList", "Version", "TenantInfo", "ConversationEnded",
         "Template", "TemplateList", "TemplateSettings", "TemplateResources", "Network"]


def pytype(s: dict[str, Any], refs: set[str]) -> str:
    if "$ref" in s:
        name = s["$ref"].rsplit("/", 1)[1]
        refs.add(name)
        return name
    for key in ("anyOf", "oneOf"):
        if key in s:
            parts = [pytype(x, refs) for x in s[key]]
            return " | ".join(dict.fromkeys(parts))
    if "const" in s:
        return f"Literal[{json.dumps(s['const'])}]"
    if "enum" in s:
        return "Literal[" + ", ".join(json.dumps(v) for v in s["enum"]) + "]"
    t = s.get("type")
    if t == "null":
        return "None"
    if t == "string":
        return "str"
    if t == "integer":
        return "int"
    if t == "number":
        return "float"
    if t == "boolean":
        return "bool"
    if t == "array":
        return f"list[{pytype(s.get('items', {}), refs)}]"
    if t == "object":
        ap = s.get("additionalProperties")
        if isinstance(ap, dict):
            return f"dict[str, {pytype(ap, refs)}]"
        if "properties" not in s:
            return "dict[str, Any]"
    return "Any"


def typeddict(name: str, s: dict[str, Any], refs: set[str]) -> str:
    props: dict[str, Any] = s.get("properties", {})
    required = set(s.get("required", []))
    fields = []
    for k, v in props.items():
        t = pytype(v, refs)
        fields.append((k, t if k in required else f"NotRequired[{t}]"))
    doc = (s.get("description") or f"The API's {name}.").replace('"""', "'")
    if any(keyword.iskeyword(k) or not k.isidentifier() for k, _ in fields):
        body = ", ".join(f"{json.dumps(k)}: {t}" for k, t in fields)
        return f'{name} = TypedDict("{name}", {{{body}}})\n"""{doc}"""\n'
    lines = [f"class {name}(TypedDict):", f'    """{doc}"""', ""]
    lines += [f"    {k}: {t}" for k, t in fields] or ["    pass"]
    return "\n".join(lines) + "\n"


def generate() -> str:
    doc = json.loads((ROOT / "api" / "openapi.json").read_text())
    schemas: dict[str, Any] = doc["components"]["schemas"]
    tools = [p.rsplit("/", 1)[1] for p in doc["paths"] if p.startswith("/v1/tools/") and p != "/v1/tools/{name}"]
    want = [n for t in tools for n in (pascal(t) + "Args", pascal(t) + "Result")] + EXTRA + ["FailureResult"]
    out: dict[str, str] = {}
    queue = list(want)
    while queue:
        name = queue.pop(0)
        if name in out:
            continue
        refs: set[str] = set()
        out[name] = typeddict(name, schemas[name], refs)
        queue += sorted(refs - out.keys())
    lang = pytype(schemas["RunCodeArgs"]["properties"]["language"], set())
    tool_map = "\n".join(f'    "{t}": {pascal(t)}Args,' for t in tools)
    head = ('"""The API\'s bodies as TypedDicts, generated from api/openapi.json by\n'
            'scripts/gen_types.py: do not edit."""\n\n'
            "from __future__ import annotations\n\n"
            "from typing import Any, Literal, NotRequired, TypedDict\n\n"
            "__all__ = [" + ", ".join(json.dumps(n) for n in sorted(out)) + ", \"TOOLS\", \"Language\"]\n\n"
            f"Language = {lang}\n\"\"\"The languages of run_code.\"\"\"\n\n\n")
    body = "\n\n".join(out[n] for n in sorted(out))
    return head + body + f"\n\nTOOLS: dict[str, type] = {{\n{tool_map}\n}}\n\"\"\"The tools the document types, by name: their arguments.\"\"\"\n"


def pascal(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "sandlot" / "types.py"
    target.write_text(generate())
