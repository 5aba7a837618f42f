package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The viewer-token settings (issuer, audience, lifetime, binding): decoded from the file under
// alloc (center and cities) and http, defaults, and ranges by field path.
func TestTokenSettings(t *testing.T) {
	r := DefaultRegional()
	if r.Alloc.MaxLifetime != 24*time.Hour || r.Alloc.RequireNetwork || len(r.HTTP.StripQueryParams) != 0 {
		t.Fatalf("defaults: %+v, strip %v", r.Alloc.Viewers, r.HTTP.StripQueryParams)
	}
	body := "alloc:\n  token_issuer: iptv-platform\n  token_audience: anysched\n  max_token_lifetime: 12h\n  require_network_binding: true\nhttp:\n  strip_query_params: [sig, uid]\n"
	r.Region, r.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
	if err := LoadFile(write(t, body), &r); err != nil {
		t.Fatal(err)
	}
	a := r.Alloc
	if a.Issuer != "iptv-platform" || a.Audience != "anysched" || a.MaxLifetime != 12*time.Hour || !a.RequireNetwork ||
		!slices.Equal(r.HTTP.StripQueryParams, []string{"sig", "uid"}) {
		t.Fatalf("decoded %+v, strip %v", a.Viewers, r.HTTP.StripQueryParams)
	}
	c := DefaultCenter()
	if err := LoadFile(write(t, "alloc:\n  token_issuer: iptv-platform\n  max_token_lifetime: 1h\n"), &c); err != nil || c.Alloc.Issuer != "iptv-platform" {
		t.Fatalf("center: %v %+v", err, c.Alloc)
	}
	for _, tt := range []struct {
		name string
		edit func(r *Regional)
		want string
	}{
		{"lifetime zero", func(r *Regional) { r.Alloc.MaxLifetime = 0 }, "alloc.max_token_lifetime: 0s is out of range"},
		{"lifetime a year", func(r *Regional) { r.Alloc.MaxLifetime = 365 * 24 * time.Hour }, "alloc.max_token_lifetime:"},
		{"issuer with a newline", func(r *Regional) { r.Alloc.Issuer = "a\nb" }, "alloc.token_issuer:"},
		{"audience padded", func(r *Regional) { r.Alloc.Audience = " anysched" }, "alloc.token_audience:"},
		{"strip an empty name", func(r *Regional) { r.HTTP.StripQueryParams = []string{"sig", ""} }, "http.strip_query_params[1]:"},
		{"strip a pair", func(r *Regional) { r.HTTP.StripQueryParams = []string{"a=b"} }, "http.strip_query_params[0]:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := DefaultRegional()
			r.Region, r.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
			tt.edit(&r)
			if err := r.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}
