//go:build tools

// Package tools pins the etcd server that hack/localcluster/build.sh builds.
package tools

import _ "go.etcd.io/etcd/server/v3"
