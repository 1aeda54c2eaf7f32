"""Providers behind small Protocols, chosen by settings: embedders, cache, cold store."""
