package etcdtest

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startBinary starts m as a process of the etcd executable bin, with the
// embedded members' flags. A member restarted over its data directory
// rejoins as it was: etcd ignores the initial-cluster flags then.
func startBinary(t testing.TB, bin string, m *Member, initial, token string, tlsFiles *TLSFiles, timing Timing) (running, error) {
	client := "http://" + m.Endpoint
	var tlsFlags []string
	if tlsFiles != nil {
		client = "https://" + m.Endpoint
		tlsFlags = []string{"--cert-file", tlsFiles.ServerCert, "--key-file", tlsFiles.ServerKey,
			"--trusted-ca-file", tlsFiles.CACert, "--client-cert-auth"}
	}
	cmd := exec.Command(bin, append(tlsFlags,
		"--name", m.Name, "--data-dir", m.dir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", m.peerURL, "--initial-advertise-peer-urls", m.peerURL,
		"--initial-cluster", initial, "--initial-cluster-token", token,
		"--initial-cluster-state", "new",
		"--heartbeat-interval", fmt.Sprint(timing.TickMs), "--election-timeout", fmt.Sprint(timing.ElectionMs),
		"--bcrypt-cost", fmt.Sprint(BcryptCost),
		"--logger", "zap", "--log-level", "error", "--log-outputs", "stderr")...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return running{}, err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	ready := make(chan struct{})
	go func() {
		// Ready once the client port answers; the leader wait follows.
		for {
			select {
			case <-exited:
				t.Logf("etcdtest: %s exited: %s", m.Name, out.String())
				return
			case <-time.After(20 * time.Millisecond):
			}
			if c, err := dialTimeout(m.Endpoint); err == nil {
				c.Close()
				close(ready)
				return
			}
		}
	}()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	return running{stop: stop, ready: ready, proc: cmd.Process}, nil
}
