// Package schemas holds what the parts of rdmawatch agree on: the msgpack wire
// types, the NATS subject and stream names, the counter semantics of the
// hardware, and the ClickHouse DDL. The collector, processor and sink never
// import each other; they meet here and on the stream.
package schemas
