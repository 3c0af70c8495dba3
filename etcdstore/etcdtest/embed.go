package etcdtest

import (
	"net/url"
	"os"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

var getenv = os.Getenv

// startEmbedded starts m in this process (again from its data directory
// on a restart).
func startEmbedded(m *Member, initial, token string, tlsFiles *TLSFiles, timing Timing) (running, error) {
	cfg := embed.NewConfig()
	cfg.Name = m.Name
	cfg.Dir = m.dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	scheme := "http://"
	if tlsFiles != nil {
		scheme = "https://"
		cfg.ClientTLSInfo = transport.TLSInfo{
			CertFile: tlsFiles.ServerCert, KeyFile: tlsFiles.ServerKey,
			TrustedCAFile: tlsFiles.CACert, ClientCertAuth: true,
		}
	}
	client, peer := mustURL(scheme+m.Endpoint), mustURL(m.peerURL)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = initial
	cfg.InitialClusterToken = token
	cfg.TickMs, cfg.ElectionMs = uint(timing.TickMs), uint(timing.ElectionMs)
	cfg.BcryptCost = BcryptCost
	cfg.UnsafeNoFsync = true // test data: durability buys nothing
	cfg.ListenMetricsUrls = nil
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return running{}, err
	}
	kill := func() {
		// A crash, as far as the other members can tell: no leadership
		// transfer first (Close alone hands leadership over gracefully).
		e.Server.HardStop()
		e.Close()
	}
	return running{stop: kill, ready: e.Server.ReadyNotify()}, nil
}
