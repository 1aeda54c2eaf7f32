"""The cold tier's half of ``cabrain backup`` and ``cabrain restore`` (see :mod:`cabrain.store.backup`).

What is copied: every file under the warehouse (``file://`` or ``s3://``, through the same pyarrow file
system pyiceberg writes with) to ``cold/warehouse/``, and the catalog's pointers: a consistent copy of a
SQLite catalog (``cold/catalog.db``, through sqlite3's backup API); a PostgreSQL catalog kept in the hot
tier's own database is in the dump already; any other catalog is recorded as its pointers (restored by
registering the tables again). A copy is checked before the backup is called done: every file the copied
pointers reach (metadata, manifest lists, manifests, live data files, of every snapshot) must be in it.

Iceberg keeps absolute locations. The catalog points at a metadata JSON file by its full URI; that file
names the table's location, its manifest lists and its metadata log; each manifest list (Avro) names its
manifests and their lengths; each manifest (Avro) names its data files. Parquet files name nothing. A
restore to another warehouse (a new home folder, another bucket) therefore rewrites those locations,
prefix for prefix, in the JSON and Avro files as it copies them, and in the catalog, which is what
Iceberg's ``RewriteTablePath`` action does; restored to the same warehouse, every file is copied as is.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import sqlite3
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from cabrain.errors import ColdStoreError
from cabrain.progress import Say, as_progress
from cabrain.providers.cold_store import CATALOG_NAME, catalog_properties, open_catalog, private_files
from cabrain.settings import Settings

if TYPE_CHECKING:
    from pyarrow.fs import FileSystem
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.types import StructType

SQLITE, HOT, OTHER = "sqlite", "hot database", "sql"  # where the catalog lives
CATALOG_FILE = "catalog.db"
WAREHOUSE_DIR = "warehouse"
CHUNK = 1 << 20
# Field ids of the Iceberg spec: manifest list (manifest_path, manifest_length, content), manifest entry
# (status, data_file), data file (file_path, record_count).
MANIFEST_PATH, MANIFEST_LENGTH, MANIFEST_CONTENT = 500, 501, 517
STATUS, DATA_FILE, FILE_PATH, RECORD_COUNT = 0, 2, 100, 103
DELETED = 2
# The catalog's pointers, moved to another warehouse: {p}1 is the old prefix, {p}2 the new one (both with
# a trailing slash); {p} is "$" for PostgreSQL, "?" for SQLite.
MOVE_POINTERS = """
UPDATE iceberg_tables
SET metadata_location = {p}2 || substr(metadata_location, length({p}1) + 1),
    previous_metadata_location = CASE WHEN substr(previous_metadata_location, 1, length({p}1)) = {p}1
        THEN {p}2 || substr(previous_metadata_location, length({p}1) + 1) ELSE previous_metadata_location END
WHERE catalog_name = '{catalog}' AND substr(metadata_location, 1, length({p}1)) = {p}1
"""
SQLITE_POINTERS = (
    f"SELECT table_namespace, table_name, metadata_location FROM iceberg_tables WHERE catalog_name = '{CATALOG_NAME}'"
)


def move_pointers(placeholder: str) -> str:
    return MOVE_POINTERS.format(p=placeholder, catalog=CATALOG_NAME)


@dataclass(frozen=True)
class Pointer:
    """A table of the catalog and the metadata file it points at."""

    identifier: str
    metadata_location: str


class Missing(Exception):
    """A file the copied pointers reach is not in the copy (the cold tier changed while it was copied)."""


# --- where things are ----------------------------------------------------------------------------------------
def sha256_of(path: Path, advance: Callable[[int], None] | None = None) -> str:
    """The file's SHA-256; ``advance`` is told the bytes of each block read."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
            if advance is not None:
                advance(len(block))
    return digest.hexdigest()


