"""A pydantic ValidationError of a YAML file (goal, campaign) told in one line: an unknown key, most likely a
typo, first and with the known key it resembles; the other problems after it, a few at most."""

from __future__ import annotations

import difflib
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

SHOWN = 4
"""How many problems one message names; the rest are counted."""


def first_problem(model: type[BaseModel], exc: ValidationError) -> tuple[str, str]:
    """(field, problem): the field of the first problem (dotted; "" at the top level) and what is wrong, with up
    to SHOWN - 1 other problems appended as `(also FIELD: PROBLEM; ...)`. Unknown keys come first."""
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    field, problem = _describe(model, errors[0])
    rest = [f"{f or '(top level)'}: {p}" for f, p in (_describe(model, e) for e in errors[1:SHOWN])]
    if rest:
        more = f", and {len(errors) - SHOWN} more" if len(errors) > SHOWN else ""
        problem += f" (also {'; '.join(rest)}{more})"
    return field, problem


def _describe(model: type[BaseModel], err: Any) -> tuple[str, str]:
    """(field, problem) of one validation error; an unknown key says which known key it resembles."""
    loc = tuple(err["loc"])
    field = ".".join(str(p) for p in loc)
    if err["type"] == "extra_forbidden":
        close = difflib.get_close_matches(str(loc[-1]), _keys_at(model, loc[:-1]), n=1)
        return field, "unknown key" + (f"; did you mean '{close[0]}'?" if close else "")
    return field, " ".join(err["msg"].removeprefix("Value error, ").split())


def _keys_at(root: type[BaseModel], loc: tuple) -> list[str]:
    """The field names the schema allows where `loc` points (for a 'did you mean')."""
    model: Any = root
    for part in loc:
        if not (isinstance(model, type) and issubclass(model, BaseModel)) or part not in model.model_fields:
            continue  # a list index or a dict key: stay on the item type found below
        model = model.model_fields[part].annotation
        while not (isinstance(model, type) and issubclass(model, BaseModel)) and get_args(model):
            model = get_args(model)[-1]
    return list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []
