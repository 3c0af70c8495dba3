package cgroup

import "testing"

func TestMountPoint(t *testing.T) {
	hybrid := "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n" +
		"35 31 0:30 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n"
	pure := "30 25 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
	bind := "50 25 0:26 /user.slice /mnt/x rw - cgroup2 cgroup2 rw\n" + pure
	spaced := "30 25 0:26 / /mnt/cg\\040v2 rw - cgroup2 none rw\n"
	for _, tt := range []struct{ in, want string }{
		{hybrid, "/sys/fs/cgroup/unified"}, {pure, "/sys/fs/cgroup"}, {bind, "/sys/fs/cgroup"}, {spaced, "/mnt/cg v2"},
	} {
		got, err := mountPoint([]byte(tt.in))
		if err != nil || got != tt.want {
			t.Errorf("mountPoint(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if _, err := mountPoint([]byte("35 31 0:30 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n")); err == nil {
		t.Error("a v1 hierarchy alone was taken for v2")
	}
}

func TestOwnPath(t *testing.T) {
	got, err := ownPath([]byte("9:name=systemd:/\n8:pids:/\n0::/user.slice/user-1000.slice/session-2.scope\n"))
	if err != nil || got != "/user.slice/user-1000.slice/session-2.scope" {
		t.Errorf("ownPath = %q, %v", got, err)
	}
	if _, err := ownPath([]byte("8:pids:/\n")); err == nil {
		t.Error("a v1-only cgroup file gave a v2 path")
	}
}

func TestParseEvents(t *testing.T) {
	p, f, err := parseEvents([]byte("populated 1\nfrozen 0\n"))
	if err != nil || !p || f {
		t.Errorf("parseEvents = %v %v %v", p, f, err)
	}
	if _, _, err := parseEvents([]byte("frozen 1\n")); err == nil {
		t.Error("cgroup.events without populated was accepted")
	}
}
