package etcdserver

import "testing"

func TestDialable(t *testing.T) {
	for in, want := range map[string]string{"0.0.0.0:2379": "127.0.0.1:2379", "[::]:2379": "127.0.0.1:2379", ":2379": "127.0.0.1:2379", "10.0.0.2:2379": "10.0.0.2:2379", "127.0.0.1:1": "127.0.0.1:1"} {
		if got := dialable(in); got != want {
			t.Errorf("dialable(%q) = %q, want %q", in, got, want)
		}
	}
}
