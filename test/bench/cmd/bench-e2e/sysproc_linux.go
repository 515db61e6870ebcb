package main

import "syscall"

// childAttr makes a child die with the benchmark: an interrupted or
// crashed run leaves no nats-server or role behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
