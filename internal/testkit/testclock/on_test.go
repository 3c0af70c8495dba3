//go:build dltestclock

package testclock

import (
	"testing"
	"time"
)

func TestFromEnvInATestBuild(t *testing.T) {
	t.Setenv(EnvVar, "")
	if c, err := FromEnv(); c != nil || err != nil {
		t.Fatalf("FromEnv with %s empty = %v, %v; want no clock", EnvVar, c, err)
	}
	t.Setenv(EnvVar, "1700000000000")
	c, err := FromEnv()
	if err != nil || c == nil {
		t.Fatalf("FromEnv = %v, %v", c, err)
	}
	if got, want := c.Now(), time.UnixMilli(1700000000000); !got.Equal(want) {
		t.Errorf("Now = %v, want %v", got, want)
	}
	t.Setenv(EnvVar, "yesterday")
	if _, err := FromEnv(); err == nil {
		t.Error("FromEnv accepted a value that is not an instant")
	}
}
