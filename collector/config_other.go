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

type configDir struct{}

// openConfigDir finds nothing where there is no Linux sysfs.
func openConfigDir(dir string) (*configDir, error) {
	return nil, fmt.Errorf("%s: %w", dir, errConfigNotExposed)
}

func (*configDir) read(name string) ([]byte, error) {
	return nil, fmt.Errorf("%s: %w", name, errConfigNotExposed)
}

func (*configDir) close() {}

// queryDCB: DCB netlink is Linux's.
func queryDCB(context.Context, string) (dcbConfig, error) {
	return dcbConfig{}, fmt.Errorf("%w: DCB netlink needs Linux", errDCBNotExposed)
}
