//go:build !linux

package main

import "syscall"

// childAttr: only Linux can tie a child's life to its parent's.
func childAttr() *syscall.SysProcAttr { return nil }

// renice: only Linux is measured; elsewhere the priorities stay.
func renice(pid, nice int) (restore func(), err error) { return func() {}, nil }
