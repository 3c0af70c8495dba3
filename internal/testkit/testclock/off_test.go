//go:build !dltestclock

package testclock

import "testing"

func TestFromEnvInAReleaseBuild(t *testing.T) {
	for _, v := range []string{"1700000000000", "yesterday"} {
		t.Setenv(EnvVar, v)
		if c, err := FromEnv(); c != nil || err != nil {
			t.Errorf("FromEnv with %s=%s = %v, %v; a release build must ignore it", EnvVar, v, c, err)
		}
		if opts, err := StoreOptions(); len(opts) != 0 || err != nil {
			t.Errorf("StoreOptions with %s=%s = %d options, %v; want none", EnvVar, v, len(opts), err)
		}
	}
}
