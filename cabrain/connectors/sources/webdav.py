"""Nextcloud, ownCloud and any WebDAV server: text, Markdown, PDF and office files, on ``webdav4``.

Config: ``url`` (the WebDAV root; Nextcloud's is ``https://HOST/remote.php/dav/files/USER``),
``path`` (the folder under it, default the root), ``username`` (basic auth with the password or app
password in ``$token_env``; without a username the token is sent as a bearer token), ``token_env``,
``include`` / ``exclude`` (glob patterns, as the folder connector's), ``ssl_verify``.

The listing walks the folder a level at a time (``PROPFIND`` with ``Depth: 1``, which every server
allows; ``infinity`` is often refused). An item is a file: its key the path under ``path``, its
version the server's ETag (else its modification time and size), its URL the file's own.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar
from urllib.parse import quote

from cabrain.connectors.base import Document, ItemRef, SourceSpec
from cabrain.connectors.config import checked, globs, matches
from cabrain.connectors.files import file_document
from cabrain.connectors.retry import Retry, retry_after
from cabrain.connectors.sources.folder import DOCUMENTS
from cabrain.egress import Egress
from cabrain.errors import SourceAuthError, SourceError

__all__ = ["KIND", "LOCAL", "WebDavSource", "build", "configure"]

KIND = "webdav"
LOCAL = False
OFFICE = ("*.xlsx", "*.pptx", "*.ods", "*.odp", "*.csv")

T = TypeVar("T")

configure = checked(
    KIND,
    required={"url": str},
    optional={
        "path": (str, "/"),
        "username": (str, None),
        "token_env": (str, None),
        "include": (list, [*DOCUMENTS, *OFFICE]),
        "exclude": (list, []),
        "ssl_verify": (bool, True),
        "timeout_s": ((int, float), 30),
    },
    check=globs(KIND, "include", "exclude"),
)


class WebDavSource:
    kind: ClassVar[str] = KIND

    def __init__(
        self,
        config: Mapping[str, Any],
        secret: str | None,
        retry: Retry,
        *,
        max_file_bytes: int,
        part_chars: int,
        egress: Egress | None = None,
    ) -> None:
        from webdav4.client import Client  # lazy: only a WebDAV connector loads it

        self.url = str(config["url"]).rstrip("/")
        self.root = "/" + str(config["path"]).strip("/")
        self.include, self.exclude = list(config["include"]), list(config["exclude"])
        self.retry = retry
        self.max_file_bytes, self.part_chars = max_file_bytes, part_chars
        self.skipped: dict[str, int] = {}
        auth: Any = None
        headers = {}
        if config.get("username"):
            auth = (str(config["username"]), secret or "")
        elif secret:
            headers["Authorization"] = f"Bearer {secret}"
        self.client = Client(
            self.url,
            auth=auth,
            retry=False,
            headers=headers,
            timeout=config["timeout_s"],
            transport=(egress or Egress()).transport(verify=config["ssl_verify"]),  # each connection checked
            trust_env=False,
        )
        self.token_env = config.get("token_env")

    # --- requests, with errors as SourceError --------------------------------------------------------
    def _call(self, what: str, fn: Callable[[], T]) -> T:
        return self.retry.call(what, lambda: self._mapped(what, fn))

    def _mapped(self, what: str, fn: Callable[[], T]) -> T:
        import httpx
        from webdav4.client import BadGatewayError, HTTPError, ResourceNotFound

        try:
            return fn()
        except ResourceNotFound:
            raise SourceError(f"{what}: not found at {self.url}", status_code=404) from None
        except BadGatewayError:
            raise SourceError(f"{what}: bad gateway", status_code=502) from None
        except HTTPError as exc:
            status = exc.status_code
            if status in (401, 403):
                where = f" (the password or token in ${self.token_env})" if self.token_env else ""
                raise SourceAuthError(
                    f"{self.url} refused the credential{where}: {status} {exc.response.reason_phrase}",
                    hint="check the user name and the app password or token"
                    if status == 401
                    else "check the account's rights",
                    status_code=status,
                ) from None
            raise SourceError(
                f"{what}: {status} {exc.response.reason_phrase}",
                status_code=status,
                retry_after=retry_after(exc.response.headers.get("Retry-After")),
            ) from None
        except httpx.TransportError as exc:
            raise SourceError(f"{what}: cannot reach {self.url}: {exc}") from None

    # --- checking ------------------------------------------------------------------------------------
    def check(self) -> None:
        """The folder answers the credential as a folder (one ``PROPFIND``, ``Depth: 0``)."""
        try:
            folder = self._call(f"reach {self.root}", lambda: self.client.isdir(self.root))
        except SourceAuthError:
            raise
        except SourceError as exc:
            if exc.status_code != 404:
                raise
            raise SourceError(
                f"webdav: there is no folder {self.root} at {self.url}",
                hint="check url (Nextcloud's is https://HOST/remote.php/dav/files/USER) and path, the folder under it",
                status_code=404,
            ) from None
        if not folder:
            raise SourceError(
                f"webdav: {self.root} at {self.url} is a file, not a folder",
                hint="point path at the folder that holds the documents",
                status_code=422,
            )

    # --- listing -------------------------------------------------------------------------------------
    def scan(self) -> Iterator[ItemRef]:
        pending = [self.root]
        while pending:
            folder = pending.pop(0)
            entries = self._call(f"list {folder}", lambda f=folder: self.client.ls(f, detail=True))  # type: ignore[misc]
            files = []
            for entry in entries:
                assert isinstance(entry, dict)
                name = "/" + str(entry["name"]).strip("/")
                if entry.get("type") == "directory":
                    pending.append(name)
                    continue
                rel = name[len(self.root) :].lstrip("/") if self.root != "/" else name.lstrip("/")
                if matches(rel, self.include) and not matches(rel, self.exclude):
                    files.append((rel, name, entry))
            pending.sort()
            for rel, name, entry in sorted(files):
                modified = entry.get("modified")
                stamp = modified.isoformat() if isinstance(modified, datetime) else str(modified or "")
                version = str(entry.get("etag") or f"{stamp}:{entry.get('content_length')}").strip('"')
                yield ItemRef(
                    rel,
                    version,
                    f"{self.url}{quote(name)}",
                    {
                        "path": name,
                        "modified": stamp,
                        "size": entry.get("content_length"),
                        "type": entry.get("content_type"),
                    },
                )

    # --- reading -------------------------------------------------------------------------------------
    def fetch(self, ref: ItemRef) -> Document:
        path = str(ref.hint.get("path") or f"{self.root.rstrip('/')}/{ref.key}")
        size = ref.hint.get("size")
        modified = ref.hint.get("modified")
        when = datetime.fromisoformat(modified) if modified else None
        if when is not None and when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        if isinstance(size, int) and size > self.max_file_bytes:
            self.skipped["too large"] = self.skipped.get("too large", 0) + 1
            return Document(ref, ref.key, (), valid_at=when)

        def download() -> bytes:
            buffer = io.BytesIO()
            self.client.download_fileobj(path, buffer)
            return buffer.getvalue()

        data = self._call(f"download {path}", download)
        name = path.rsplit("/", 1)[-1]
        return file_document(
            ref,
            data,
            name,
            mime=ref.hint.get("type"),
            when=when,
            max_bytes=self.max_file_bytes,
            part_chars=self.part_chars,
            skipped=self.skipped,
        )

    def close(self) -> None:
        self.client.http.close()


def build(spec: SourceSpec, retry: Retry) -> WebDavSource:
    return WebDavSource(
        spec.config,
        spec.secret,
        retry,
        max_file_bytes=spec.max_file_bytes,
        part_chars=spec.part_chars,
        egress=spec.egress,
    )
