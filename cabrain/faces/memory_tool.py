"""A CaBrain backend for Anthropic's memory tool (``memory_20250818``, SPEC §5.2).

Claude's memory files live in CaBrain instead of on disk:

| memory tool                       | CaBrain                                                              |
|-----------------------------------|----------------------------------------------------------------------|
| file ``/memories/a/b.md``         | a current memory in the tool's namespace, ``source_kind='memory_file'``, ``source_ref='/memories/a/b.md'`` |
| directory                         | virtual: the common prefix of file paths (``/memories`` always exists) |
| ``create``                        | retain (stored as written: no merging with neighbours)               |
| ``str_replace`` / ``insert``      | reconsolidate: a new version supersedes the last; history stays (``get``) |
| ``rename``                        | reconsolidate with the new path                                      |
| ``delete``                        | forget (every file under a directory); nothing is erased             |
| ``view /memories/.search/QUERY``  | hybrid recall over the whole namespace (files and every other memory), hits with provenance |

Results and error messages follow the SDK's reference filesystem implementation
(``BetaLocalFilesystemMemoryTool``), so Claude sees the same behaviour.
"""

from __future__ import annotations

import asyncio
import posixpath
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from anthropic.lib.tools import (
    BetaAbstractMemoryTool,
    BetaAsyncAbstractMemoryTool,
    ToolError,
)
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from cabrain.errors import CabrainError
from cabrain.faces.backend import BrainBackend, HttpBackend, MemoryBackend
from cabrain.types import Memory, MemoryInput, RecallQuery, Visibility

if TYPE_CHECKING:
    from cabrain.settings import Settings

ROOT = "/memories"
SOURCE_KIND = "memory_file"
SEARCH_DIR = f"{ROOT}/.search"
LINE_NUMBER_WIDTH = 6  # as the reference: len(str(999999))
T = TypeVar("T")


