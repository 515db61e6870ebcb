//go:build chdb

// Package chdblib runs rdmawatch's ClickHouse code on a current ClickHouse
// release without a server: the chDB library (libchdb.so, ClickHouse 26.x
// as a shared library) loaded with dlopen, behind chdb.Conn. Tests only: it
// builds with the chdb tag, so the product binary never links it, and it
// needs the library at run time (`make test-modern` fetches it).
//
// chDB has no network server: statements reach it as text, parameters are
// bound client-side (as clickhouse-go does on the native protocol), rows
// come back in JSONCompactEachRowWithNamesAndTypes and go in through
// INSERT ... FORMAT JSONCompactEachRow. The native protocol itself is what
// this does not test.
package chdblib

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

typedef void *(*connect_fn)(int, char **);
typedef void (*close_fn)(void *);
typedef void *(*query_n_fn)(void *, const char *, size_t, const char *, size_t);
typedef void (*destroy_fn)(void *);
typedef char *(*buffer_fn)(void *);
typedef size_t (*length_fn)(void *);
typedef const char *(*error_fn)(void *);

static connect_fn p_connect;
static close_fn p_close;
static query_n_fn p_query_n;
static destroy_fn p_destroy;
static buffer_fn p_buffer;
static length_fn p_length;
static error_fn p_error;

// load resolves the C API of chdb.h; NULL or what failed.
static const char *load(const char *path) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) return dlerror();
	if (!(p_connect = (connect_fn)dlsym(h, "chdb_connect"))) return "no chdb_connect";
	if (!(p_close = (close_fn)dlsym(h, "chdb_close_conn"))) return "no chdb_close_conn";
	if (!(p_query_n = (query_n_fn)dlsym(h, "chdb_query_n"))) return "no chdb_query_n";
	if (!(p_destroy = (destroy_fn)dlsym(h, "chdb_destroy_query_result"))) return "no chdb_destroy_query_result";
	if (!(p_buffer = (buffer_fn)dlsym(h, "chdb_result_buffer"))) return "no chdb_result_buffer";
	if (!(p_length = (length_fn)dlsym(h, "chdb_result_length"))) return "no chdb_result_length";
	if (!(p_error = (error_fn)dlsym(h, "chdb_result_error"))) return "no chdb_result_error";
	return NULL;
}

// chdb_connect returns a chdb_connection * (a pointer to the handle).
static void *c_connect(int argc, char **argv) { return p_connect(argc, argv); }
static void c_close(void *connp) { p_close(connp); }
static void *c_query(void *connp, const char *q, size_t ql, const char *f, size_t fl) {
	return p_query_n(*(void **)connp, q, ql, f, fl);
}
static void c_destroy(void *r) { p_destroy(r); }
static char *c_buffer(void *r) { return p_buffer(r); }
static size_t c_length(void *r) { return p_length(r); }
static const char *c_error(void *r) { return p_error(r); }
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

var (
	loadOnce sync.Once
	loadErr  error
)

// load opens the library once per process: chDB keeps one engine (and one
// data directory) per process.
func load(path string) error {
	loadOnce.Do(func() {
		cpath := C.CString(path)
		defer C.free(unsafe.Pointer(cpath))
		if msg := C.load(cpath); msg != nil {
			loadErr = fmt.Errorf("chdb library %s: %s", path, C.GoString(msg))
		}
	})
	return loadErr
}

// session is one chdb_connect handle; the library runs one statement at a
// time per connection, so mu serialises them.
type session struct {
	mu sync.Mutex
	p  unsafe.Pointer
}

func connect(dataDir string) (*session, error) {
	args := []string{"clickhouse", "--path=" + dataDir}
	argv := make([]*C.char, len(args))
	for i, a := range args {
		argv[i] = C.CString(a)
		defer C.free(unsafe.Pointer(argv[i]))
	}
	p := C.c_connect(C.int(len(args)), &argv[0])
	if p == nil {
		return nil, fmt.Errorf("chdb: connect to data directory %s failed", dataDir)
	}
	return &session{p: p}, nil
}

// run executes one statement and returns its output in format; a failed
// statement's error is the server's text ("Code: 60. DB::Exception: ...").
func (s *session) run(query, format string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return nil, fmt.Errorf("chdb: connection closed")
	}
	q := C.CString(query)
	defer C.free(unsafe.Pointer(q))
	f := C.CString(format)
	defer C.free(unsafe.Pointer(f))
	r := C.c_query(s.p, q, C.size_t(len(query)), f, C.size_t(len(format)))
	if r == nil {
		return nil, fmt.Errorf("chdb: no result")
	}
	defer C.c_destroy(r)
	if msg := C.c_error(r); msg != nil {
		return nil, serverError(C.GoString(msg))
	}
	n := C.c_length(r)
	if n == 0 {
		return nil, nil
	}
	return C.GoBytes(unsafe.Pointer(C.c_buffer(r)), C.int(n)), nil
}

func (s *session) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		C.c_close(s.p)
		s.p = nil
	}
}
