//go:build !linux

package natstest

import (
	"fmt"
	"runtime"
	"testing"
)

type nodeNet struct{ ns string } // never made here

// StartPartitionableCluster needs Linux network namespaces: elsewhere it
// returns an error wrapping ErrNoNetns.
func StartPartitionableCluster(t testing.TB, n int) (*Cluster, error) {
	return nil, fmt.Errorf("%w: network namespaces are a Linux feature, this is %s", ErrNoNetns, runtime.GOOS)
}

// Partition needs a cluster from StartPartitionableCluster.
func (c *Cluster) Partition(i int) { c.t.Fatal("natstest: Partition needs Linux network namespaces") }

// Heal needs a cluster from StartPartitionableCluster.
func (c *Cluster) Heal(i int) { c.t.Fatal("natstest: Heal needs Linux network namespaces") }

// InsideURL is the node's URL.
func (nd *Node) InsideURL() string { return nd.URL() }
