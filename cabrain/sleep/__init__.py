"""The sleep cycle (SPEC §4.3, Phase 2): offline work that makes the brain smarter, not just bigger.

Steps, each over one namespace (and, for decay and demote, one month partition), idempotent and
safe to re-run after a crash: consolidate (:mod:`cabrain.sleep.steps`), dedup, reconsolidate,
decay (:mod:`cabrain.sleep.decay`), demote to the Iceberg cold tier (:mod:`cabrain.sleep.demote`,
:mod:`cabrain.store.cold`), maintain (:mod:`cabrain.sleep.maintain`). :mod:`cabrain.sleep.cycle`
plans a run and fans the steps out as Ray tasks over the cluster. Never on the recall path.
"""
