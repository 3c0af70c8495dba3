module github.com/durable-lease/durable-lease

go 1.26.0

require (
	github.com/alecthomas/kong v1.17.0
	github.com/creack/pty v1.1.24
	github.com/fsnotify/fsnotify v1.10.1
	github.com/goccy/go-yaml v1.19.2
	github.com/rogpeppe/go-internal v1.16.0
	golang.org/x/sys v0.50.0
	golang.org/x/term v0.45.0
	mvdan.cc/sh/v3 v3.14.1
)

require golang.org/x/tools v0.38.0 // indirect
