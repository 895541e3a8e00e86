/*
Copyright The gpudra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package migspares

import (
	"cmp"
	"math"
	"time"
)

// Spares that follow demand. A node pool whose GPU claims are mostly
// partitions wants a spare on every node: a partition pod then finds a
// placement on the first nodes the scheduler tries, instead of trying
// every node of the fleet for the few that keep one (each node without a
// spare still costs the allocator a conversion of all its devices). A
// pool of whole-GPU claims wants the few spares the --mig-spare-nodes
// budget gives: every spare's 25 placements cost each whole-GPU pod's
// Filter calls. So the target of each pool follows the share of its
// recent GPU claims that are partitions:
//
//	P = partitions allocated recently + partition pods waiting for a spare
//	W = whole (partitionable) GPUs allocated recently
//	share = P / (P + W + Prior)
//	target = max(the budget's share of the pool,
//	             nodes × (share − MinShare) / (FullShare − MinShare))
//
// capped at the pool's nodes. "Recently" decays with the half-life: a
// claim allocated DemandHalfLife ago counts half. The claims a node holds
// when the controller first sees it (a new leader) count as allocated
// then. Prior keeps a quiet pool from following a test pod or two.

// DemandHalfLife is how fast a pool's recent claims stop counting: one
// allocated ten minutes ago counts half.
const DemandHalfLife = 10 * time.Minute

// FullShare is the share of a pool's recent GPU claims that are
// partitions at which every node of the pool keeps a spare; MinShare the
// share below which the pool keeps the budget's only.
const (
	FullShare = 0.25
	MinShare  = 0.1
)

// Prior is the whole-GPU claims a pool is assumed to have had before any
// is seen (one DGX's worth): on a quiet pool one partition claim is a
// share of 0.11, three are 0.27.
const Prior = 8

// Demand follows each node pool's partition demand from one view of the
// fleet to the next (Observe). Not safe for concurrent use: the
// controller's recompute loop owns it.
type Demand struct {
	// HalfLife is how fast recent claims stop counting (DemandHalfLife
	// when zero).
	HalfLife time.Duration
	// last are each node's claims at the last Observe: what is new is
	// what grew.
	last map[string]use
	// recent are each pool's recently allocated claims, decayed to at.
	recent map[string]*decayed
	// waiting are each pool's partition pods waiting for a spare, at the
	// last Observe.
	waiting map[string]float64
}

// use counts claims: partitions and whole GPUs.
type use struct{ partitions, wholes float64 }

type decayed struct {
	use
	at time.Time
}

// Observe reads a view of the fleet: what each node's GPUs hold, and the
// partition pods waiting for a spare (each counts in the pool of the
// first node it may go to).
func (d *Demand) Observe(now time.Time, nodes []Node, waiting []Waiting) {
	if d.last == nil {
		d.last, d.recent = map[string]use{}, map[string]*decayed{}
	}
	pools := map[string]string{}
	last := make(map[string]use, len(nodes))
	for _, n := range nodes {
		pools[n.Name] = n.Pool
		var u use
		for _, g := range n.GPUs {
			u.partitions += float64(g.Partitions)
			if g.Whole {
				u.wholes++
			}
		}
		last[n.Name] = u
		// New claims are what grew since the last view (a node seen for
		// the first time: all it holds).
		prev := d.last[n.Name]
		r := d.decayTo(n.Pool, now)
		r.partitions += max(0, u.partitions-prev.partitions)
		r.wholes += max(0, u.wholes-prev.wholes)
	}
	d.waiting = map[string]float64{}
	for _, w := range waiting {
		if len(w.Nodes) > 0 { // else no spare helps it
			d.waiting[pools[w.Nodes[0]]]++
		}
	}
	d.last = last
}

// decayTo is the pool's recent claims, decayed to now.
func (d *Demand) decayTo(pool string, now time.Time) *decayed {
	r, ok := d.recent[pool]
	if !ok {
		r = &decayed{at: now}
		d.recent[pool] = r
		return r
	}
	if dt := now.Sub(r.at); dt > 0 {
		f := math.Exp2(-dt.Seconds() / cmp.Or(d.HalfLife, DemandHalfLife).Seconds())
		r.partitions *= f
		r.wholes *= f
		r.at = now
	}
	return r
}

// Share is the share of the pool's recent GPU claims that are
// partitions, against the Prior (0 for a pool never seen).
func (d *Demand) Share(pool string, now time.Time) float64 {
	p := d.waiting[pool]
	var w float64
	if _, ok := d.recent[pool]; ok {
		r := d.decayTo(pool, now)
		p += r.partitions
		w += r.wholes
	}
	return p / (p + w + Prior)
}

// PoolTargets is the number of nodes that should have a spare in each
// pool of nodes: the budget's (t) share of the pool, at least one in a
// pool that can partition (the budget over the whole fleet, spread by
// pool size), raised by the pool's partition demand when demand is not
// nil (see the top of this file).
func (t Target) PoolTargets(nodes []Node, demand *Demand, now time.Time) Targets {
	size := map[string]int{}
	for _, n := range nodes {
		if n.Ready && len(n.GPUs) > 0 {
			size[n.Pool]++
		} else if _, ok := size[n.Pool]; !ok {
			size[n.Pool] = 0
		}
	}
	total := CanPartition(nodes)
	budget := t.Nodes(total)
	out := Targets{}
	for pool, n := range size {
		if t.Off() || n == 0 {
			out[pool] = 0
			continue
		}
		// The budget spread by size, rounded up: one pool of the whole
		// fleet keeps exactly the budget.
		base := max(1, (budget*n+total-1)/total)
		if demand != nil {
			f := (demand.Share(pool, now) - MinShare) / (FullShare - MinShare)
			want := int(math.Ceil(float64(n) * min(1, max(0, f))))
			base = max(base, want)
		}
		out[pool] = min(base, n)
	}
	return out
}
