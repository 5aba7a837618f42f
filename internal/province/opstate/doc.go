// Package opstate is the operator's state of the province in etcd, apart
// from the topology: drains (servers, nodes or regions that take no new
// STBs), failover drills (a scheduler's route withdrawn for a while) and the
// in-node balance policy document. It writes them (for the admin API) and
// follows them (a Watcher in every scheduler, fed by internal/etcd/etcdfeed); their
// keys are in internal/etcd/keyspace with every other key of the province.
//
// Health verdicts stay in internal/province/health: they are measured, not decided.
// Drains take servers out of the routing engine; drills reach the route
// announcer directly, without touching the engine.
package opstate
