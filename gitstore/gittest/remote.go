package gittest

import (
	"path/filepath"
	"testing"
)

// Remote is a new bare repository served by git daemon or by smart HTTP,
// for the fault tests that take the server down and bring it up again on
// the same port.
type Remote struct {
	Dir    string // the bare repository
	URL    string // its store URL: git+git://… or git+http://…
	Daemon *DaemonServer
	HTTP   *HTTPServer // one of the two is set
}

// Serve serves a new bare repository over smart HTTP if http, else with
// git daemon, until the test ends.
func Serve(t *testing.T, http bool) *Remote {
	dir := BareRepo(t)
	if http {
		srv := HTTP(t, filepath.Dir(dir))
		return &Remote{Dir: dir, URL: "git+" + srv.URL + "/" + filepath.Base(dir), HTTP: srv}
	}
	d := StartDaemon(t, filepath.Dir(dir))
	return &Remote{Dir: dir, URL: "git+" + d.URL + "/" + filepath.Base(dir), Daemon: d}
}

// Down stops the server; its port stays reserved for [Remote.Up].
func (r *Remote) Down() {
	if r.HTTP != nil {
		r.HTTP.Down()
	} else {
		r.Daemon.Down()
	}
}

// Up serves the repository again on the same port; a failure fails t.
func (r *Remote) Up(t testing.TB) {
	t.Helper()
	var err error
	if r.HTTP != nil {
		err = r.HTTP.Up()
	} else {
		err = r.Daemon.Up()
	}
	if err != nil {
		t.Error(err)
	}
}
