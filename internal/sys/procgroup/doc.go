// Package procgroup stops process groups and tells whether they still
// have live members: the one place where the project's commands (a pool's
// provision scripts, a gate phase's programs, pool-run's work) are ended
// as a whole rather than program by program.
package procgroup
