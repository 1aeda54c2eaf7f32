"""The :class:`Settings` object, built from its field groups, and how it is loaded from the environment."""

from __future__ import annotations

import difflib
import enum
import re
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from cabrain.errors import ConfigError
from cabrain.settings.core import CoreSettings
from cabrain.settings.local_models import LocalModelSettings
from cabrain.settings.operations import OperationsSettings
from cabrain.settings.workflow_audit import WorkflowAuditSettings


# Pydantic lists the fields of the last base first: CoreSettings', OperationsSettings', the local
# models', then these.
class Settings(WorkflowAuditSettings, LocalModelSettings, OperationsSettings, CoreSettings, BaseSettings):
    """Every knob CaBrain has. Each field is ``CABRAIN_<NAME>`` in the environment."""

    model_config = SettingsConfigDict(env_prefix="CABRAIN_", extra="ignore", frozen=True, validate_default=True)

    # --- logs ----------------------------------------------------------------------------------
    log_level: str = Field(default="WARNING", description="DEBUG, INFO, WARNING, ERROR.")

    @field_validator("log_level")
    @classmethod
    def _check_log_level(cls, value: str) -> str:
        level = value.upper()
        if level not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError(f"unknown log level {value!r}; use DEBUG, INFO, WARNING or ERROR")
        return level

    # --- derived -------------------------------------------------------------------------------
    @property
    def embedded(self) -> bool:
        """True when the hot tier is the embedded PostgreSQL (no database URL given)."""
        return self.database_url is None

    @property
    def embedded_pg_dir(self) -> Path:
        return self.home / "pg"

    @property
    def cold_dir(self) -> Path:
        return self.home / "cold"

    @property
    def resolved_local_models_dir(self) -> Path:
        return self.local_models_dir or self.home / "models"

    @property
    def resolved_backup_dir(self) -> Path:
        return self.backup_dir or self.home / "backups"

    @property
    def resolved_cold_catalog_uri(self) -> str:
        return self.cold_catalog_uri or f"sqlite:///{self.cold_dir / 'catalog.db'}"

    @property
    def resolved_cold_warehouse(self) -> str:
        return self.cold_warehouse or (self.cold_dir / "warehouse").as_uri()


def load_settings(**overrides: object) -> Settings:
    """Build :class:`Settings` from the environment (and explicit overrides).

    Raises :class:`ConfigError` naming every bad variable instead of pydantic's raw report.
    """
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) or "settings"
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(msg if field == "settings" else f"CABRAIN_{field.upper()}: {msg}")
        raise ConfigError(
            "invalid settings: " + "; ".join(problems),
            hint="fix the variable(s) above in the environment (see README, 'Settings')",
        ) from None
    except SettingsError as exc:  # a value that must be JSON (a dict, a list) and is not
        found = re.search(r'field "([a-z0-9_]+)"', str(exc))
        name = f"CABRAIN_{found.group(1).upper()}" if found else "a CABRAIN_ variable"
        cause = f" ({exc.__cause__})" if exc.__cause__ else ""
        raise ConfigError(
            f"invalid settings: {name} is not valid JSON{cause}",
            hint='write it as JSON, e.g. CABRAIN_SOURCE_WEIGHTS=\'{"manual": 0.8, "chat": 0.4}\'',
        ) from None


# CABRAIN_ variables that are not settings of the package: the scripts', the test suite's and the
# sleep cycle's crash points (cabrain/failpoints.py).
OTHER_VARIABLES = frozenset(
    {
        "CABRAIN_TEST_CEILING",
        "CABRAIN_TEST_TMPDIR",
        "CABRAIN_VENV",
        "CABRAIN_TORCH_VERSION",
        "CABRAIN_TORCH_INDEX_URL",
        "CABRAIN_FAILPOINTS",
    }
)


def known_variables() -> set[str]:
    return {f"CABRAIN_{name.upper()}" for name in Settings.model_fields} | OTHER_VARIABLES


def unknown_variables(environ: dict[str, str]) -> list[tuple[str, str | None]]:
    """The ``CABRAIN_*`` names in ``environ`` that no setting reads, each with the closest known
    name (a misspelled variable would otherwise be ignored without a word)."""
    known = known_variables()
    suffixes = {k.removeprefix("CABRAIN_"): k for k in known}
    out = []
    for name in sorted(environ):
        if name.startswith("CABRAIN_") and name not in known:
            close = difflib.get_close_matches(name.removeprefix("CABRAIN_"), suffixes, n=1, cutoff=0.7)
            out.append((name, suffixes[close[0]] if close else None))
    return out


def describe_unknown(unknown: list[tuple[str, str | None]]) -> str:
    return "; ".join(
        f"{name} is not a CaBrain setting" + (f" (did you mean {close}?)" if close else "") for name, close in unknown
    )


def settings_for_replicas(settings: Settings, **overrides: Any) -> dict[str, Any]:
    """The settings this process was given explicitly (environment or overrides), as plain
    values, so replicas and Ray tasks anywhere in the cluster run with the same configuration."""
    out: dict[str, Any] = {}
    for name in sorted(settings.model_fields_set):
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        elif isinstance(value, Path):
            value = str(value)
        elif isinstance(value, enum.Enum):
            value = value.value
        out[name] = value
    out.update(overrides)
    return out
