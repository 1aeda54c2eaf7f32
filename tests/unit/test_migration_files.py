import re
from pathlib import Path

import pytest

import cabrain
from cabrain.errors import MigrationError, SchemaError
from cabrain.settings import default_schema_dir, load_settings
from cabrain.store.migrations import discover


def write(folder: Path, name: str, text: str = "SELECT 1;") -> None:
    (folder / name).write_text(text)


def test_the_shipped_schema_is_numbered_and_renders_completely():
    files = discover(default_schema_dir())
    assert [m.version for m in files] == sorted(m.version for m in files)
    assert files[0].name == "0001_core.sql"
    for m in files:
        sql = m.render({"embedding_dim": 384})
        assert "{{" not in sql
    assert "vector(384)" in files[0].render({"embedding_dim": 384})


def test_the_migrations_are_package_data_found_from_the_package_itself():
    package = Path(cabrain.__file__).resolve().parent
    assert default_schema_dir().resolve() == package / "schema"
    assert load_settings().schema_dir == default_schema_dir()
    assert not (package.parent / "schema").exists(), "the migrations live in cabrain/schema/ only"


def test_files_are_applied_in_version_order_and_other_files_are_ignored(tmp_path):
    write(tmp_path, "0002_second.sql")
    write(tmp_path, "0001_first.sql")
    write(tmp_path, "README.md", "notes")
    assert [m.name for m in discover(tmp_path)] == ["0001_first.sql", "0002_second.sql"]


def test_checksum_changes_when_a_file_changes(tmp_path):
    write(tmp_path, "0001_first.sql", "SELECT 1;")
    before = discover(tmp_path)[0].checksum
    write(tmp_path, "0001_first.sql", "SELECT 2;")
    assert discover(tmp_path)[0].checksum != before


@pytest.mark.parametrize("name", ["1_short.sql", "0001-dash.sql", "0001_Upper.sql", "abcd_x.sql"])
def test_badly_named_files_are_rejected_with_the_expected_form(tmp_path, name):
    write(tmp_path, name)
    with pytest.raises(SchemaError, match=re.escape("NNNN_lowercase_words.sql")):
        discover(tmp_path)


def test_two_files_with_one_version_are_rejected(tmp_path):
    write(tmp_path, "0001_a.sql")
    write(tmp_path, "0001_b.sql")
    with pytest.raises(SchemaError, match="share version 0001"):
        discover(tmp_path)


def test_missing_or_empty_schema_dir_is_a_clear_error(tmp_path):
    with pytest.raises(SchemaError, match="does not exist") as info:
        discover(tmp_path / "nope")
    assert "CABRAIN_SCHEMA_DIR" in (info.value.hint or "")
    with pytest.raises(SchemaError, match="no migrations"):
        discover(tmp_path)


def test_unknown_template_variables_are_refused(tmp_path):
    write(tmp_path, "0001_a.sql", "CREATE TABLE t (v vector({{ vector_size }}));")
    with pytest.raises(MigrationError, match="vector_size"):
        discover(tmp_path)[0].render({"embedding_dim": 8})
