package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdclient"
	"github.com/anysched/anysched/internal/etcd/etcdserver"
	"github.com/anysched/anysched/internal/wiring/obs"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap/zapcore"
)

// member is the bench's etcd: one embedded member on loopback (kernel-
// chosen ports, read back), compacting itself as the center's embedded
// member does (by revision, etcdserver.AutoCompaction), with the center's
// housekeeper beside it when the run has one.
type member struct {
	etcd     *embed.Etcd
	endpoint string
}

func startMember(dir string, keepRevisions, quota int64, log *slog.Logger) (*member, error) {
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "etcdload", dir
	u, _ := url.Parse("http://127.0.0.1:0")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*u}, []url.URL{*u}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*u}, []url.URL{*u}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	etcdserver.AutoCompaction(cfg, etcdserver.EmbeddedOptions{KeepRevisions: keepRevisions, QuotaBackendBytes: quota})
	// Stopping logs the listeners' "use of closed network connection" as
	// errors: only fatal ones are worth a line here.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(obs.ZapLogger(log.With("component", "etcd"), zapcore.FatalLevel))
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start etcd in %s: %w", dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd in %s: %w", dir, err)
	case <-time.After(time.Minute):
		e.Close()
		return nil, errors.New("etcd not ready after a minute")
	}
	return &member{etcd: e, endpoint: "http://" + e.Clients[0].Addr().String()}, nil
}

func (m *member) Close() { m.etcd.Close() }

// client is one writer's etcd client, its writes counted by meter (one
// meter per writer, shared by its clients).
func (m *member) client(meter *etcdclient.WriteMeter, log *slog.Logger) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints: []string{m.endpoint}, DialTimeout: 5 * time.Second, DialOptions: meter.DialOptions(),
		// Requests up to etcd's limit: a legacy plan-state part is near it.
		MaxCallSendMsgSize: 2 << 20,
		Logger:             obs.ZapLogger(log.With("component", "etcd-client"), zapcore.ErrorLevel),
	})
}

// dbSample is etcd's Status at one moment.
type dbSample struct {
	At              time.Duration // simulated, since the start
	Revision        int64
	Compacted       int64 // the housekeeper's last compaction (0: none)
	DBSize, DBInUse int64
}

// lateCounter counts the ticks a writer started late and by how much.
type lateCounter struct {
	n     atomic.Int64
	total atomic.Int64 // nanoseconds of simulated time
}

func (l *lateCounter) add(d time.Duration) {
	l.n.Add(1)
	l.total.Add(int64(d))
}

func status(ctx context.Context, cli *clientv3.Client, endpoint string) (dbSample, error) {
	st, err := cli.Status(ctx, endpoint)
	if err != nil {
		return dbSample{}, err
	}
	return dbSample{Revision: st.Header.Revision, DBSize: st.DbSize, DBInUse: st.DbSizeInUse}, nil
}
