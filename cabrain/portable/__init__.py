"""Moving a brain in and out: portable exports, importing them and other tools' memories (issue 21)."""
