//go:build !linux

package collector

import (
	"context"
	"fmt"
)

// sysfsFiles has nothing to keep where there is no sysfs.
type sysfsFiles struct{}

func newSysfsFiles() *sysfsFiles { return &sysfsFiles{} }

func (*sysfsFiles) close() {}

// Read fails with ErrSysfsUnsupported: RDMA port counters are read from
// Linux's sysfs only.
func (r *SysfsReader) Read(ctx context.Context) (*SysfsScrape, error) {
	return nil, fmt.Errorf("read %s: %w", r.classDir, ErrSysfsUnsupported)
}
