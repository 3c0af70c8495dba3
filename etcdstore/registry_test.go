package etcdstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestRegistry: an open registers the store under RegistryPrefix, its
// prefix in lower case, its value the prefix as given; a refused open
// registers nothing and says what to do; a store registered before it had
// a registration (an earlier version's) registers on its next open.
func TestRegistry(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	ctx := context.Background()
	raw := c.Client()
	value := func(key string) string {
		t.Helper()
		resp, err := raw.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 0 {
			return ""
		}
		return string(resp.Kvs[0].Value)
	}
	b, err := openPrefix(t, c, "Reg/Leases")
	if err != nil {
		t.Fatal(err)
	}
	if !b.Checked() {
		t.Error("Checked() = false without authentication")
	}
	if got := value(etcdstore.RegistryPrefix + "/reg/leases"); got != "/Reg/Leases" {
		t.Errorf("registration = %q; want /Reg/Leases", got)
	}
	_, err = openPrefix(t, c, "reg/leases/pool/p")
	if !errors.Is(err, etcdstore.ErrNestedStore) {
		t.Fatalf("nested open = %v; want ErrNestedStore", err)
	}
	for _, want := range []string{"/reg/leases/pool/p", "/Reg/Leases", "inside", "ignoring case", "etcdctl del " + etcdstore.RegistryPrefix + "/reg/leases"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if got := value(etcdstore.RegistryPrefix + "/reg/leases/pool/p"); got != "" {
		t.Errorf("a refused open registered its store: %q", got)
	}
	_, err = openPrefix(t, c, "REG/LEASES")
	if !errors.Is(err, etcdstore.ErrNestedStore) || !strings.Contains(err.Error(), "only in case") {
		t.Errorf("open of the store but for case = %v; want ErrNestedStore, only in case", err)
	}
	_, err = openPrefix(t, c, "Reg")
	if !errors.Is(err, etcdstore.ErrNestedStore) || !strings.Contains(err.Error(), "contains") {
		t.Errorf("open of a prefix around the store = %v; want ErrNestedStore, contains", err)
	}

	// The deepest prefix reads and compares the registrations of its 63
	// ancestors in one transaction.
	deep := "deep" + strings.Repeat("/a", etcdstore.MaxSegments-1)
	if _, err := openPrefix(t, c, deep); err != nil {
		t.Fatalf("open of a prefix of %d segments: %v", etcdstore.MaxSegments, err)
	}
	if _, err := openPrefix(t, c, "deep/a/a"); !errors.Is(err, etcdstore.ErrNestedStore) {
		t.Errorf("open around the deepest store = %v; want ErrNestedStore", err)
	}
	if _, err := openPrefix(t, c, deep); err != nil {
		t.Errorf("second open of the deepest store: %v", err)
	}

	// A store an earlier version used, with no registration, registers
	// when next opened, and then refuses a store nested in it.
	if _, err := raw.Put(ctx, "/legacy/lease/k/record", "{}"); err != nil {
		t.Fatal(err)
	}
	if _, err := openPrefix(t, c, "legacy"); err != nil {
		t.Fatal(err)
	}
	if got := value(etcdstore.RegistryPrefix + "/legacy"); got != "/legacy" {
		t.Errorf("the legacy store's registration = %q; want /legacy", got)
	}
	if _, err := openPrefix(t, c, "legacy/x"); !errors.Is(err, etcdstore.ErrNestedStore) {
		t.Errorf("open inside the legacy store = %v; want ErrNestedStore", err)
	}
	// Removing a registration, as the refusal says, lets the other open.
	if _, err := raw.Delete(ctx, etcdstore.RegistryPrefix+"/legacy"); err != nil {
		t.Fatal(err)
	}
	if _, err := openPrefix(t, c, "legacy/x"); err != nil {
		t.Errorf("open after removing the registration: %v", err)
	}
}

// TestRegistryUnderAuth: a user allowed its prefix only opens its store
// unchecked (it cannot read the registry); a user also allowed to read the
// registry and to write its own registration is checked, and refused a
// nested store.
func TestRegistryUnderAuth(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	ctx := context.Background()
	raw := c.Client()
	const rootPW, narrowPW, checkedPW = "root-Secret-1", "narrow-Secret-2", "checked-Secret-3"
	reg := etcdstore.RegistryPrefix + "/"
	grant := func(role, key, end string, perm clientv3.PermissionType) func() error {
		return func() error { _, err := raw.RoleGrantPermission(ctx, role, key, end, perm); return err }
	}
	steps := []func() error{
		func() error { _, err := raw.RoleAdd(ctx, "root"); return err },
		func() error { _, err := raw.UserAdd(ctx, "root", rootPW); return err },
		func() error { _, err := raw.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := raw.RoleAdd(ctx, "narrow"); return err },
		grant("narrow", "/narrow/", clientv3.GetPrefixRangeEnd("/narrow/"), clientv3.PermissionType(clientv3.PermReadWrite)),
		func() error { _, err := raw.UserAdd(ctx, "narrow", narrowPW); return err },
		func() error { _, err := raw.UserGrantRole(ctx, "narrow", "narrow"); return err },
		func() error { _, err := raw.RoleAdd(ctx, "checked"); return err },
		grant("checked", "/checked/", clientv3.GetPrefixRangeEnd("/checked/"), clientv3.PermissionType(clientv3.PermReadWrite)),
		grant("checked", "/checked/sub/", clientv3.GetPrefixRangeEnd("/checked/sub/"), clientv3.PermissionType(clientv3.PermReadWrite)),
		grant("checked", reg, clientv3.GetPrefixRangeEnd(reg), clientv3.PermissionType(clientv3.PermRead)),
		grant("checked", etcdstore.RegistryPrefix+"/checked", "", clientv3.PermissionType(clientv3.PermWrite)),
		func() error { _, err := raw.UserAdd(ctx, "checked", checkedPW); return err },
		func() error { _, err := raw.UserGrantRole(ctx, "checked", "checked"); return err },
		func() error { _, err := raw.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("auth setup step %d: %v", i, err)
		}
	}
	open := func(prefix, user, pw string) (*etcdstore.Backend, error) {
		// Authentication (bcrypt) takes over a second under -race.
		b, err := etcdstore.NewBackend(ctx, c.URL(prefix), etcdstore.Options{User: user, Password: pw, DialTimeout: 10 * time.Second})
		if err == nil {
			t.Cleanup(func() { b.Close() })
		}
		noSecret(t, err, pw)
		return b, err
	}
	b, err := open("narrow", "narrow", narrowPW)
	if err != nil {
		t.Fatalf("open as a user allowed its prefix only: %v", err)
	}
	if b.Checked() {
		t.Error("Checked() = true for a user who may not read the registry")
	}
	if _, err := acquire(ctx, b, "k", "a", 15); err != nil {
		t.Errorf("acquire unchecked: %v", err)
	}
	if _, err := open("elsewhere", "narrow", narrowPW); err == nil {
		t.Error("open of a prefix the user may not read succeeded")
	}

	b, err = open("checked", "checked", checkedPW)
	if err != nil {
		t.Fatalf("open as a user allowed the registry: %v", err)
	}
	if !b.Checked() {
		t.Error("Checked() = false for a user allowed the registry and its registration")
	}
	// It may not register /checked/sub, but finds it inside /checked.
	if _, err := open("checked/sub", "checked", checkedPW); !errors.Is(err, etcdstore.ErrNestedStore) {
		t.Errorf("open of a nested store = %v; want ErrNestedStore", err)
	}
}
