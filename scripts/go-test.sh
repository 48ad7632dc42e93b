#!/usr/bin/env bash
# Builds and tests clients/go offline with Debian's Go and gRPC packages (no module proxy):
# GOPATH mode over /usr/share/gocode, the repo linked in as github.com/toolrouter/toolrouter.
#   apt-get install golang-go golang-google-grpc-dev golang-google-protobuf-dev golang-google-genproto-dev
set -euo pipefail
cd "$(dirname "$0")/.."
gopath=$(mktemp -d)
trap 'rm -rf "$gopath"' EXIT
mkdir -p "$gopath/src/github.com/toolrouter"
ln -s "$PWD" "$gopath/src/github.com/toolrouter/toolrouter"
cd "$gopath/src/github.com/toolrouter/toolrouter/clients/go"
export GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" GOFLAGS= GOCACHE="${GOCACHE:-$HOME/.cache/go-build}"
go version
go vet ./...
go test -count=1 "$@" ./...
