package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// childAttr makes a child die with the benchmark: an interrupted or
// crashed run leaves no nats-server or role behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// renice sets the nice value of every thread of process pid (setpriority
// on a pid reaches one thread on Linux; threads made later inherit their
// maker's) and returns a function that sets them back to what the process's
// main thread had.
func renice(pid, nice int) (restore func(), err error) {
	old, err := syscall.Getpriority(syscall.PRIO_PROCESS, pid)
	if err != nil {
		return nil, fmt.Errorf("nice of pid %d: %w", pid, err)
	}
	// The raw syscall returns 20 - nice.
	old = 20 - old
	set := func(n int) error {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return err
		}
		var errs []error
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, n); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("thread %d: %w", tid, err))
			}
		}
		return errors.Join(errs...)
	}
	if err := set(nice); err != nil {
		return nil, fmt.Errorf("renice pid %d to %d: %w", pid, nice, err)
	}
	return func() { _ = set(old) }, nil
}
