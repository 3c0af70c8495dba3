package pooltop

import (
	"testing"

	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
)

// startEtcd starts a one-member etcd for the test and returns a store URL
// on it.
func startEtcd(t *testing.T) string {
	t.Helper()
	return etcdtest.Start(t).URL("pooltop-test")
}
