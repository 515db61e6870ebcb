package sink

// SortSampleRows sorts rows as the sink sorts an INSERT's, for the test
// that holds that order to the table's sorting key.
func SortSampleRows(rows []*SampleRow) { new(sampleOrder).sort(rows) }

// ChunkRows is chunkRows, for the test that one INSERT sent in chunks
// lands as one part.
const ChunkRows = chunkRows