def _size(n: int) -> str:
    """File sizes as the reference prints them (B, K, M, G)."""
    if n == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    i = min((n.bit_length() - 1) // 10, len(units) - 1)
    value = n / (1024**i)
    return f"{int(value)}{units[i]}" if value == int(value) else f"{value:.1f}{units[i]}"


def normalise(path: str) -> str:
    """A validated absolute path under /memories, without a trailing slash."""
    if not isinstance(path, str) or not (path == ROOT or path.startswith(ROOT + "/")):
        raise ToolError(f"Path must start with /memories, got: {path}")
    clean = posixpath.normpath(path)
    if clean != ROOT and not clean.startswith(ROOT + "/"):
        raise ToolError(f"Path {path} would escape /memories directory")
    return clean


class MemoryFiles:
    """The memory tool's commands over a :class:`MemoryBackend`, in one namespace."""

    def __init__(
        self, backend: MemoryBackend, namespace: str, *, visibility: Visibility = Visibility.PRIVATE, search_k: int = 8
    ) -> None:
        self.backend, self.namespace, self.visibility, self.search_k = backend, namespace, visibility, search_k

    # --- lookups --------------------------------------------------------------------------------
    async def _files(self, prefix: str = ROOT) -> dict[str, Memory]:
        found = await self.backend.list_memories(
            self.namespace, source_kind=SOURCE_KIND, source_ref_prefix=prefix, include_archived=True
        )
        archived = [m for m in found if m.tier == "cold"]
        if archived:  # archived before files were pinned: a file never vanishes, it comes back to the hot tier
            restored = {}
            for m in archived:
                try:
                    restored[m.id] = await self.backend.unarchive(m.id)
                except CabrainError:  # (a reader without write access still sees it, as archived)
                    pass
            found = [restored.get(m.id, m) for m in found]
        return {m.source_ref: m for m in found if m.source_ref}

    async def _file(self, path: str) -> Memory | None:
        return (await self._files(path)).get(path)

    async def _under(self, directory: str) -> dict[str, Memory]:
        return await self._files(directory + "/")

    async def _must_be_file(self, display: str, path: str) -> Memory:
        memory = await self._file(path)
        if memory is not None:
            return memory
        if path == ROOT or await self._under(path):
            raise ToolError(f"The path {display} is not a file.")
        raise ToolError(f"The path {display} does not exist. Please provide a valid path.")

    # --- commands -------------------------------------------------------------------------------
    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        if command.path.startswith(SEARCH_DIR + "/"):
            return await self._search(command.path[len(SEARCH_DIR) + 1 :])
        path = normalise(command.path)
        memory = None if path == ROOT else await self._file(path)
        if memory is not None:
            await self.backend.touch([memory.id])  # a file looked at is a file in use: it does not fade
            return self._render_file(command, memory.content)
        files = await self._files() if path == ROOT else await self._under(path)
        if path != ROOT and not files:
            raise ToolError(f"The path {command.path} does not exist. Please provide a valid path.")
        return self._render_dir(command.path, path, files)

    def _render_file(self, command: BetaMemoryTool20250818ViewCommand, content: str) -> str:
        lines = content.split("\n")
        start, shown = 1, lines
        if command.view_range and len(command.view_range) == 2:
            first = max(1, command.view_range[0]) - 1
            last = len(lines) if command.view_range[1] == -1 else command.view_range[1]
            shown, start = lines[first:last], first + 1
        numbered = [f"{str(i + start).rjust(LINE_NUMBER_WIDTH)}\t{line}" for i, line in enumerate(shown)]
        return f"Here's the content of {command.path} with line numbers:\n" + "\n".join(numbered)

    def _render_dir(self, shown_path: str, path: str, files: dict[str, Memory]) -> str:
        entries: dict[str, int] = {}  # relative entry -> size; directories end with '/'
        total = 0
        for file_path, memory in files.items():
            parts = file_path[len(path) + 1 :].split("/")
            size = len(memory.content.encode("utf-8"))
            total += size
            if any(p.startswith(".") for p in parts):
                continue
            for depth in range(1, min(len(parts), 2) + 1):  # up to 2 levels deep, as the reference
                is_dir = depth < len(parts)
                key = "/".join(parts[:depth]) + ("/" if is_dir else "")
                entries[key] = entries.get(key, 0) + size
        header = f"Here're the files and directories up to 2 levels deep in {shown_path}, excluding hidden items:"
        lines = [f"{_size(total)}\t{shown_path}"]
        lines += [f"{_size(size)}\t{shown_path}/{entry}" for entry, size in sorted(entries.items())]
        return f"{header}\n" + "\n".join(lines)

    async def _search(self, query: str) -> str:
        query = query.strip().replace("/", " ")
        if not query:
            raise ToolError(f"Give a search query after {SEARCH_DIR}/, e.g. {SEARCH_DIR}/deploy checklist")
        result = await self.backend.recall(RecallQuery(query, self.namespace, k=self.search_k))
        if not result.hits:
            return f"No memories match '{query}' in {self.namespace}."
        lines = [f"Memories most relevant to '{query}' in {self.namespace} (best first):"]
        for i, hit in enumerate(result.hits, 1):
            m = hit.memory
            source = m.source_ref or m.source_kind or "-"
            lines.append(
                f"{i}. [{hit.score:.3f}] {m.content}\n"
                f"   id {m.id} | from {source} | by {m.owner_agent_id} | {m.created_at.isoformat()}"
            )
        return "\n".join(lines)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        path = normalise(command.path)
        if path == ROOT or await self._file(path) is not None or await self._under(path):
            raise ToolError(f"File {command.path} already exists")  # a directory there too, as the reference
        item = MemoryInput(
            command.file_text,
            self.namespace,
            visibility=self.visibility,
            source_kind=SOURCE_KIND,
            source_ref=path,
            important=True,
            metadata={"memory_tool": "create"},
        )
        await self.backend.retain(item, decide=False)
        return f"File created successfully at: {command.path}"

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        path = normalise(command.path)
        memory = await self._must_be_file(command.path, path)
        content = memory.content
        count = content.count(command.old_str)
        if count == 0:
            raise ToolError(
                f"No replacement was performed, old_str `{command.old_str}` did not appear verbatim in {command.path}."
            )
        if count > 1:
            lines, start = [], 0
            while (pos := content.find(command.old_str, start)) != -1:
                lines.append(content[:pos].count("\n") + 1)
                start = pos + 1
            raise ToolError(
                f"No replacement was performed. Multiple occurrences of old_str `{command.old_str}` in lines: "
                f"{', '.join(map(str, lines))}. Please ensure it is unique"
            )
        changed = content[: content.find(command.old_str)].count("\n")
        new_content = content.replace(command.old_str, command.new_str)
        await self._new_version(memory, new_content, "str_replace")
        new_lines = new_content.split("\n")
        first, last = max(0, changed - 2), min(len(new_lines), changed + 3)
        snippet = [f"{str(n).rjust(LINE_NUMBER_WIDTH)}\t{new_lines[n - 1]}" for n in range(first + 1, last + 1)]
        return "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n" + (
            "\n".join(snippet)
        )

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        path = normalise(command.path)
        memory = await self._must_be_file(command.path, path)
        lines = memory.content.split("\n")
        if lines[-1] == "":
            lines.pop()
        if command.insert_line < 0 or command.insert_line > len(lines):
            raise ToolError(
                f"Invalid `insert_line` parameter: {command.insert_line}. "
                f"It should be within the range [0, {len(lines)}]."
            )
        lines.insert(command.insert_line, command.insert_text.rstrip("\n"))
        new_content = "\n".join(lines)
        if not new_content.endswith("\n"):
            new_content += "\n"
        await self._new_version(memory, new_content, "insert")
        return f"The file {command.path} has been edited."

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        path = normalise(command.path)
        if path == ROOT:
            raise ToolError("Cannot delete the /memories directory itself")
        memory = await self._file(path)
        targets = [memory] if memory is not None else list((await self._under(path)).values())
        if not targets:
            raise ToolError(f"The path {command.path} does not exist")
        for m in targets:
            await self.backend.forget(m.id, reason=f"memory tool: delete {command.path}")
        return f"Successfully deleted {command.path}"

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        old, new = normalise(command.old_path), normalise(command.new_path)
        if old == ROOT:
            raise ToolError("Cannot rename the /memories directory itself")
        if new == ROOT or await self._file(new) is not None or await self._under(new):
            raise ToolError(f"The destination {command.new_path} already exists")
        memory = await self._file(old)
        moves = {old: memory} if memory is not None else await self._under(old)
        if not moves:
            raise ToolError(f"The path {command.old_path} does not exist")
        if new.startswith(old + "/"):
            raise ToolError(f"Cannot move {command.old_path} into itself")
        for path, m in moves.items():
            await self.backend.reconsolidate(
                m.id, m.content, reason=f"memory tool: rename to {command.new_path}", source_ref=new + path[len(old) :]
            )
        return f"Successfully renamed {command.old_path} to {command.new_path}"

    async def _new_version(self, memory: Memory, content: str, command: str) -> None:
        await self.backend.reconsolidate(memory.id, content, reason=f"memory tool: {command}")


def _as_tool_error(exc: CabrainError) -> ToolError:
    return ToolError(exc.message + (f" ({exc.hint})" if exc.hint else ""))


class AsyncCabrainMemoryTool(BetaAsyncAbstractMemoryTool):
    """The memory tool for ``AsyncAnthropic().beta.messages.run_tools(tools=[...])``."""

    def __init__(self, files: MemoryFiles, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.files = files

    async def _run(self, coro: Coroutine[Any, Any, str]) -> str:
        try:
            return await coro
        except CabrainError as exc:
            raise _as_tool_error(exc) from exc

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await self._run(self.files.view(command))

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await self._run(self.files.create(command))

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await self._run(self.files.str_replace(command))

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await self._run(self.files.insert(command))

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await self._run(self.files.delete(command))

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await self._run(self.files.rename(command))


# What a memory tool opens: its files, and how to close what they run on.
_Opened = tuple[MemoryFiles, Callable[[], Coroutine[Any, Any, None]]]


class CabrainMemoryTool(BetaAbstractMemoryTool):
    """The memory tool for ``Anthropic().beta.messages.run_tools(tools=[...])``.

    CaBrain is asynchronous; this runs its calls on a private event loop thread. Build it with
    :meth:`connect` (through a service) or :meth:`on_database` (straight on the hot tier), and
    :meth:`close` it when done.
    """

    def __init__(self, files_factory: Callable[[], Coroutine[Any, Any, _Opened]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="cabrain-memory-tool", daemon=True)
        self._thread.start()
        self.files, self._close = self._call(files_factory())

    @classmethod
    def connect(cls, url: str, api_key: str, namespace: str, **kwargs: Any) -> CabrainMemoryTool:
        """Through a running CaBrain service, as the agent of ``api_key``."""

        async def make() -> _Opened:
            from cabrain.client import AsyncClient  # through a service: the database stack never loads

            client = AsyncClient(url, api_key)
            agent = (await client.whoami())["agent_id"]
            return MemoryFiles(HttpBackend(client, agent), namespace), client.close

        return cls(make, **kwargs)

    @classmethod
    def on_database(cls, settings: Settings, api_key: str, namespace: str, **kwargs: Any) -> CabrainMemoryTool:
        """Straight on the hot tier (the embedded default), as the agent of ``api_key``."""

        async def make() -> _Opened:
            from cabrain.brain import Brain  # straight on the database: only this mode loads it

            brain = await Brain.open(settings)
            try:
                agent = (await brain.authenticate(api_key)).agent_id
            except BaseException:
                await brain.close()
                raise
            return MemoryFiles(BrainBackend(brain, agent), namespace), brain.close

        return cls(make, **kwargs)

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _run(self, coro: Coroutine[Any, Any, str]) -> str:
        try:
            return self._call(coro)
        except CabrainError as exc:
            raise _as_tool_error(exc) from exc

    def close(self) -> None:
        if self._loop.is_running():
            self._call(self._close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> CabrainMemoryTool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return self._run(self.files.view(command))

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return self._run(self.files.create(command))

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self._run(self.files.str_replace(command))

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return self._run(self.files.insert(command))

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return self._run(self.files.delete(command))

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return self._run(self.files.rename(command))