def catalog_kind(settings: Settings, hot_dsn: str) -> str:
    """:data:`SQLITE`, :data:`HOT` (a PostgreSQL catalog in the hot tier's database) or :data:`OTHER`."""
    from sqlalchemy.engine import make_url  # heavy: loaded with the cold tier

    url = make_url(settings.resolved_cold_catalog_uri)
    if url.get_backend_name() in ("sqlite", "postgresql"):
        if url.get_backend_name() == "sqlite":
            return SQLITE
        parts, query = urlsplit(hot_dsn), parse_qs(urlsplit(hot_dsn).query)
        hot = (parts.hostname or query.get("host", [""])[0], parts.port or int(query.get("port", ["5432"])[0]))
        catalog = (url.host or str(url.query.get("host", "")), url.port or int(str(url.query.get("port", "5432"))))
        if (*hot, unquote(parts.path.lstrip("/"))) == (*catalog, url.database or ""):
            return HOT
    return OTHER


def sqlite_path(settings: Settings) -> Path:
    from sqlalchemy.engine import make_url

    return Path(make_url(settings.resolved_cold_catalog_uri).database or "")


def relative(location: str, prefix: str) -> str:
    """``location`` below the warehouse ``prefix``, as a relative path."""
    if not location.startswith(prefix + "/"):
        raise ColdStoreError(
            f"the cold tier's file {location} is outside its warehouse {prefix}",
            hint="CaBrain backs up the warehouse (CABRAIN_COLD_WAREHOUSE); move the table into it",
        )
    return location[len(prefix) + 1 :]


@dataclass(frozen=True)
class Warehouse:
    """The configured warehouse: its URI (the prefix of every location in it) and its file system."""

    uri: str
    io: PyArrowFileIO
    fs: FileSystem
    root: str

    @classmethod
    def of(cls, settings: Settings) -> Warehouse:
        from pyiceberg.io.pyarrow import PyArrowFileIO  # heavy: loaded with the cold tier

        uri = settings.resolved_cold_warehouse.rstrip("/")
        io = PyArrowFileIO(catalog_properties(settings))
        scheme, netloc, root = io.parse_location(uri)
        try:
            fs = io.fs_by_scheme(scheme, netloc)
        except Exception as exc:  # pyarrow raises many kinds for a bad endpoint or scheme
            raise ColdStoreError(f"cannot reach the cold warehouse {uri}: {exc}", hint="check CABRAIN_COLD_*") from exc
        return cls(uri, io, fs, root.rstrip("/"))

    def files(self) -> list[str]:
        """Every file under the warehouse, as relative paths."""
        from pyarrow.fs import FileSelector, FileType

        try:
            infos = self.fs.get_file_info(FileSelector(self.root, recursive=True, allow_not_found=True))
        except Exception as exc:
            raise ColdStoreError(f"cannot list the cold warehouse {self.uri}: {exc}") from exc
        return sorted(i.path[len(self.root) + 1 :] for i in infos if i.type == FileType.File)

    def clear(self) -> None:
        """Delete everything under the warehouse (``restore --force``)."""
        self.fs.delete_dir_contents(self.root, missing_dir_ok=True)


# --- backup --------------------------------------------------------------------------------------------------
def copy_out(
    settings: Settings,
    dest: Path,
    *,
    kind: str,
    hot_pointers: list[Pointer],
    say: Say,
    attempts: int = 3,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Copy the catalog and the warehouse into ``dest`` (``DIR/cold``) and check the copy; returns the
    tables (pointer, current snapshot, data files) and the files written (sha256, bytes), by path
    relative to ``dest``. Pointers read anew each attempt (all but :data:`HOT`, fixed by the dump) are
    tried again when history was expired while copying."""
    warehouse, progress = Warehouse.of(settings), as_progress(say)
    for attempt in range(1, attempts + 1):
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(mode=0o700)
        written: dict[str, dict[str, Any]] = {}
        if kind == SQLITE:
            pointers = _copy_sqlite(sqlite_path(settings), dest / CATALOG_FILE)
            if pointers is not None:
                written[CATALOG_FILE] = _summary(dest / CATALOG_FILE)
        else:
            pointers = hot_pointers if kind == HOT else _live_pointers(settings)
        progress(f"cold tier: copying the warehouse {warehouse.uri}")
        files = warehouse.files()
        with progress.track("cold tier: copying", len(files), "files") as tracker:
            for rel in files:
                tracker.advance()
                try:
                    written[f"{WAREHOUSE_DIR}/{rel}"] = _download(warehouse, rel, dest / WAREHOUSE_DIR / rel)
                except FileNotFoundError:
                    continue  # removed meanwhile: the check below says whether anything still needed it
        try:
            tables = [_table_summary(p, dest / WAREHOUSE_DIR, warehouse.uri) for p in pointers or []]
            return tables, written
        except Missing as exc:
            if kind == HOT or attempt == attempts:
                raise ColdStoreError(
                    f"the cold tier changed while it was copied: {exc}",
                    hint="its history was expired meanwhile (sleep maintain); run the backup again",
                ) from exc
            progress(f"cold tier: changed while copied ({exc}); copying again")
    raise AssertionError("unreachable")


def _copy_sqlite(source: Path, target: Path) -> list[Pointer] | None:
    """A consistent copy of the SQLite catalog (sqlite3's online backup); its pointers. None: no catalog."""
    if not source.exists():
        return None
    try:
        with (
            closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True)) as src,
            closing(sqlite3.connect(target)) as copy,
        ):
            src.backup(copy)
    except sqlite3.Error as exc:
        raise ColdStoreError(f"cannot copy the cold-tier catalog {source}: {exc}") from exc
    return _sqlite_pointers(target)


