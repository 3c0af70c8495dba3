//go:build ignore

// Run it with `go run bench/githttp/main.go DIR` (bench/git.sh builds it):
// the build tag keeps this helper out of `go install ./...`, which
// pre-commit runs to install the repository's commands.

// Command githttp serves the bare repositories under a directory over
// smart HTTP on loopback (git http-backend behind net/http/cgi, pushes
// allowed without authentication), for bench/git.sh. It prints its URL
// prefix on stdout and serves until it is killed.
//
//	go run bench/githttp/main.go DIR
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/durable-lease/durable-lease/gitstore/gittest"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: githttp DIR")
		os.Exit(2)
	}
	h, err := gittest.Backend(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "githttp:", err)
		os.Exit(1)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "githttp:", err)
		os.Exit(1)
	}
	fmt.Printf("http://%s\n", l.Addr())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.Serve(l); err != nil {
		fmt.Fprintln(os.Stderr, "githttp:", err)
		os.Exit(1)
	}
}
