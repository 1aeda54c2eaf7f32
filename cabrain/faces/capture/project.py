"""Which project an event belongs to, and so where its memories go: ``CABRAIN_CAPTURE_NAMESPACE``,
else a name derived from the git remote (``github.com/acme/api``) or the directory
(``dir/home/me/api``), which the service binds to the capturing agent. Standard library only (the
hook's path): the remote is read from git's config file, not by running ``git``.
"""

from __future__ import annotations

import contextlib
import os
import re


def _sanitise(name: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._:/@-]+", "-", name).strip("-/.") or "project"
    if not name[0].isalnum():
        name = "p" + name
    return name[:200]


def namespace_from_remote(url: str) -> str:
    """``git@github.com:acme/api.git`` / ``https://user@github.com/acme/api`` -> ``github.com/acme/api``."""
    url = url.strip()
    url = re.sub(r"^[a-z][a-z0-9+.\-]*://", "", url)  # scheme
    url = re.sub(r"^[^@/]*@", "", url)  # user@
    url = re.sub(r"^([^/:]+):(?!\d+/)", r"\1/", url)  # scp-like host:path
    url = re.sub(r"^([^/:]+):\d+/", r"\1/", url)  # host:port/
    url = re.sub(r"\.git/?$", "", url).rstrip("/")
    return _sanitise(url)


def _git_dirs(cwd: str) -> tuple[str, str] | None:
    """(git dir, common dir) of the repository holding ``cwd``: ``.git`` is a directory, or a file
    pointing elsewhere (worktrees, submodules), whose ``commondir`` holds the shared config."""
    here = os.path.abspath(cwd)
    while True:
        dot_git = os.path.join(here, ".git")
        if os.path.isdir(dot_git):
            return dot_git, dot_git
        if os.path.isfile(dot_git):
            with open(dot_git, encoding="utf-8") as f:
                first = f.readline().strip()
            if not first.startswith("gitdir:"):
                return None
            git_dir = os.path.normpath(os.path.join(here, first[len("gitdir:") :].strip()))
            common = os.path.join(git_dir, "commondir")
            if os.path.isfile(common):
                with open(common, encoding="utf-8") as f:
                    return git_dir, os.path.normpath(os.path.join(git_dir, f.read().strip()))
            return git_dir, git_dir
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def origin_url(config_text: str) -> str | None:
    """``remote.origin.url`` from the text of a git config file (None if it has none)."""
    section, url = None, None
    for raw in config_text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            header = re.match(r'\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]', line)
            section = (header.group(1).lower(), header.group(2)) if header else None
            continue
        if section != ("remote", "origin"):
            continue
        key, _, value = line.partition("=")
        if key.strip().lower() == "url":
            value = re.sub(r"\s[#;].*$", "", value.strip())
            url = value.strip().strip('"') or url  # the last one wins, as in git
    return url


def git_remote(cwd: str) -> str | None:
    """The ``origin`` remote of the repository holding ``cwd``, read from its config file (running
    ``git`` would cost every hook event a process start). Files with ``[include]`` go through git."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        dirs = _git_dirs(cwd)
        if dirs is None:
            return None
        with open(os.path.join(dirs[1], "config"), encoding="utf-8") as f:
            text = f.read()
        url = origin_url(text)
        if url or not re.search(r"^\s*\[\s*include", text, re.IGNORECASE | re.MULTILINE):
            return url
        import subprocess  # only for configs with [include]: every other event is spared its import

        with contextlib.suppress(subprocess.SubprocessError):
            found = subprocess.run(
                ["git", "-C", cwd, "config", "--get", "remote.origin.url"],
                capture_output=True,
                text=True,
                timeout=2,
                check=False,
            ).stdout.strip()
            return found or None
    return None


def project_name(cwd: str) -> str:
    """The project's name: its git remote ``origin`` (``github.com/acme/api``), else its directory."""
    remote = git_remote(cwd)
    if remote:
        return namespace_from_remote(remote)
    return _sanitise("dir/" + os.path.realpath(cwd).lstrip("/"))


def capture_target(cwd: str, configured: str | None = None) -> dict[str, str]:
    """Where the service puts this project's memories: ``{"namespace": ...}`` when the operator
    configured one (CABRAIN_CAPTURE_NAMESPACE), else ``{"project": ...}``, which the service binds to
    the capturing agent (its personal ``@<agent>/<project>``), so no other agent can own it first."""
    if configured:
        return {"namespace": configured}
    return {"project": project_name(cwd)}


def target_label(target: dict[str, str]) -> str:
    """The name a target is shown (and planned) by: its namespace, else its project."""
    return target.get("namespace") or target.get("project") or "project"
