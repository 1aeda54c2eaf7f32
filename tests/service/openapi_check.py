"""Answers of the API checked against the app's own OpenAPI document (``/openapi.json``): the JSON
body of every answer validates against the schema its route documents for its status (an error
against ``ErrorOut``). Every object schema is taken as closed - a field the document does not name
is drift - and every answer of a route whose status the document does not name fails."""

from __future__ import annotations

import copy
import re
from typing import Any

import httpx
from jsonschema import Draft202012Validator


def _closed(schema: Any) -> Any:
    """``schema`` with every object that names its properties closed to others."""
    if isinstance(schema, dict):
        out = {k: _closed(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_closed(v) for v in schema]
    return schema


class OpenApiCheck:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.components = _closed(copy.deepcopy(spec["components"]))
        self.paths = spec["paths"]
        self.routes: list[tuple[str, re.Pattern[str], str, int]] = []
        for path, operations in spec["paths"].items():
            segments = ("[^/]+" if part.startswith("{") else re.escape(part) for part in path.split("/"))
            pattern = re.compile("^" + "/".join(segments) + "$")
            for method in operations:
                self.routes.append((method.upper(), pattern, path, path.count("{")))
        self.checked: set[tuple[str, str, int]] = set()  # (method, path, status) validated

    def unvalidated(self) -> list[str]:
        """The routes that document a JSON success answer and have had none validated yet."""
        missing = []
        for path, operations in self.paths.items():
            for method, operation in operations.items():
                documented = [
                    int(status)
                    for status, answer in operation["responses"].items()
                    if status.startswith("2") and "application/json" in answer.get("content", {})
                ]
                if documented and not any((method.upper(), path, s) in self.checked for s in documented):
                    missing.append(f"{method.upper()} {path}")
        return missing

    def operation(self, method: str, raw_path: str) -> str | None:
        """The documented path (template) that answers ``method`` on ``raw_path``."""
        found = [(params, path) for m, pattern, path, params in self.routes if m == method and pattern.match(raw_path)]
        return min(found)[1] if found else None

    def schema_for(self, method: str, path: str | None, status: int) -> dict[str, Any] | None:
        if path is None:
            return {"$ref": "#/components/schemas/ErrorOut"} if status >= 400 else None
        responses = self.paths[path][method.lower()]["responses"]
        answer = responses.get(str(status))
        assert answer is not None, f"{method} {path} answered {status}, which its OpenAPI entry does not name"
        return answer.get("content", {}).get("application/json", {}).get("schema")

    def check(self, response: httpx.Response) -> None:
        """Validate ``response`` (an httpx response hook)."""
        response.read()
        if not response.headers.get("content-type", "").startswith("application/json"):
            return
        method = response.request.method
        raw_path = response.request.url.raw_path.decode().split("?", 1)[0]
        path = self.operation(method, raw_path)
        schema = self.schema_for(method, path, response.status_code)
        if schema is None:
            return
        validator = Draft202012Validator(
            {**schema, "components": self.components}, format_checker=Draft202012Validator.FORMAT_CHECKER
        )
        problems = [
            f"{'/'.join(map(str, e.absolute_path)) or 'body'}: {e.message}"
            for e in validator.iter_errors(response.json())
        ]
        assert not problems, (
            f"{method} {raw_path} -> {response.status_code}: the body does not match its schema:\n"
            + "\n".join(problems[:10])
        )
        if path is not None:
            self.checked.add((method, path, response.status_code))
