"""Text on the ground floor: tokens and normal forms (Arabic and English), sentences and chunks,
dates in words, and the names a text mentions. Pure functions of their input; nothing here reads
the database, the clock or a model."""
