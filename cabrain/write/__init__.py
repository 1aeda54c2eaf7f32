"""Retain: the write decision (ADD / UPDATE / INVALIDATE / NOOP), salience, entities."""