def _sqlite_pointers(path: Path) -> list[Pointer]:
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            has = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'iceberg_tables'").fetchone()
            rows = db.execute(SQLITE_POINTERS).fetchall() if has else []
    except sqlite3.Error as exc:
        raise ColdStoreError(f"cannot read the cold-tier catalog {path}: {exc}") from exc
    return [Pointer(f"{ns}.{name}", location) for ns, name, location in rows]


def _live_pointers(settings: Settings) -> list[Pointer]:
    """The tables of a catalog in another database, as they are now."""
    catalog = open_catalog(settings)
    try:
        return [
            Pointer(".".join(ident), catalog.load_table(ident).metadata_location)
            for namespace in catalog.list_namespaces()
            for ident in catalog.list_tables(namespace)
        ]
    except Exception as exc:
        raise ColdStoreError(
            f"cannot read the cold-tier catalog: {exc}", hint="check CABRAIN_COLD_CATALOG_URI"
        ) from exc


def _summary(path: Path) -> dict[str, Any]:
    return {"sha256": sha256_of(path), "bytes": path.stat().st_size}


def _download(warehouse: Warehouse, rel: str, target: Path) -> dict[str, Any]:
    """Copy one warehouse file to ``target``, hashing it on the way."""
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    try:
        with warehouse.fs.open_input_stream(f"{warehouse.root}/{rel}") as src, open(target, "wb") as out:
            while block := src.read(CHUNK):
                digest.update(block)
                out.write(block)
                size += len(block)
    except FileNotFoundError:
        target.unlink(missing_ok=True)
        raise
    except OSError as exc:
        raise ColdStoreError(f"cannot copy {warehouse.uri}/{rel}: {exc}") from exc
    return {"sha256": digest.hexdigest(), "bytes": size}


