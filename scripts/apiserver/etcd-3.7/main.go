// Command etcd: the etcd server (go.etcd.io/etcd/server/v3's etcdmain), as etcd's own
// main.go does, built by scripts/apiserver/provision.sh for kube-apiserver v1.37.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
