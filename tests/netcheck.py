"""What a running CaBrain exposes: the TCP sockets its processes listen on, and whether Ray's job
endpoints refuse a caller without the cluster's token."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import httpx
import psutil


@dataclass(frozen=True)
class Listener:
    ip: str
    port: int
    pid: int
    name: str

    def __str__(self) -> str:
        return f"{self.ip}:{self.port} ({self.name}, pid {self.pid})"


def process_tree(*roots: int) -> set[int]:
    pids = set()
    for root in roots:
        try:
            proc = psutil.Process(root)
            pids |= {proc.pid} | {c.pid for c in proc.children(recursive=True)}
        except psutil.NoSuchProcess:
            continue
    return pids


def postgres_of(data_dir: str) -> set[int]:
    """The processes of the PostgreSQL server running on ``data_dir`` (it daemonises: not a child)."""
    found = set()
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info["name"] == "postgres" and data_dir in " ".join(proc.info["cmdline"] or []):
            found |= process_tree(proc.pid)
    return found


def listeners(pids: set[int]) -> list[Listener]:
    """Every TCP (v4 and v6) socket in LISTEN state that one of ``pids`` holds."""
    out = []
    for conn in psutil.net_connections(kind="inet"):
        if conn.status == psutil.CONN_LISTEN and conn.pid in pids:
            try:
                name = psutil.Process(conn.pid).name()
            except psutil.NoSuchProcess:
                continue
            out.append(Listener(conn.laddr.ip, conn.laddr.port, conn.pid, name))
    return sorted(out, key=lambda listener: (listener.name, listener.port))


def is_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def exposed(found: list[Listener]) -> list[str]:
    """The listeners that are reachable from another machine (not on a loopback address)."""
    return [str(listener) for listener in found if not is_loopback(listener.ip)]


def job_submission_statuses(found: list[Listener], token: str | None) -> dict[str, int]:
    """POST a harmless job to every HTTP port of Ray's dashboard and job agents among ``found``:
    ``{"ip:port": status}`` for the ports that answer HTTP (gRPC ports do not)."""
    statuses = {}
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    for listener in found:
        if "Dashboard" not in listener.name and "dashboard" not in listener.name and "python" not in listener.name:
            continue
        host = f"[{listener.ip}]" if ":" in listener.ip and not listener.ip.startswith("::ffff:") else listener.ip
        host = host.removeprefix("::ffff:")
        for path in ("/api/job_agent/jobs/", "/api/jobs/"):
            try:
                response = httpx.post(
                    f"http://{host}:{listener.port}{path}", json={"entrypoint": "true"}, headers=headers, timeout=3
                )
            except httpx.HTTPError:
                break  # not an HTTP port
            if response.status_code != 404:
                statuses[f"{listener.ip}:{listener.port}{path}"] = response.status_code
    return statuses
