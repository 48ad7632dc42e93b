module github.com/toolrouter/toolrouter/clients/go

go 1.19

// Built and tested offline against Debian 12's packages in GOPATH mode (scripts/go-test.sh):
// golang-google-grpc-dev 1.33.3, golang-google-protobuf-dev 1.28.1, golang-google-genproto-dev.
// With a module proxy, `go mod tidy` records the same requirements.
