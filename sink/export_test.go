package sink

// CompareSampleKeys is compareSampleKeys, for the test that holds it to
// the table's sorting key.
var CompareSampleKeys = compareSampleKeys
