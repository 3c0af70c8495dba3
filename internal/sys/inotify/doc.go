// Package inotify decodes what a read(2) of a Linux inotify descriptor
// returns, for the directory store's wake-ups (dirstore's watch of a
// lease's record, dirpool's of a pool's queue and slots). Elsewhere it is
// empty: those stores poll.
package inotify
