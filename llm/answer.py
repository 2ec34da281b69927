"""The JSON answers an LLM must give, each defined once and rendered for every service.

An ``AnswerSchema`` lists its fields (kind, description, nullability, bounds, the allowed values
of an enum). From it come the pydantic model that validates every answer, whatever service gave
it, and the JSON Schema an OpenAI-compatible server is sent (``json_schema``); the Gemini module
renders the same fields in its own Schema form. So the schema a model is asked for and the
schema its answer is checked against cannot drift apart.

The answers themselves (a pre-label, a verdict) are their users' (``opinions``); this module
only knows fields.
"""

from __future__ import annotations

import enum
import functools
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

import pydantic

from llm.errors import InvalidAnswerError
from llm.usage import Usage

__all__ = ["AnswerField", "AnswerSchema", "extract_json"]

FieldKind = Literal["enum", "number", "integer", "string"]


@dataclass(frozen=True)
class AnswerField:
    """One answer field: the single definition every schema form is built from."""

    kind: FieldKind
    description: str
    nullable: bool = False
    required: bool = True
    bounds: tuple[float, float] | None = None
    choices: tuple[str, ...] = ()  # the allowed values of an "enum" field


_PY_TYPES: dict[str, type] = {"number": float, "integer": int, "string": str}
_JSON_TYPES = {"enum": "string", "number": "number", "integer": "integer", "string": "string"}
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)\n?\s*```", re.S)


@dataclass(frozen=True)
class AnswerSchema:
    """An answer object: named fields in the order the model should write them.

    ``forbid_extra``: a field the schema does not name makes the answer invalid (the judge uses
    it: an answer outside the schema is no answer)."""

    name: str
    fields: tuple[tuple[str, AnswerField], ...]
    forbid_extra: bool = False

    @property
    def required(self) -> list[str]:
        return [n for n, f in self.fields if f.required]

    @functools.cached_property
    def model(self) -> type[pydantic.BaseModel]:
        """The pydantic model that validates answers (enum fields as ``str`` enums)."""
        enums: dict[tuple[str, ...], type[enum.Enum]] = {}
        spec: dict[str, Any] = {}
        for name, f in self.fields:
            if f.kind == "enum":
                if not f.choices:
                    raise ValueError(f"enum field {name!r} has no choices")
                if f.choices not in enums:
                    # Member identifiers are synthetic (values may contain spaces); the values
                    # are what the model must emit.
                    choice: type[enum.Enum] = enum.Enum(  # type: ignore[misc]
                        f"{self.name}Choice{len(enums)}",
                        [(f"C{i}", v) for i, v in enumerate(f.choices)],
                        type=str,
                    )
                    enums[f.choices] = choice
                py: Any = enums[f.choices]
            else:
                py = _PY_TYPES[f.kind]
            annotation = py | None if f.nullable else py
            lo, hi = f.bounds if f.bounds is not None else (None, None)
            default = None if not f.required else ...
            spec[name] = (
                annotation, pydantic.Field(default, ge=lo, le=hi, description=f.description)
            )
        config = pydantic.ConfigDict(extra="forbid") if self.forbid_extra else None
        model: type[pydantic.BaseModel] = pydantic.create_model(
            self.name, __config__=config, **spec
        )
        return model

    @functools.cached_property
    def json_schema(self) -> dict[str, Any]:
        """The schema as JSON Schema, in the subset OpenAI's strict structured output accepts
        (and vLLM, Ollama and LM Studio enforce): every property listed as required (optional
        ones are nullable instead), no additional properties, nullable enums as ``anyOf``.
        Numeric bounds are left to validation: strict mode rejects them on some deployments,
        and a schema the server refuses would cost the enforcement of everything else."""
        props: dict[str, Any] = {}
        for name, f in self.fields:
            if f.kind == "enum":
                base: dict[str, Any] = {"type": "string", "enum": list(f.choices)}
                prop = {"anyOf": [base, {"type": "null"}]} if f.nullable else base
            else:
                t = _JSON_TYPES[f.kind]
                prop = {"type": [t, "null"] if f.nullable else t}
            props[name] = {**prop, "description": f.description}
        return {
            "type": "object",
            "properties": props,
            "required": [n for n, _ in self.fields],
            "additionalProperties": False,
        }

    def parse(self, text: str, *, usage: Usage | None = None, note: str = "") -> dict[str, Any]:
        """The validated answer in ``text`` (as JSON values), or ``InvalidAnswerError``
        (kind ``malformed``) naming what was wrong. ``note`` is added to the message (e.g. that
        the answer was cut off)."""
        try:
            answer = self.model.model_validate(extract_json(text))
        except (json.JSONDecodeError, pydantic.ValidationError) as e:
            first = str(e).splitlines()[0]
            if isinstance(e, pydantic.ValidationError) and e.errors():
                err = e.errors()[0]
                where = ".".join(str(p) for p in err.get("loc", ())) or "answer"
                first = f"{where}: {err.get('msg', first)}"
            raise InvalidAnswerError(
                f"malformed answer{note}: {first}; text starts {text[:80]!r}",
                kind="malformed",
                usage=usage,
            ) from e
        data: dict[str, Any] = answer.model_dump(mode="json")
        return data


def extract_json(text: str) -> Any:
    """The JSON value in an answer: the whole text, else a fenced ```json block, else the span
    from the first ``{`` to the last ``}``. Servers that cannot enforce a schema often wrap the
    object in prose or a code fence; what is found is still validated against the schema, so
    this reads the answer the model gave rather than guessing one. Raises ``JSONDecodeError``
    (of the whole text) when none of them parses."""
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError as first_error:
        candidates = [m.group(1) for m in _FENCE.finditer(stripped)]
        start, end = stripped.find("{"), stripped.rfind("}")
        if 0 <= start < end:
            candidates.append(stripped[start : end + 1])
        for candidate in candidates:
            try:
                return json.loads(candidate)
            except json.JSONDecodeError:
                continue
        raise first_error from None
