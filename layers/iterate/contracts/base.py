"""Shared base for every boundary model: unknown fields are refused."""

from pydantic import BaseModel, ConfigDict

SCHEMA_VERSION = "1.0"


class Contract(BaseModel):
    """A model at a boundary (file, step payload, LLM output, API body): extra fields are an error."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
