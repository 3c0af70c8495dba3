package etcdstore

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultElectionTimeout is etcd's default election timeout
// (--election-timeout 1000), which the store assumes of a cluster unless
// the cluster's minimum lease TTL shows a longer one.
const DefaultElectionTimeout = time.Second

// ElectionTimeout is the cluster's election timeout as far as this store
// can tell, and how it knows. The cluster does not report it, but every
// lease it grants lasts at least 1.5 election timeouts, rounded up to
// whole seconds: a grant of one second (revoked at once) answers that
// minimum. A minimum of 2 s or less allows etcd's default, which is then
// assumed; a longer one shows a longer timeout, and the longest it
// allows is taken. The answer is kept for the Backend's life; without
// one (the cluster unreachable) the default is assumed, not kept.
func (b *Backend) ElectionTimeout(ctx context.Context) (time.Duration, string) {
	b.electionMu.Lock()
	defer b.electionMu.Unlock()
	if b.election > 0 {
		return b.election, b.electionWhy
	}
	var minTTL int64
	var id clientv3.LeaseID
	err := b.retrying(ctx, "the cluster's minimum lease TTL", time.Time{}, func(ctx context.Context) error {
		resp, err := b.cli.Grant(ctx, 1)
		if err == nil {
			minTTL, id = resp.TTL, resp.ID
		}
		return err
	})
	if err != nil {
		return DefaultElectionTimeout, "etcd's default, assumed: the cluster did not say its minimum lease TTL"
	}
	b.revoke(ctx, id)
	b.election = DefaultElectionTimeout
	b.electionWhy = fmt.Sprintf("etcd's default, assumed, which the cluster's minimum lease TTL of %ds allows", minTTL)
	if minTTL > 2 {
		b.election = time.Duration(minTTL) * time.Second * 2 / 3
		b.electionWhy = fmt.Sprintf("the longest the cluster's minimum lease TTL of %ds allows", minTTL)
	}
	return b.election, b.electionWhy
}

// RenewalGap implements [lease.RenewalGapper]: a leader election, the
// fault a cluster with quorum goes through when its leader dies, hangs
// or is cut off, leaves a renewal unanswered until a new leader takes
// over, which extends every lease (etcd's lessor promotes with each
// lease's full TTL plus an election timeout): up to twice the election
// timeout (each member waits a random time between one and two election
// timeouts before it campaigns), and one more attempt, since a request
// sent during the election is not answered after it and is sent again.
func (b *Backend) RenewalGap(ctx context.Context) (time.Duration, string) {
	e, why := b.ElectionTimeout(ctx)
	return 2*e + maxAttempt, fmt.Sprintf("a leader election: up to twice the cluster's election timeout, %s (%s), and a request sent again", e, why)
}
