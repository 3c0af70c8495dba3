package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/durable-lease/durable-lease/lease"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// RegistryPrefix starts the keys that register the stores of a cluster
// (docs/PROTOCOL.md §8.9): one key per store, RegistryPrefix followed by
// the store's prefix in lower case, whose value is the prefix as given.
// Every key of a store starts with '/' ([ParseURL] makes every prefix so),
// so no store's key is ever a registration.
const RegistryPrefix = "durable-lease/stores"

// ErrNestedStore reports a store whose prefix lies inside another store's
// prefix on the same cluster, or around one, compared ignoring case (two
// prefixes that differ only in case count as the same). Nested stores
// share keys: one's pruning of its journal or its pool logs, or its
// clean-up of a queue, deletes the other's leases and entries. It matches
// [lease.ErrInvalid], a usage error for the CLIs.
var ErrNestedStore = fmt.Errorf("%w: nested etcd stores", lease.ErrInvalid)

// registry is the registration of one store: its key and the keys a
// conflicting store would have.
type registry struct {
	prefix    string   // the store's prefix, as given
	own       string   // its registration key
	ancestors []string // the registration keys of its proper ancestors, outermost first
	inside    string   // the start of the keys of stores inside it; the range ends at clientv3.GetPrefixRangeEnd(inside)
}

func newRegistry(prefix string) registry {
	norm := strings.ToLower(prefix)
	r := registry{prefix: prefix, own: RegistryPrefix + norm, inside: RegistryPrefix + norm + "/"}
	for i := 1; i < len(norm); i++ {
		if norm[i] == '/' {
			r.ancestors = append(r.ancestors, RegistryPrefix+norm[:i])
		}
	}
	return r
}

// reads are the reads that decide: the store's own registration, each
// ancestor's, and the first of those inside it. judge reads their answers
// in this order.
func (r registry) reads() []*pb.RequestOp {
	get := func(key, end string, limit int64) *pb.RequestOp {
		rr := &pb.RangeRequest{Key: []byte(key), Limit: limit}
		if end != "" {
			rr.RangeEnd = []byte(end)
		}
		return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: rr}}
	}
	ops := []*pb.RequestOp{get(r.own, "", 0)}
	for _, a := range r.ancestors {
		ops = append(ops, get(a, "", 0))
	}
	return append(ops, get(r.inside, clientv3.GetPrefixRangeEnd(r.inside), 1))
}

// registration is the transaction that registers the store: it puts the
// store's key only if neither it, nor an ancestor's, nor one inside it
// exists, all at one revision, so of two nested stores opened at once at
// most one registers. Otherwise it answers [registry.reads].
func (r registry) registration() *pb.TxnRequest {
	absent := func(key string) *pb.Compare {
		return &pb.Compare{Key: []byte(key), Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL,
			TargetUnion: &pb.Compare_CreateRevision{CreateRevision: 0}}
	}
	cmps := []*pb.Compare{absent(r.own)}
	for _, a := range r.ancestors {
		cmps = append(cmps, absent(a))
	}
	// Over a range, the comparison holds when it holds for every key in
	// it: when there is none.
	inside := absent(r.inside)
	inside.RangeEnd = []byte(clientv3.GetPrefixRangeEnd(r.inside))
	cmps = append(cmps, inside)
	put := &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(r.own), Value: []byte(r.prefix)}}}
	return &pb.TxnRequest{Compare: cmps, Success: []*pb.RequestOp{put}, Failure: r.reads()}
}

// judge reads the answers to [registry.reads]: whether the store is
// registered, or the error that refuses it, naming the other store.
func (r registry) judge(where Location, answers []*pb.ResponseOp) (registered bool, err error) {
	if len(answers) != len(r.ancestors)+2 {
		return false, fmt.Errorf("registry read: %d answers to %d reads", len(answers), len(r.ancestors)+2)
	}
	first := func(a *pb.ResponseOp) (string, bool) {
		rr := a.GetResponseRange()
		if rr == nil || len(rr.Kvs) == 0 {
			return "", false
		}
		kv := rr.Kvs[0]
		if p := string(kv.Value); validPrefix(p) {
			return p, true
		}
		return strings.TrimPrefix(string(kv.Key), RegistryPrefix), true
	}
	for i := range r.ancestors {
		if other, ok := first(answers[1+i]); ok {
			return false, r.nested(where, other, "inside")
		}
	}
	if other, ok := first(answers[len(answers)-1]); ok {
		return false, r.nested(where, other, "around")
	}
	other, ok := first(answers[0])
	switch {
	case !ok:
		return false, nil
	case other != r.prefix:
		return false, r.nested(where, other, "same")
	}
	return true, nil
}

// nested is the refusal of the store at where by the store other: how
// says whether where is inside other, around it, or other but for case.
func (r registry) nested(where Location, other, how string) error {
	what, why := "is inside "+other, "nested stores share keys, and one's pruning deletes the other's leases"
	instead := "a prefix outside " + other
	switch how {
	case "around":
		what, instead = "contains "+other, "a prefix that contains no other store's"
	case "same":
		what, why = "differs only in case from "+other, "prefixes are compared ignoring case, so both would be one store"
		instead = other + " as the other store does, or another prefix"
	}
	if how != "same" && !strings.HasPrefix(other+"/", r.prefix+"/") && !strings.HasPrefix(r.prefix+"/", other+"/") {
		what += " (prefixes are compared ignoring case)"
	}
	return fmt.Errorf("%w: store %s refused: its prefix %s, the prefix of another store on this cluster; %s. Use %s; "+
		"if the store %s is no longer used, remove its registration, and only that key: etcdctl del %s",
		ErrNestedStore, where, what, why, instead, other, RegistryPrefix+strings.ToLower(other))
}

// check reads the registry and the store's prefix together (the first
// read of [Backend.probe]), registers the store when it is not yet, and
// refuses it when it nests with another. A user whose permissions do not
// cover the registry opens unchecked (docs/PROTOCOL.md §8.9): checked
// reports whether the check was made.
func (b *Backend) check(ctx context.Context) (checked bool, err error) {
	r := newRegistry(b.loc.Prefix)
	answers, err := b.probe(ctx, r.reads())
	if errors.Is(err, rpctypes.ErrPermissionDenied) {
		// The registry, or the prefix, is not this user's: the prefix
		// alone tells which.
		_, err = b.probe(ctx, nil)
		return false, err
	}
	if err != nil {
		return false, err
	}
	registered, err := r.judge(b.loc, answers)
	if err != nil || registered {
		return err == nil, err
	}
	resp, err := pb.NewKVClient(b.cli.ActiveConnection()).Txn(ctx, r.registration())
	switch {
	case errors.Is(rpctypes.Error(err), rpctypes.ErrPermissionDenied):
		return false, nil // the user may read the registry but not register
	case err != nil:
		return false, rpctypes.Error(err)
	case resp.Succeeded:
		return true, nil
	}
	// Another open registered first: this store (fine), or one it nests
	// with.
	if _, err := r.judge(b.loc, resp.Responses); err != nil {
		return false, err
	}
	return true, nil
}
