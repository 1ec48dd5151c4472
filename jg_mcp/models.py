"""The base of the project's pydantic models: a misspelt key fails loudly, and the docstring under each field is
its description (in the JSON schema and in the error that names it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """A model that refuses fields it does not name. A subclass adds to its config (`frozen=True`, ...) with a
    `model_config` of its own, which pydantic merges with this one."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ReportModel(Strict):
    """A model of the eval report (jg_mcp/eval/report.py): Strict's rules, and floats written as JSON allows."""

    model_config = ConfigDict(ser_json_inf_nan="constants")
    """NaN and inf (a worst element that is NaN) are written as JSON's NaN/Infinity constants, which Python and the
    report loader read back, rather than as null, which would not validate."""
