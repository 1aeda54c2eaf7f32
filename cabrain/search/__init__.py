"""Recall: tokenizer, keyword (BM25) and vector search, fusion, rerank, expansion."""
