"""Google Drive: every file under a folder (or in the whole drive an access token sees) as one item.

Read with google-api-python-client (Drive API v3, its discovery document bundled: no network call
to build the client). The config::

    {"token_env": "GDRIVE_TOKEN", "folder_id": "1AbC...", "shared_drives": false}

- ``token_env`` names the variable holding an OAuth 2.0 **access token** with a Drive read scope
  (``drive.readonly``). CaBrain neither refreshes nor mints tokens: an access token lasts about an
  hour, so whoever runs the sync puts a fresh one there (``gcloud auth print-access-token``, a
  service account's token, a refresh done by a sidecar). A refused token stops the connector
  (:class:`~cabrain.errors.SourceAuthError`) rather than being retried;
- ``folder_id``: only files under that folder, recursively (folders are walked breadth first,
  each once); absent, every file the token sees (``trashed = false``);
- ``shared_drives``: also read shared drives (``supportsAllDrives``, ``includeItemsFromAllDrives``
  and ``corpora=allDrives``): needed for a folder in a shared drive too;
- ``api_url``: the API's root (Google's ``https://www.googleapis.com``; tests point it at a
  stand-in). The client then requests ``{api_url}/drive/v3/files`` ...

An item is a file: key = its id, version = Drive's ``version`` (which moves on every change to the
file, content or metadata; ``md5Checksum`` or ``modifiedTime`` where it is missing), url = its
``webViewLink``. Fetching exports Google's own formats as text (a Doc and Slides as ``text/plain``, a
Sheet as ``text/csv``), downloads any other file (``alt=media``) and reads it with
:func:`~cabrain.connectors.convert.to_text`, then cuts it into parts with
:func:`~cabrain.connectors.split.split`; each part is said by the file's last modifier, at its
modification time. A file with nothing to read (an image, a Form, one over the size limit, one Drive
will not export or lets nobody download, a corrupt document) is a document with no parts.

Every request goes through :meth:`Retry.call <cabrain.connectors.retry.Retry.call>` and the client's
own retries stay off (``num_retries=0``), so Drive's 429s, its 403 ``rateLimitExceeded`` /
``userRateLimitExceeded`` (read as a 429) and its 5xx are retried once, by us.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from cabrain.connectors.base import Document, ItemRef, SourceSpec
from cabrain.connectors.config import checked, http_url
from cabrain.connectors.convert import Converted, to_text
from cabrain.connectors.retry import Retry, retry_after
from cabrain.connectors.split import split
from cabrain.egress import Egress
from cabrain.errors import InputError, SourceAuthError, SourceError

__all__ = ["KIND", "LOCAL", "DriveSource", "build", "configure"]

KIND = "gdrive"
LOCAL = False

T = TypeVar("T")
log = logging.getLogger("cabrain.connectors")

GOOGLE_APPS = "application/vnd.google-apps."
FOLDER = "application/vnd.google-apps.folder"
SHORTCUT = "application/vnd.google-apps.shortcut"
# Google's own formats hold no bytes: each is exported as text (MIME type, the extension to read it by).
EXPORTS: dict[str, tuple[str, str]] = {
    "application/vnd.google-apps.document": ("text/plain", ".txt"),
    "application/vnd.google-apps.spreadsheet": ("text/csv", ".csv"),
    "application/vnd.google-apps.presentation": ("text/plain", ".txt"),
}
FILE_FIELDS = (
    "id,name,mimeType,modifiedTime,version,webViewLink,md5Checksum,size,"
    "owners(displayName,emailAddress),lastModifyingUser(displayName,emailAddress)"
)
LIST_FIELDS = f"nextPageToken,files({FILE_FIELDS})"
PAGE_SIZE = 100
RATE_LIMITED = frozenset({"rateLimitExceeded", "userRateLimitExceeded"})
# 403s about one file, not the credential: that file is skipped, the sync goes on.
UNREADABLE = frozenset(
    {"exportSizeLimitExceeded", "cannotExportFile", "cannotDownloadFile", "cannotDownloadAbusiveFile"}
    | {"fileNotDownloadable", "fileNotExportable"}
)
TOKEN_HINT = (
    "put a fresh OAuth 2.0 access token with a Drive read scope (drive.readonly) in ${env}: "
    "access tokens expire after about an hour"
)
_ID = re.compile(r"^[A-Za-z0-9_-]+$")


def _check(config: dict[str, Any]) -> None:
    if config["api_url"] is not None:
        config["api_url"] = http_url(KIND, "api_url", config["api_url"])
    folder = config["folder_id"]
    if folder is not None and not _ID.match(folder):
        raise InputError(
            f"{KIND} connector: folder_id must be a Drive folder id (letters, digits, '-' and '_'), got {folder!r}",
            hint="copy it from the folder's address: https://drive.google.com/drive/folders/<folder_id>",
        )


configure = checked(
    KIND,
    required={"token_env": str},
    optional={"folder_id": (str, None), "api_url": (str, None), "shared_drives": (bool, False)},
    check=_check,
)


def build(spec: SourceSpec, retry: Retry) -> DriveSource:
    config = configure(spec.config)
    if not spec.secret:
        raise SourceAuthError(
            f"{KIND} connector: no access token in ${config['token_env']}",
            hint=TOKEN_HINT.format(env=config["token_env"]),
        )
    return DriveSource(
        config, spec.secret, retry, max_bytes=spec.max_file_bytes, part_chars=spec.part_chars, egress=spec.egress
    )


class _Unreadable(SourceError):
    """Drive will not hand over this one file (too large to export, downloads disabled ...)."""


class DriveSource:
    """The files under one folder, or in the whole drive, of the token's account."""

    kind: ClassVar[str] = KIND

    def __init__(
        self,
        config: Mapping[str, Any],
        token: str,
        retry: Retry,
        *,
        max_bytes: int = 20_000_000,
        part_chars: int = 2000,
        timeout_s: float = 60.0,
        egress: Egress | None = None,
    ) -> None:
        import google_auth_httplib2
        from google.oauth2.credentials import Credentials
        from googleapiclient.discovery import build as discover

        self.retry = retry
        self.token_env: str = config["token_env"]
        self.folder: str | None = config.get("folder_id")
        self.shared = bool(config.get("shared_drives", False))
        self.max_bytes = max_bytes
        self.part_chars = part_chars
        # No refresh on a 401: the token is all we have, so a refused one is reported, not refreshed.
        http = google_auth_httplib2.AuthorizedHttp(
            Credentials(token=token), http=(egress or Egress()).httplib2(timeout_s), refresh_status_codes=()
        )
        options = {"api_endpoint": _endpoint(config["api_url"])} if config.get("api_url") else None
        self.service = discover(
            "drive", "v3", http=http, client_options=options, static_discovery=True, cache_discovery=False
        )
        self.files = self.service.files()

    # --- checking --------------------------------------------------------------------------------
    def check(self) -> None:
        """One request with the token: the folder read (a folder the token's account sees, not in
        the trash), or without one the drive's first file listed."""
        if self.folder is None:
            params: dict[str, Any] = {"q": "trashed = false", "pageSize": 1, "fields": "files(id)"}
            if self.shared:
                params |= {"supportsAllDrives": True, "includeItemsFromAllDrives": True, "corpora": "allDrives"}
            self._call("list files", self.files.list(**params).execute)
            return
        params = {"fileId": self.folder, "fields": "id,name,mimeType,trashed"}
        if self.shared:
            params["supportsAllDrives"] = True
        try:
            item: dict[str, Any] = self._call("read the folder", self.files.get(**params).execute)
        except SourceAuthError:
            raise
        except SourceError as exc:
            if exc.status_code != 404:
                raise
            raise SourceError(
                f"{KIND}: no folder {self.folder} is visible to the access token in ${self.token_env}",
                hint="check folder_id (https://drive.google.com/drive/folders/<folder_id>), share the folder with "
                "the token's account, and set shared_drives true for a folder in a shared drive",
                status_code=404,
            ) from None
        name = item.get("name") or self.folder
        if item.get("mimeType") != FOLDER:
            raise SourceError(
                f"{KIND}: folder_id {self.folder} is {name!r}, a file, not a folder",
                hint="copy the id of the folder that holds the files, from its address",
                status_code=422,
            )
        if item.get("trashed"):
            raise SourceError(
                f"{KIND}: the folder {name!r} ({self.folder}) is in the trash",
                hint="restore it from Drive's trash, or name another folder",
                status_code=404,
            )

    # --- listing ---------------------------------------------------------------------------------
    def scan(self) -> Iterator[ItemRef]:
        """Every non-trashed file (not folders or shortcuts): under the folder breadth first, a
        folder's files in creation order; without a folder, the whole drive in creation order."""
        if self.folder is None:
            for item in self._list("trashed = false"):
                if item.get("mimeType") not in (FOLDER, SHORTCUT):
                    yield self._ref(item)
            return
        queue, visited, seen = [self.folder], {self.folder}, set()
        while queue:
            folder = queue.pop(0)
            for item in self._list(f"{_quoted(folder)} in parents and trashed = false"):
                mime, ident = item.get("mimeType"), item["id"]
                if mime == FOLDER:
                    if ident not in visited:
                        visited.add(ident)
                        queue.append(ident)
                elif mime != SHORTCUT and ident not in seen:  # a file may sit in two folders
                    seen.add(ident)
                    yield self._ref(item)

    def _list(self, q: str) -> Iterator[dict[str, Any]]:
        """The files ``q`` finds, page by page (Drive's ``nextPageToken``)."""
        params: dict[str, Any] = {"q": q, "pageSize": PAGE_SIZE, "fields": LIST_FIELDS, "orderBy": "createdTime"}
        if self.shared:  # a shared drive's folder is outside the default corpus ("user") too
            params |= {"supportsAllDrives": True, "includeItemsFromAllDrives": True, "corpora": "allDrives"}
        token: str | None = None
        while True:
            request = self.files.list(**params, **({"pageToken": token} if token else {}))
            answer = self._call("list files", request.execute)
            yield from answer.get("files") or []
            token = answer.get("nextPageToken")
            if not token:
                return

    def _ref(self, item: Mapping[str, Any]) -> ItemRef:
        ident = item["id"]
        version = item.get("version") or item.get("md5Checksum") or item.get("modifiedTime") or ""
        url = item.get("webViewLink") or f"https://drive.google.com/file/d/{ident}/view"
        return ItemRef(key=ident, version=str(version), url=url, hint=_hint(item))

    # --- fetching --------------------------------------------------------------------------------
    def fetch(self, ref: ItemRef) -> Document:
        """The file as text; its listing's metadata comes in ``ref.hint`` (read again when absent)."""
        meta = dict(ref.hint) if "mimeType" in ref.hint else self._metadata(ref.key)
        name, mime = meta.get("name") or ref.key, meta.get("mimeType") or ""
        try:
            content = self._content(ref.key, name, mime, meta.get("size"))
        except _Unreadable as exc:
            log.info("drive file skipped", extra={"file": ref.key, "reason": exc.message})
            return self._document(ref, meta, None, skipped=exc.message)
        if content is None:
            return self._document(ref, meta, None, skipped="no text to read in this type of file")
        data, filename, filetype = content
        try:
            converted = to_text(data, filename, filetype, max_bytes=self.max_bytes)
        except InputError as exc:  # corrupt, or over the limit: this file is skipped, the sync goes on
            log.warning("drive file unreadable", extra={"file": ref.key, "error": exc.message})
            return self._document(ref, meta, None, skipped=exc.message)
        if converted is None:
            return self._document(ref, meta, None, skipped="no text to read in this type of file")
        return self._document(ref, meta, converted)

    def _metadata(self, ident: str) -> dict[str, Any]:
        params: dict[str, Any] = {"fileId": ident, "fields": f"{FILE_FIELDS},trashed"}
        if self.shared:
            params["supportsAllDrives"] = True
        item: dict[str, Any] = self._call("read file metadata", self.files.get(**params).execute)
        if item.get("trashed"):
            raise SourceError(f"drive file {ident} is in the trash", status_code=404)
        return _hint(item)

    def _content(self, ident: str, name: str, mime: str, size: Any) -> tuple[bytes, str, str] | None:
        """The bytes to read, the name to read them by and their type; None when there are none."""
        if mime in EXPORTS:
            target, extension = EXPORTS[mime]
            data: bytes = self._call("export file", self.files.export_media(fileId=ident, mimeType=target).execute)
            data = data.removeprefix(b"\xef\xbb\xbf")  # Drive starts a text export with a BOM
            return data, name if name.lower().endswith(extension) else name + extension, target
        if mime.startswith(GOOGLE_APPS):  # Forms, Drawings, Sites, Maps: nothing exported as text
            return None
        if size is not None and int(size) > self.max_bytes:
            raise _Unreadable(f"{name} is {int(size):,} bytes, over the {self.max_bytes:,}-byte limit")
        params: dict[str, Any] = {"fileId": ident}
        if self.shared:
            params["supportsAllDrives"] = True
        data = self._call("download file", self.files.get_media(**params).execute)
        return data, name, mime

    def _document(
        self, ref: ItemRef, meta: Mapping[str, Any], converted: Converted | None, *, skipped: str = ""
    ) -> Document:
        name = meta.get("name") or ref.key
        when = _time(meta.get("modifiedTime"))
        metadata: dict[str, Any] = {"mime_type": meta.get("mimeType"), "owners": meta.get("owners", [])}
        if converted is None:
            return Document(ref=ref, title=name, parts=(), valid_at=when, metadata=metadata | {"skipped": skipped})
        editor = meta.get("modifiedBy")
        parts = split(converted.text, markdown=converted.markdown, max_chars=self.part_chars, title=name)
        parts = [replace(part, speaker=part.speaker or editor) for part in parts]
        return Document(
            ref=ref, title=name, parts=tuple(parts), valid_at=when, metadata=metadata | {"format": converted.format}
        )

    # --- requests --------------------------------------------------------------------------------
    def _call(self, what: str, request: Callable[[], T]) -> T:
        """``request()``, its failures as SourceError, retried as they allow."""
        from google.auth.exceptions import RefreshError
        from googleapiclient.errors import HttpError
        from httplib2 import HttpLib2Error

        def attempt() -> T:
            try:
                return request()
            except HttpError as exc:
                raise self._error(what, exc) from exc
            except RefreshError as exc:
                raise self._refused(what, str(exc)) from exc
            except (OSError, HttpLib2Error) as exc:  # refused, reset, timed out: no answer at all
                raise SourceError(f"{what}: Google Drive did not answer ({exc or type(exc).__name__})") from exc

        return self.retry.call(what, attempt)

    def _error(self, what: str, exc: Any) -> SourceError:
        status = int(exc.status_code)
        reason, message = _reason(exc.content), exc.reason or ""
        wait = retry_after(exc.resp.get("retry-after"))
        if status == 401:
            return self._refused(what, message)
        if status == 403 and reason in RATE_LIMITED:
            return SourceError(f"{what}: Drive's rate limit ({reason})", status_code=429, retry_after=wait)
        if status == 403 and reason in UNREADABLE:
            return _Unreadable(f"{what}: {message or reason}", status_code=403)
        if status == 403:
            return SourceAuthError(
                f"{what}: the access token in ${self.token_env} may not read this ({message or reason or 403})",
                hint=f"share the folder with the token's account, or grant the token a Drive read scope (${self.token_env})",
            )
        return SourceError(f"{what}: Drive answered {status} ({message})", status_code=status, retry_after=wait)

    def _refused(self, what: str, detail: str) -> SourceAuthError:
        return SourceAuthError(
            f"{what}: the access token in ${self.token_env} was refused ({detail or 401})",
            hint=TOKEN_HINT.format(env=self.token_env),
        )

    def close(self) -> None:
        self.service.close()


def _endpoint(api_url: str) -> str:
    """The client's base: the API root plus Drive v3's service path (kept when already given)."""
    root = api_url.rstrip("/")
    return f"{root}/" if root.endswith("/drive/v3") else f"{root}/drive/v3/"


def _quoted(value: str) -> str:
    """A string literal in Drive's query language."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _hint(item: Mapping[str, Any]) -> dict[str, Any]:
    """What fetch needs of a listed file, so it need not ask again."""
    modifier = item.get("lastModifyingUser") or {}
    return {
        "name": item.get("name"),
        "mimeType": item.get("mimeType"),
        "modifiedTime": item.get("modifiedTime"),
        "size": item.get("size"),
        "modifiedBy": modifier.get("displayName") or modifier.get("emailAddress"),
        "owners": [o.get("displayName") or o.get("emailAddress") for o in item.get("owners") or []],
    }


def _reason(content: bytes) -> str | None:
    """The first ``reason`` of Google's error body, if it has one."""
    try:
        errors = json.loads(content)["error"]["errors"]
        return str(errors[0]["reason"])
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def _time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None
