-- Archive recall through the cold index ranks a probe's rows by codes (8 or 16 bits a dimension) of
-- their residuals from their centroids (issue 37: a second at ten million cold rows): the index's copy
-- holds each row's codes (its column "code"), and the quantizer they were made with is kept here beside
-- the centroids: dim little-endian float32 lows, then dim steps. NULL: an index built before the codes
-- (its probes read the embeddings).
ALTER TABLE cold_indexes ADD COLUMN quantizer bytea;
