// Package docs holds no code: its tests keep the documentation true. They
// check that the configuration keys, schedctl flags, HTTP headers and
// metrics the documents name exist in the code and the other way round
// (docs_test.go), and run the loopback README's commands as written
// (loopback_test.go).
package docs
