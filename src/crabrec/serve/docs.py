"""``GET /docs``: the service's API as one self-contained HTML page, rendered on the server from its OpenAPI schema.

No script and no stylesheet from a CDN, so it works on a machine without internet (the page FastAPI ships loads
Swagger UI from jsdelivr and is blank offline). The raw schema stays at ``/openapi.json``.
"""

from __future__ import annotations

import html
import json
from typing import Any

STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222 }
h2 { margin-top: 2rem; border-bottom: 1px solid #ddd } code, pre { background: #f4f4f4; border-radius: 4px }
pre { padding: .7rem; overflow-x: auto } table { border-collapse: collapse; width: 100% }
td, th { border: 1px solid #ddd; padding: .3rem .5rem; text-align: left; vertical-align: top }
.verb { font-weight: bold; color: #0a5 } .verb.post { color: #05a }
"""


def _type(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    if schema.get("type") == "array":
        return f"list of {_type(schema.get('items', {}))}"
    return str(schema.get("type") or schema.get("$ref", "").rpartition("/")[2] or "any")


def _fields(schema: dict[str, Any]) -> str:
    rows = []
    for name, prop in schema.get("properties", {}).items():
        default = json.dumps(prop["default"]) if "default" in prop else ""
        rows.append(
            f"<tr><td><code>{html.escape(name)}</code></td><td>{html.escape(_type(prop))}</td>"
            f"<td>{html.escape(default)}</td><td>{html.escape(prop.get('description', ''))}</td></tr>"
        )
    if not rows:
        return ""
    return "<table><tr><th>field</th><th>type</th><th>default</th><th>meaning</th></tr>" + "".join(rows) + "</table>"


def _prose(text: str) -> str:
    """A docstring as one HTML paragraph, its double-backtick spans as code (an empty string for no text)."""
    if not text:
        return ""
    pieces = html.escape(" ".join(text.split())).split("``")
    return "<p>" + "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(pieces)) + "</p>"


def docs_page(schema: dict[str, Any], example: dict[str, Any]) -> str:
    """The HTML page for an OpenAPI ``schema``; ``example`` is a request body for ``POST /recommend``."""
    info = schema.get("info", {})
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(info.get('title', 'API'))}</title>",
        f"<style>{STYLE}</style></head><body><h1>{html.escape(info.get('title', 'API'))}</h1>",
        f"<p>{html.escape(info.get('summary', ''))}. The schema: <a href='/openapi.json'>/openapi.json</a>.</p>",
    ]
    for path, verbs in schema.get("paths", {}).items():
        for verb, op in verbs.items():
            parts.append(
                f"<h2><span class='verb {verb}'>{verb.upper()}</span> <code>{html.escape(path)}</code></h2>"
                f"<p>{html.escape(op.get('description') or op.get('summary', ''))}</p>"
            )
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body:
                parts.append("<h3>Request body (JSON)</h3>" + _prose(body.get("description", "")) + _fields(body))
            answers = op.get("responses", {})
            if answers:
                parts.append(
                    "<h3>Responses</h3><ul>"
                    + "".join(
                        f"<li><code>{html.escape(code)}</code>: {html.escape(r.get('description', ''))}</li>"
                        for code, r in answers.items()
                    )
                    + "</ul>"
                )
            if path == "/recommend" and verb == "post":
                call = f"curl -s -X POST localhost:8000/recommend -H 'Content-Type: application/json' \\\n" \
                       f"     -d '{json.dumps(example)}'"  # fmt: skip
                parts.append(f"<h3>Example</h3><pre>{html.escape(call)}</pre>")
    parts.append("</body></html>")
    return "".join(parts)
