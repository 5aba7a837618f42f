package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/anysched/anysched/internal/testbed/lab"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// labFile is the small YAML a lab can be described with (lab up --file F):
//
//	cities: [hefei, wuhu, bengbu]   # 1 to 16 of the sample province
//	standby: [hefei]                # cities with a standby scheduler too
//	edges: true                     # media edges and embedded checkers
//	edge: lab                       # what runs an edge: lab (bin/lab edge) or nginx
//	ospf: false                     # announce.mode ospf instead of bgp
//	etcd_cluster: 3                 # etcd members: 1 (the center's embedded etcd) or 3
//	qoe: true                       # QoE allocation with viewer tokens (default true)
//	dual_stack: true                # IPv6 beside IPv4, IPv4 and IPv6 STBs (default true)
//	prefix: asl                     # namespace name prefix
//	dir: /tmp/anysched-lab
type labFile struct {
	Cities      []string `yaml:"cities"`
	Standby     []string `yaml:"standby"`
	Edges       *bool    `yaml:"edges"`
	Edge        string   `yaml:"edge"`
	OSPF        bool     `yaml:"ospf"`
	EtcdCluster int      `yaml:"etcd_cluster"`
	QoE         *bool    `yaml:"qoe"`
	DualStack   *bool    `yaml:"dual_stack"`
	Prefix      string   `yaml:"prefix"`
	Dir         string   `yaml:"dir"`
}

// readLabFile decodes a lab file strictly and checks it.
func readLabFile(path string) (*labFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f labFile
	if err := yamlstrict.Decode(data, &f); err != nil {
		return nil, fmt.Errorf("%s:\n%w", path, err)
	}
	var errs yamlstrict.Errors
	if len(f.Cities) == 0 || len(f.Cities) > len(allCities) {
		errs.Add("cities", "1 to %d cities", len(allCities))
	}
	for i, c := range f.Cities {
		if !slices.Contains(allCities, c) {
			errs.Add(fmt.Sprintf("cities[%d]", i), "%q is not a city of the sample province", c)
		}
	}
	for i, c := range f.Standby {
		if !slices.Contains(f.Cities, c) {
			errs.Add(fmt.Sprintf("standby[%d]", i), "%q is not one of the lab's cities", c)
		}
	}
	if f.EtcdCluster != 0 && f.EtcdCluster != 1 && f.EtcdCluster != 3 {
		errs.Add("etcd_cluster", "%d: want 1 (the center's embedded etcd) or 3", f.EtcdCluster)
	}
	if f.Edge != "" && f.Edge != lab.EdgeLab && f.Edge != lab.EdgeNginx {
		errs.Add("edge", "%q is not one of %s, %s", f.Edge, lab.EdgeLab, lab.EdgeNginx)
	}
	if f.OSPF && len(f.Standby) > 0 {
		errs.Add("standby", "primary/standby pairs are BGP-only in the lab")
	}
	if err := errs.Err(); err != nil {
		return nil, fmt.Errorf("%s:\n%w", path, err)
	}
	return &f, nil
}
