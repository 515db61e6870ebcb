package collector

import (
	"fmt"
	"sync"

	"github.com/safchain/ethtool"
)

// EthtoolReader reads `ethtool -S` statistics. It keeps one ethtool socket
// open across scrapes instead of opening one per netdev and scrape.
// It is safe for concurrent use.
type EthtoolReader struct {
	// mu keeps Close from closing the socket under a running ioctl: the fd
	// number could be reused by another file in between.
	mu sync.RWMutex
	et *ethtool.Ethtool
}

// NewEthtoolReader opens the ethtool socket.
func NewEthtoolReader() (*EthtoolReader, error) {
	et, err := ethtool.NewEthtool()
	if err != nil {
		return nil, fmt.Errorf("open ethtool socket: %w", err)
	}
	return &EthtoolReader{et: et}, nil
}

// Stats returns the statistics of netdev with names trimmed
// (schemas.TrimStatName). A missing netdev (ENODEV) or a driver without
// statistics (EOPNOTSUPP) is an error naming the netdev; the errno stays
// reachable with errors.Is.
func (r *EthtoolReader) Stats(netdev string) (map[string]uint64, error) {
	if !validNetdevName(netdev) {
		return nil, fmt.Errorf("ethtool stats of netdev %q: not a valid interface name", netdev)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.et == nil {
		return nil, fmt.Errorf("ethtool stats of netdev %s: %w", netdev, ErrEthtoolClosed)
	}
	raw, err := r.et.Stats(netdev)
	if err != nil {
		return nil, fmt.Errorf("ethtool stats of netdev %s: %w", netdev, err)
	}
	return trimEthtoolStatNames(raw), nil
}

// Close releases the socket. Closing twice is harmless.
func (r *EthtoolReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.et != nil {
		r.et.Close()
		r.et = nil
	}
	return nil
}
