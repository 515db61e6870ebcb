package main

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/prometheus/procfs"
)

// childAttr makes a child die with the benchmark: an interrupted or
// crashed run leaves no nats-server or role behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// renice sets the nice value of every thread of process pid (setpriority
// on a pid reaches one thread on Linux; threads made later inherit their
// maker's) and returns a function that sets them back to what the process's
// main thread had. The threads and their nice values come from /proc
// through procfs, as the stages' CPU and memory do.
func renice(pid, nice int) (restore func(), err error) {
	main, err := procfs.NewProc(pid)
	if err != nil {
		return nil, err
	}
	st, err := main.Stat()
	if err != nil {
		return nil, fmt.Errorf("nice of pid %d: %w", pid, err)
	}
	set := func(n int) error {
		threads, err := procfs.AllThreads(pid)
		if err != nil {
			return err
		}
		var errs []error
		for _, t := range threads {
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, t.PID, n); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("thread %d: %w", t.PID, err))
			}
		}
		return errors.Join(errs...)
	}
	if err := set(nice); err != nil {
		return nil, fmt.Errorf("renice pid %d to %d: %w", pid, nice, err)
	}
	return func() { _ = set(st.Nice) }, nil
}
