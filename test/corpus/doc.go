// Package corpus replays real NIC counter captures (test/fixtures/nics)
// through rdmawatch's readers: the counter dictionary and widths, the delta
// engine, the derived figures and the sysfs reader. Its tests are the
// record of what real ConnectX ports list and how rdmawatch takes it; the
// package has no code of its own.
package corpus