# --- reading Iceberg's files ---------------------------------------------------------------------------------
def _read_json(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def _positions(struct: StructType) -> dict[int, int]:
    return {f.field_id: i for i, f in enumerate(struct.fields)}


def _avro(io: PyArrowFileIO, location: str) -> tuple[Any, dict[str, str], list[Any]]:
    """An Avro file's schema (Iceberg's, with field ids), header metadata and records."""
    from pyiceberg.avro.file import AvroFile

    with AvroFile[Any](io.new_input(location)) as reader:
        return reader.schema, dict(reader.header.meta), list(reader)


def _table_summary(pointer: Pointer, copy: Path, prefix: str) -> dict[str, Any]:
    """Check that every file the pointer reaches is in ``copy``; the table's current snapshot, its live
    data files and their records."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    io = PyArrowFileIO()

    def local(location: str) -> str:
        path = copy / relative(location, prefix)
        if not path.is_file():
            raise Missing(f"{location} is not in the copy")
        return str(path)

    metadata = _read_json(Path(local(pointer.metadata_location)))
    current = metadata.get("current-snapshot-id")
    manifests: dict[str, tuple[int, int]] = {}  # manifest path -> (live data files, records)
    files = records = 0
    for snapshot in metadata.get("snapshots", []):
        schema, _, entries = _avro(io, local(snapshot["manifest-list"]))
        at = _positions(schema.as_struct())
        for entry in entries:
            path = entry[at[MANIFEST_PATH]]
            if path not in manifests:
                manifests[path] = _manifest_summary(io, local(path), local)
            if snapshot["snapshot-id"] == current and entry[at[MANIFEST_CONTENT]] == 0:
                files += manifests[path][0]
                records += manifests[path][1]
    return {
        "identifier": pointer.identifier,
        "metadata_location": pointer.metadata_location,
        "snapshot_id": current,
        "snapshots": len(metadata.get("snapshots", [])),
        "data_files": files,
        "records": records,
    }


def _manifest_summary(io: PyArrowFileIO, path: str, local: Callable[[str], str]) -> tuple[int, int]:
    schema, _, entries = _avro(io, path)
    at = _positions(schema.as_struct())
    data = _positions(schema.find_field(DATA_FILE).field_type)
    live = [e for e in entries if e[at[STATUS]] != DELETED]
    for entry in live:
        local(entry[at[DATA_FILE]][data[FILE_PATH]])
    return len(live), sum(e[at[DATA_FILE]][data[RECORD_COUNT]] for e in live)


# --- restore -------------------------------------------------------------------------------------------------
def cold_contents(settings: Settings, kind: str) -> list[str]:
    """What the configured cold tier holds already, for humans (empty: nothing to overwrite)."""
    held = []
    if files := Warehouse.of(settings).files():
        held.append(f"{len(files)} file(s) in the warehouse {settings.resolved_cold_warehouse}")
    if kind == SQLITE and sqlite_path(settings).exists() and _sqlite_pointers(sqlite_path(settings)):
        held.append(f"the catalog {sqlite_path(settings)}")
    elif kind == OTHER and (tables := _live_pointers(settings)):
        held.append(f"table(s) {', '.join(t.identifier for t in tables)} in the catalog")
    return held


def clear_cold(settings: Settings, kind: str) -> None:
    """Empty the configured warehouse, and a SQLite catalog (``restore --force``)."""
    Warehouse.of(settings).clear()
    if kind == SQLITE:
        sqlite_path(settings).unlink(missing_ok=True)


def copy_in(source: Path, settings: Settings, old_prefix: str, say: Say) -> str:
    """Copy the backup's warehouse files (``source`` = ``DIR/cold/warehouse``) into the configured
    warehouse, rewriting locations from ``old_prefix`` to it when they differ. Returns the new prefix."""
    target = Warehouse.of(settings)
    new_prefix = target.uri
    moving = new_prefix != old_prefix
    rels = sorted(str(p.relative_to(source)) for p in source.rglob("*") if p.is_file()) if source.is_dir() else []
    progress = as_progress(say)
    progress(
        f"cold tier: {len(rels)} file(s) into {new_prefix}"
        + (f" (locations moved from {old_prefix})" if moving else "")
    )
    lists: list[str] = []
    lengths: dict[str, int] = {}
    with private_files(), progress.track("cold tier: restoring", len(rels), "files") as tracker:
        for folder in sorted({f"{target.root}/{rel}".rpartition("/")[0] for rel in rels}):
            target.fs.create_dir(folder, recursive=True)
        for rel in rels:  # data files and manifests first: the manifest lists need the manifests' new lengths
            if not moving or not rel.endswith((".avro", ".metadata.json", ".metadata.json.gz")):
                _upload(source / rel, target, rel)
            elif rel.endswith(".avro"):
                schema, meta, records = _avro(target.io, str(source / rel))
                if MANIFEST_PATH in _positions(schema.as_struct()):
                    lists.append(rel)
                    continue
                lengths[f"{new_prefix}/{rel}"] = _write_avro(target, rel, schema, meta, records, old_prefix, lengths)
            tracker.advance()
        for rel in lists:
            schema, meta, records = _avro(target.io, str(source / rel))
            _write_avro(target, rel, schema, meta, records, old_prefix, lengths)
            tracker.advance()
        if moving:
            for rel in rels:
                if rel.endswith((".metadata.json", ".metadata.json.gz")):
                    text = json.dumps(_moved(_read_json(source / rel), old_prefix, new_prefix)).encode()
                    with target.fs.open_output_stream(f"{target.root}/{rel}") as out:
                        out.write(gzip.compress(text) if rel.endswith(".gz") else text)
    return new_prefix


def _upload(path: Path, target: Warehouse, rel: str) -> None:
    try:
        with open(path, "rb") as src, target.fs.open_output_stream(f"{target.root}/{rel}") as out:
            while block := src.read(CHUNK):
                out.write(block)
    except OSError as exc:
        raise ColdStoreError(f"cannot write {target.uri}/{rel}: {exc}", hint="check CABRAIN_COLD_WAREHOUSE") from exc


def _moved(value: Any, old: str, new: str) -> Any:
    """``value`` (parsed JSON) with every string under ``old`` moved under ``new``."""
    if isinstance(value, str):
        return new + value[len(old) :] if value == old or value.startswith(old + "/") else value
    if isinstance(value, list):
        return [_moved(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _moved(v, old, new) for k, v in value.items()}
    return value


def _write_avro(
    target: Warehouse,
    rel: str,
    schema: Any,
    meta: dict[str, str],
    records: list[Any],
    old: str,
    lengths: dict[str, int],
) -> int:
    """Write a manifest or manifest list to ``target`` with its locations moved (and, in a list, the
    manifests' new lengths); returns the file's length."""
    from pyiceberg.avro.file import AvroOutputFile

    for record in records:
        _move_record(record, schema.as_struct(), old, target.uri, lengths)
    location = f"{target.uri}/{rel}"
    name = json.loads(meta.get("avro.schema", "{}")).get("name", "record")
    header = {k: v for k, v in meta.items() if k != "avro.schema"}
    with AvroOutputFile[Any](target.io.new_output(location), schema, name, metadata=header) as out:
        if records:
            out.write_block(records)
    return len(target.io.new_input(location))


def _move_record(record: Any, struct: StructType, old: str, new: str, lengths: dict[str, int]) -> None:
    from pyiceberg.types import StructType as Struct

    at = _positions(struct)
    for field in struct.fields:
        value = record[at[field.field_id]]
        if field.field_id in (MANIFEST_PATH, FILE_PATH) and isinstance(value, str):
            record[at[field.field_id]] = _moved(value, old, new)
        elif isinstance(field.field_type, Struct) and value is not None:
            _move_record(value, field.field_type, old, new, lengths)
    if MANIFEST_LENGTH in at and record[at[MANIFEST_PATH]] in lengths:
        record[at[MANIFEST_LENGTH]] = lengths[record[at[MANIFEST_PATH]]]


def place_catalog(source: Path, settings: Settings, kind: str, pointers: list[Pointer], old: str, new: str) -> str:
    """Put the catalog back: the backup's SQLite catalog where the configured one lives (its pointers
    moved), or the tables registered in the configured catalog. (A catalog in the hot database came
    back with the dump; the caller moves its pointers.) Returns how, for humans."""
    copy = source / CATALOG_FILE
    if kind == SQLITE and copy.exists():
        target = sqlite_path(settings)
        with private_files():
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with (
                closing(sqlite3.connect(f"file:{copy}?mode=ro", uri=True)) as src,
                closing(sqlite3.connect(target)) as dst,
            ):
                src.backup(dst)
            if old != new:
                with closing(sqlite3.connect(target)) as dst, dst:
                    dst.execute(move_pointers("?"), (old + "/", new + "/"))
        return f"catalog {target}"
    catalog = open_catalog(settings)
    with private_files():
        for pointer in pointers:
            namespace, _, _ = pointer.identifier.rpartition(".")
            catalog.create_namespace_if_not_exists(namespace)
            catalog.register_table(pointer.identifier, _moved(pointer.metadata_location, old, new), overwrite=True)
    return f"{len(pointers)} table(s) registered in the catalog"


def prune(settings: Settings, referenced: set[str]) -> int:
    """Delete from the restored table the rows of demotion batches the restored hot tier does not know
    (committed to Iceberg after the dump's snapshot); how many rows."""
    from cabrain.store.cold import ColdTier, one_of

    table = ColdTier(settings).refresh()
    if table.current_snapshot() is None:
        return 0
    counts = Counter(table.scan(selected_fields=("demote_batch",)).to_arrow().column("demote_batch").to_pylist())
    if extra := {b for b in counts if b not in referenced}:
        with private_files():
            table.delete(one_of("demote_batch", extra), snapshot_properties={"cabrain.restore": "unreferenced batches"})
    return sum(counts[b] for b in extra)
