//go:build !linux

package collector

import "fmt"

// EthtoolReader reads nothing where there is no ethtool ioctl.
type EthtoolReader struct{}

// NewEthtoolReader fails with ErrEthtoolUnsupported.
func NewEthtoolReader() (*EthtoolReader, error) {
	return nil, fmt.Errorf("open ethtool socket: %w", ErrEthtoolUnsupported)
}

// Stats fails with ErrEthtoolUnsupported.
func (r *EthtoolReader) Stats(netdev string) (map[string]uint64, error) {
	return nil, fmt.Errorf("ethtool stats of netdev %s: %w", netdev, ErrEthtoolUnsupported)
}

// Close does nothing.
func (r *EthtoolReader) Close() error { return nil }
