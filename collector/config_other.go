//go:build !linux

package collector

import (
	"context"
	"fmt"
)

// readConfigAttr finds nothing where there is no Linux sysfs: unknown.
func readConfigAttr(path string) ([]byte, error) {
	return nil, fmt.Errorf("%s: %w", path, errConfigNotExposed)
}

// configDirExists finds nothing where there is no Linux sysfs.
func configDirExists(dir string) error {
	return fmt.Errorf("%s: %w", dir, errConfigNotExposed)
}

// queryDCB: DCB netlink is Linux's.
func queryDCB(context.Context, string) (dcbConfig, error) {
	return dcbConfig{}, fmt.Errorf("%w: DCB netlink needs Linux", errDCBNotExposed)
}
