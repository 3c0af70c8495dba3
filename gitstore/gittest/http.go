package gittest

import (
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// HTTPServer serves repositories over smart HTTP with git http-backend
// (CGI, behind Go's net/http/cgi), receive-pack enabled, on loopback.
// Every reply carries a Date header from the server's clock, which a test
// may set (a server whose clock is not the client's).
type HTTPServer struct {
	URL string // the URL prefix: http://127.0.0.1:PORT

	mu      sync.Mutex
	clock   func() time.Time
	fault   Fault
	addr    string
	handler http.Handler
	srv     *http.Server // nil while down
	stopped bool
}

// Backend is git http-backend serving every repository under base, pushes
// included without authentication (a server for tests and benchmarks, on
// loopback only).
func Backend(base string) (http.Handler, error) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		return nil, err
	}
	return &cgi.Handler{
		Path: gitPath,
		Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + base, "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.receivepack", "GIT_CONFIG_VALUE_0=true"},
	}, nil
}

// HTTP serves the bare repositories under base over smart HTTP until the
// test ends (or Stop).
func HTTP(t *testing.T, base string) *HTTPServer {
	t.Helper()
	NeedGit(t)
	backend, err := Backend(base)
	if err != nil {
		t.Fatal(err)
	}
	s := &HTTPServer{clock: time.Now}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	s.URL = "http://" + s.addr
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		clock, fault := s.clock, s.fault
		s.mu.Unlock()
		status, drop := 0, false
		if fault != nil {
			status, drop = fault(r)
		}
		if status != 0 {
			http.Error(w, http.StatusText(status), status)
			return
		}
		if drop {
			// Serve the request in full, then close the connection
			// without a reply: the client cannot tell what happened.
			backend.ServeHTTP(httptest.NewRecorder(), r)
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
				}
			}
			return
		}
		if clock == nil {
			w.Header()["Date"] = nil // none, as behind a proxy that drops it
		} else {
			w.Header().Set("Date", clock().UTC().Format(http.TimeFormat))
		}
		backend.ServeHTTP(w, r)
	})
	s.serve(l)
	t.Cleanup(s.Stop)
	return s
}

func (s *HTTPServer) serve(l net.Listener) {
	s.srv = &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	go func(srv *http.Server) { _ = srv.Serve(l) }(s.srv)
}

// A Fault decides how the server treats a request: answered with status
// instead (an error: 429, 503) when it is not 0, or served and then left
// without a reply (drop: the connection closes).
type Fault func(r *http.Request) (status int, drop bool)

// SetFault makes f decide every request from now on; nil serves all.
func (s *HTTPServer) SetFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

// SetClock makes now the server's clock, for the Date of every reply;
// nil sends no Date at all.
func (s *HTTPServer) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock = now
}

// Down closes the server and every connection it has, as a server that
// is restarted does: from now on a connection to its address is
// refused, until Up.
func (s *HTTPServer) Down() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		_ = s.srv.Close()
		s.srv = nil
	}
}

// Up serves again on the same address after Down (the restarted server).
// It does nothing while the server is up or after Stop.
func (s *HTTPServer) Up() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil || s.stopped {
		return nil
	}
	l, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("gittest: listen again on %s: %w", s.addr, err)
	}
	s.serve(l)
	return nil
}

// Stop closes the server and every connection it has, for good.
func (s *HTTPServer) Stop() {
	s.Down()
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
}
