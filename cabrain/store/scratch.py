"""SQL of the measuring tools' scratch databases (:mod:`cabrain.scratch`): creating and dropping a
database on the hot tier's server, and the mark (the database's comment) that says a kept one is
complete. Server-level statements: no table of CaBrain's."""

from __future__ import annotations

# the mark of a kept database (``COMMENT ON DATABASE``), or NULL
DATABASE_MARK = "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1"


def create_database(name: str) -> str:
    return f'CREATE DATABASE "{name}"'


def drop_database(name: str) -> str:
    return f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'


def mark_database(name: str, fingerprint: str) -> str:
    return f'COMMENT ON DATABASE "{name}" IS ' + "'" + fingerprint.replace("'", "''") + "'"
