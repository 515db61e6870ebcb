package sink

// CompareSampleKeys is compareSampleKeys, for the test that holds it to
// the table's sorting key.
var CompareSampleKeys = compareSampleKeys

// ChunkRows is chunkRows, for the test that one INSERT sent in chunks
// lands as one part.
const ChunkRows = chunkRows
