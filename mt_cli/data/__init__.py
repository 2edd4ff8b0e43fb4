"""Data: text read strictly, where pairs come from, SentencePiece, token ids, batches and the cache.

Nothing here imports torch but `collate.py`, so that the processes that tokenize a corpus start
light."""
