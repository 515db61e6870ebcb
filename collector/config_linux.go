package collector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// readConfigAttr reads one attribute the way the counter reader does (a
// regular file only, no symlink as the last component, no blocking open, at
// most sysfsMaxValue bytes), but opens and closes it each time: the
// configuration is read every DefaultConfigInterval, not every scrape.
// errConfigNotExposed when the file is not there.
func readConfigAttr(path string) ([]byte, error) {
	return readConfigAttrAt(unix.AT_FDCWD, path, path)
}

// readConfigAttrAt is readConfigAttr of name relative to the directory dirfd
// (AT_FDCWD: the working directory); path names the file in errors.
func readConfigAttrAt(dirfd int, name, path string) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		if err == unix.ENOENT {
			return nil, fmt.Errorf("%s: %w", path, errConfigNotExposed)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (mode %#o)", errSysfsNotRegular, st.Mode&unix.S_IFMT)}
	}
	var buf [sysfsMaxValue + 1]byte
	for {
		n, err := unix.Pread(fd, buf[:], 0)
		if err == unix.EINTR {
			continue
		}
		if err == nil && n == len(buf) {
			err = errSysfsTooLong
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		return buf[:n], nil
	}
}

// configDir is an open directory of priority files: the files are opened
// relative to it, which spares the kernel the path walk through the
// netdev's symlink for each of them.
type configDir struct {
	fd   int
	path string
}

// openConfigDir opens dir: errConfigNotExposed when nothing is there, an
// error naming dir for anything else (a file in its place).
func openConfigDir(dir string) (*configDir, error) {
	for {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.ENOENT:
			return nil, fmt.Errorf("%s: %w", dir, errConfigNotExposed)
		case err == unix.ENOTDIR:
			return nil, &os.PathError{Op: "open", Path: dir, Err: errors.New("not a directory")}
		case err != nil:
			return nil, &os.PathError{Op: "open", Path: dir, Err: err}
		}
		return &configDir{fd: fd, path: dir}, nil
	}
}

func (d *configDir) read(name string) ([]byte, error) {
	return readConfigAttrAt(d.fd, name, d.path+"/"+name)
}

func (d *configDir) close() { unix.Close(d.fd) }

// dcbTimeout bounds one DCB netlink round trip: the kernel answers at once
// (the driver reads its cached DCB state or one firmware register), so a
// late answer means something is wrong and the scrape must not wait.
const dcbTimeout = time.Second

// dcbSeq numbers the requests of every socket of the process, so an answer
// is matched to its question.
var dcbSeq atomic.Uint32

// queryDCB asks the kernel for netdev's IEEE DCB settings over a netlink
// socket of its own (once per config read: every DefaultConfigInterval).
// RTM_GETDCB needs no privilege; it sees the netdevs of the collector's
// network namespace (a container needs the host's).
func queryDCB(ctx context.Context, netdev string) (dcbConfig, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		if errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, unix.EPROTONOSUPPORT) {
			return dcbConfig{}, fmt.Errorf("%w: netlink socket: %w", errDCBNotExposed, err)
		}
		return dcbConfig{}, fmt.Errorf("netlink socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return dcbConfig{}, fmt.Errorf("netlink bind: %w", err)
	}
	deadline := time.Now().Add(dcbTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	seq := dcbSeq.Add(1)
	if err := unix.Sendto(fd, encodeDCBGet(netdev, seq), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return dcbConfig{}, fmt.Errorf("RTM_GETDCB send: %w", err)
	}
	buf := make([]byte, 8<<10) // an mlx5 answer with the full DSCP map is under 2 KiB; MSG_TRUNC tells a longer one
	for {
		if err := ctx.Err(); err != nil {
			return dcbConfig{}, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return dcbConfig{}, fmt.Errorf("RTM_GETDCB: no answer within %v", dcbTimeout)
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return dcbConfig{}, fmt.Errorf("netlink SO_RCVTIMEO: %w", err)
		}
		n, from, err := unix.Recvfrom(fd, buf, unix.MSG_TRUNC)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return dcbConfig{}, fmt.Errorf("RTM_GETDCB: no answer within %v", dcbTimeout)
		case err != nil:
			return dcbConfig{}, fmt.Errorf("RTM_GETDCB receive: %w", err)
		case n > len(buf):
			return dcbConfig{}, fmt.Errorf("RTM_GETDCB: answer of %d bytes, more than %d", n, len(buf))
		}
		if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != 0 {
			continue // only the kernel (port id 0) answers
		}
		cfg, done, err := decodeDCBReply(buf[:n], seq)
		if done || err != nil {
			return cfg, err
		}
	}
}
