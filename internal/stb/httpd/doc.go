// Package httpd is the STB-facing HTTP redirect front end: every GET or HEAD
// on the Anycast address is answered with a 302 to the edge server the steer
// engine picks (or, asked for JSON, with the decision itself).
//
// One handler core (core.go: Server.decide) validates the request, decides
// and builds the answer; two paths feed it and write its answer out, so
// they cannot drift apart:
//
//   - The fast path (Config.Server "fast", the default; fast.go, evloop.go,
//     session.go, parse.go) accepts on the caller's listener itself (raw
//     accept4 on a duplicate of its descriptor, in Config.AcceptLoops
//     goroutines) and answers a new connection's first read right there,
//     on the bare descriptor: a connection per request costs accept4, read,
//     write and close, nothing more. A connection that stays open joins
//     one of the event loops (evloop.go: one per accept loop, dealt
//     connections in turn; an epoll set read by one goroutine, one read per
//     request), so the path uses every core GOMAXPROCS gives it with no
//     goroutine per connection. It parses the plain HTTP/1.1 and HTTP/1.0
//     that STBs send straight from its read buffer, answers every complete
//     request a read brought (pipelined ones in order, in one write) and
//     writes the answers as net/http would, byte for byte but for the Date
//     value. It
//     allocates nothing per answer on the redirect path: host and path,
//     which the access log keeps, are copied into shared 16 KiB chunks; an
//     idle connection holds no buffers. It refuses a request body (413,
//     connection closed) and a header block beyond MaxHeaderBytes (431,
//     closed); it keeps the Config timeouts (header, idle, and WriteTimeout
//     once a write would block), the connection cap and its metrics.
//   - net/http (nethttp.go: ServeHTTP, the Handler). It serves everything
//     the fast path does not pay for: a connection whose next request is not
//     in the plain form (absolute-form or non-ASCII targets, bare LF line
//     ends, obs-fold, Expect, Transfer-Encoding, several Content-Length or
//     Host headers, HTTP/2 prefaces, garbage) is handed, with the bytes
//     already read, to a net/http server with the same handler and limits,
//     so such requests get exactly net/http's answer; Config.Server
//     "net/http" serves every connection so; and a TLS listener serves the
//     same core through Handler.
//
// The two differ only where documented: Date; the 431 limit (net/http
// allows MaxHeaderBytes plus 4 KiB of read buffer); a connection handed to
// net/http stays with it. FuzzDifferential holds them to the same status,
// Location, body and headers for any request bytes (below that band).
//
// The handler does no I/O besides the answer itself and keeps nothing
// between requests, so one scheduler can absorb a whole city's
// channel-change storm.
package httpd
