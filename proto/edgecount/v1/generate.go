// Package edgecountv1 holds the Go types generated from edgecount.proto, the
// binary bodies of the HTTP API (v1). The server decodes them by hand
// (httpapi); these types are for clients and for the tests that check the
// two agree. Regenerate with protoc installed (apt-get install
// protobuf-compiler):
//
//	go generate ./proto/...
package edgecountv1

//go:generate sh -c "go build -o /tmp/edgecount-protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go && cd ../.. && protoc --plugin=protoc-gen-go=/tmp/edgecount-protoc-gen-go --go_out=. --go_opt=paths=source_relative edgecount/v1/edgecount.proto"
