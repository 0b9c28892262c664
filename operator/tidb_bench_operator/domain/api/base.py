"""The one pydantic base of the project's wire models: snake_case in Python, camelCase outside."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class CamelModel(BaseModel):
    """A model written or read by people or other programs: camelCase keys, unknown keys fail.

    What users write (a spec) and what this program computes (results, verdicts) use it as is.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class TolerantCamelModel(CamelModel):
    """A model read back from the API server or another process: unknown keys are ignored.

    A status written by another controller version, or a runner's message with a field this
    version does not know, must still be readable.
    """

    model_config = ConfigDict(extra="ignore")
