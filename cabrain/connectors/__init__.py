"""Connectors: pull knowledge from where a team keeps it into a namespace (see :mod:`cabrain.connectors.base`)."""
