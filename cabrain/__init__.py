"""CaBrain: a self-hosted memory organ that many AI agents share.

The library is importable without Ray. Entry points (the CLI, Serve deployments, Ray jobs, tests)
build one :class:`cabrain.settings.Settings` and pass it down; nothing reads the environment on import.
"""

__version__ = "0.1.0"
