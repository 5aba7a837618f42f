package app_test

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestCentersKeepEtcdHouse: a center keeps its embedded etcd's house and
// schedctl status shows the store against its quota; a second center on
// the same etcd only watches (the smaller instance id leads).
func TestCentersKeepEtcdHouse(t *testing.T) {
	cc := centerConfig(t)
	runCenter(t, &cc)
	other := centerConfig(t)
	other.InstanceID = "center-b"
	other.Etcd.Endpoints = []string{"http://" + cc.Etcd.Embedded.ClientListen}
	other.Snapshot.CacheFile = filepath.Join(t.TempDir(), "b.cache")
	runCenter(t, &other)
	for _, c := range []struct {
		server, want string
	}{{cc.GRPC.Listen, "(this center keeps house); no alarm"}, {other.GRPC.Listen, "(another center keeps house); no alarm"}} {
		waitUp(t, "etcd in "+c.server+"'s status", func() bool {
			out, err := schedctl(t, c.server, "status")
			return err == nil && strings.Contains(out, c.want) && strings.Contains(out, "ETCD_MEMBER") && strings.Contains(out, "\ncenter (leader)")
		})
	}
	resp, err := http.Get("http://" + cc.Admin.Listen + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, m := range []string{"anysched_etcd_db_size_bytes{member=\"center\"}", "anysched_etcd_quota_bytes{member=\"center\"} 2.147483648e+09",
		"anysched_etcd_alarm_active_bool{alarm=\"NOSPACE\"} 0", "anysched_etcd_housekeeper_leading_bool 1"} {
		if !strings.Contains(string(body), m) {
			t.Errorf("the center's /metrics lack %s", m)
		}
	}
}
