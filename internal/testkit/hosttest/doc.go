// Package hosttest proves, with the installed CLIs and real users on real
// directories, how stores are shared on one host: a store another user
// made is refused, a store the CLIs make is private whatever the umask, a
// deliberate group store (mode 2770) is shared by the users of its group,
// and two real git clones of one project never hand out the same slot. It
// has no code of its own, only tests.
//
// TestMain builds lease, pool and pool-run from this module into a
// directory every user can read. The tests that need a second user run
// as root and use nobody (uid and gid 65534) through the process
// credentials of os/exec; elsewhere they are skipped with a message, and
// under CI=true (as .ci/run runs them) they fail instead.
package hosttest
