package hooktest

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestGateSmokeReadOnlyDatabase pushes while the slot's database answers
// but refuses writes. The smoke phase is there to prove that the slot's
// services answer and take writes, so the gate must stop at it, and the
// summary must say so, before the end-to-end tests run on a slot that
// cannot keep their data.
func TestGateSmokeReadOnlyDatabase(t *testing.T) {
	r := newRepo(t, styleGit)
	// The gate connects as a role whose transactions are read-only by
	// default, except in the admin database, where the provisioner drops
	// and creates the slot's database on every grant (both are refused in
	// a read-only transaction). The fresh slot database takes the role's
	// default. Superuser, to drop the databases earlier tests left.
	role := fmt.Sprintf("hooktest_readonly_%d", os.Getpid())
	if out, err := r.svc.psql(t, "postgres", fmt.Sprintf("CREATE ROLE %[1]s LOGIN SUPERUSER; "+
		"ALTER ROLE %[1]s SET default_transaction_read_only = on; "+
		"ALTER ROLE %[1]s IN DATABASE postgres SET default_transaction_read_only = off", role)); err != nil {
		t.Fatalf("creating a read-only role: %v %s", err, out)
	}
	t.Cleanup(func() {
		// The role owns the slot databases it created; the next grant
		// creates them again.
		for _, s := range r.pool.Slots {
			if out, err := r.svc.psql(t, "postgres", `DROP DATABASE IF EXISTS "`+s.DB+`" WITH (FORCE)`); err != nil {
				t.Errorf("dropping %s: %v %s", s.DB, err, out)
			}
		}
		if out, err := r.svc.psql(t, "postgres", "DROP ROLE "+role); err != nil {
			t.Errorf("dropping role %s: %v %s", role, err, out)
		}
	})

	before := r.remoteRef("main")
	r.commit(r.main)
	m := r.markers()
	res := r.push(r.main, []string{"HOOKTEST_MARKERS=" + m, "PGUSER=" + role}, "origin", "main")
	out := res.output()
	if res.err == nil {
		t.Fatalf("git push succeeded though the slot's database refused the smoke phase's writes:\n%s", out)
	}
	if !strings.Contains(out, "cannot execute CREATE TABLE in a read-only transaction") {
		t.Errorf("the output does not show the database refusing the write:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^\s*smoke\s+failed \(exit [1-9][0-9]*\)`).MatchString(out) {
		t.Errorf("the gate's summary does not show smoke failing with a non-zero exit:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^\s*e2e\s+skipped\b`).MatchString(out) {
		t.Errorf("the gate's summary does not show e2e skipped:\n%s", out)
	}
	if !regexp.MustCompile(`pool-run: held slot \d+ of pool e2e for [^;]+; failed with exit [1-9][0-9]*\n`).MatchString(out) {
		t.Errorf("pool-run's closing line does not give a failure with a non-zero exit:\n%s", out)
	}
	if runs := readRuns(t, m); len(runs) != 0 {
		t.Errorf("the e2e phase ran %d times after smoke failed", len(runs))
	}
	if got := r.remoteRef("main"); got != before {
		t.Errorf("remote main moved to %s past a failing gate (was %s)", got, before)
	}
	t.Logf("push blocked at smoke: %s", res.took.Round(time.Millisecond))
	r.assertFree()
}
