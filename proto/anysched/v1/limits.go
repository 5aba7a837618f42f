package anyschedv1

// MaxMessageBytes bounds one admin response (and what schedctl accepts):
// a province-scale topology (10,000 servers, 100,000 networks) is about
// 10 MB of YAML. Requests are bounded by grpc.max_request_bytes. It is
// written here, beside the API both ends share, so that schedctl needs
// nothing of the server side (internal/admin/adminapi) to agree on it.
const MaxMessageBytes = 128 << 20
