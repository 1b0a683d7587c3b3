package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// State is the daemon's state as a scrape reads it.
type State struct {
	// Runs counts the runs not removed, by project and workspace state.
	Runs []RunCount
	// Jobs counts jobs by state.
	Jobs map[string]int
	// AccessPending is the access requests of live runs awaiting a decision.
	AccessPending int
	// Queue counts the merge queue's entries by state.
	Queue map[string]int
	// Disk is each live overlay run's use of its disk quota.
	Disk []DiskUse
	// Nodes are the nodes of a shared store (none on SQLite).
	Nodes []NodeLease
}

// RunCount is how many runs of a project are in a state.
type RunCount struct {
	Project, State string
	N              int
}

// DiskUse is what a run wrote against its quota, in bytes.
type DiskUse struct{ Used, Quota int64 }

// NodeLease is a node's state and the age of its last lease renewal.
type NodeLease struct {
	ID, State string
	Age       time.Duration
}

// scrapeTimeout bounds the reading of the state at a scrape.
const scrapeTimeout = 5 * time.Second

// diskBuckets are the fractions of its quota a run has written.
var diskBuckets = []float64{.25, .5, .75, .9, 1}

var (
	descRuns     = prometheus.NewDesc("paddock_runs", "Runs not removed, by project and workspace state.", []string{"project", "state"}, nil)
	descJobs     = prometheus.NewDesc("paddock_jobs", "Jobs, by state.", []string{"state"}, nil)
	descAccess   = prometheus.NewDesc("paddock_access_requests_pending", "Access requests of live runs awaiting a decision.", nil, nil)
	descQueue    = prometheus.NewDesc("paddock_queue_entries", "Merge queue entries, by state.", []string{"state"}, nil)
	descDisk     = prometheus.NewDesc("paddock_run_disk_quota_used_ratio", "Live overlay runs by the fraction of their disk quota they have written.", nil, nil)
	descDiskUsed = prometheus.NewDesc("paddock_run_disk_used_bytes", "Bytes written by live overlay runs, all together.", nil, nil)
	descNodes    = prometheus.NewDesc("paddock_node_lease_age_seconds", "Seconds since each node of a shared store last renewed its lease, by node and state.", []string{"node", "state"}, nil)
	descUp       = prometheus.NewDesc("paddock_state_scrape_success", "1 if the daemon's state could be read at this scrape, else 0 (the daemon log says why).", nil, nil)
)

// stateCollector reads the state at each scrape.
type stateCollector struct{ m *Metrics }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRuns, descJobs, descAccess, descQueue, descDisk, descDiskUsed, descNodes, descUp} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	source := c.m.source
	c.m.mu.Unlock()
	if source == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	st, err := source(ctx)
	if err != nil {
		c.m.log.Warn("metrics: cannot read the daemon's state", "err", err)
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1)
	for _, r := range st.Runs {
		ch <- prometheus.MustNewConstMetric(descRuns, prometheus.GaugeValue, float64(r.N), r.Project, r.State)
	}
	for s, n := range st.Jobs {
		ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(n), s)
	}
	ch <- prometheus.MustNewConstMetric(descAccess, prometheus.GaugeValue, float64(st.AccessPending))
	for s, n := range st.Queue {
		ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(n), s)
	}
	buckets := make(map[float64]uint64, len(diskBuckets))
	var sum float64
	var used int64
	for _, d := range st.Disk {
		used += d.Used
		if d.Quota <= 0 {
			continue
		}
		f := float64(d.Used) / float64(d.Quota)
		sum += f
		for _, b := range diskBuckets {
			if f <= b {
				buckets[b]++
			}
		}
	}
	ch <- prometheus.MustNewConstHistogram(descDisk, uint64(len(st.Disk)), sum, buckets)
	ch <- prometheus.MustNewConstMetric(descDiskUsed, prometheus.GaugeValue, float64(used))
	for _, n := range st.Nodes {
		ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, n.Age.Seconds(), n.ID, n.State)
	}
}
